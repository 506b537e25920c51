//! WGSL generation: one fully unrolled kernel per (algebra, operation, broadcast), written
//! from the operation's terms. Every multivector component is a named value, every output
//! a chain of fused multiply-adds over its terms in a fixed order, so the result of a row
//! depends only on the row (never on the chunk or device it ran in). Rows of 4k words are read and written as
//! `vec4` (16-byte accesses); smaller algebras use plain `f32` words.
//!
//! The binding layout is the one every kernel of the crate shares (see `kernel.rs`): the
//! uniform header at binding 0, the operands at 1 (and 2), the result last.
//!
//! The scalar type is a parameter (`Dtype`): a float64 kernel is the same source with `f64`
//! values, loads, arithmetic and stores (for devices with `SHADER_F64`); a float32 one is
//! spelled exactly as it always was. A float16 kernel stores its rows as `f16` (`enable f16;`,
//! for devices with `SHADER_F16`), widens each loaded value to `f32`, runs the float32
//! kernel's arithmetic unchanged and rounds each result once to `f16` at the store.
//! `normalize` is float32 only (its exact power-of-two scaling reads the float32 bit layout, which WGSL has no 64-bit integers to do in float64).

use std::fmt::Write;

use super::algebra::Algebra;
use super::codegen_map::generate_map;
use super::wgsl::{component, entry, load, store, vec4, zero};
use crate::dtype::Dtype;
use super::operation::{linear_terms, norm_signs, product_terms, sandwich_terms, Operation, Term};

/// Which operand of a product is one multivector bound whole for every item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Broadcast {
    /// Both operands are batches (or the operation is unary).
    None,
    /// The left operand (`a`, or the rotor `r` of a sandwich) is a single multivector.
    Left,
    /// The right operand is a single multivector.
    Right,
}

impl Broadcast {
    /// Short name used in kernel ids.
    pub fn name(&self) -> &'static str {
        match self {
            Broadcast::None => "nn",
            Broadcast::Left => "1n",
            Broadcast::Right => "n1",
        }
    }
}

/// Terms per source line of a long sum, for a readable generated file.
const TERMS_PER_LINE: usize = 8;

/// `±f0 ± f1 ...` over signed factor pairs, or a zero of `dtype` when there is none.
fn signed_sum(terms: impl Iterator<Item = (i8, String)>, dtype: Dtype) -> String {
    let mut sum = String::new();
    for (n, (sign, product)) in terms.enumerate() {
        if n > 0 && n % TERMS_PER_LINE == 0 {
            sum.push_str("\n       ");
        }
        match (n, sign < 0) {
            (0, false) => sum.push_str(&product),
            (0, true) => write!(sum, "-{product}").expect("string write"),
            (_, false) => write!(sum, " + {product}").expect("string write"),
            (_, true) => write!(sum, " - {product}").expect("string write"),
        }
    }
    if sum.is_empty() {
        sum.push_str(zero(dtype));
    }
    sum
}

/// For every result blade of `terms`: `var {out}{k} = x0 * y0;` then one
/// `{out}{k} = fma(xn, yn, {out}{k});` per further term (or `let {out}{k} = 0.0;`, a zero of
/// `dtype`). Fused multiply-adds round once per term instead of twice and halve the
/// arithmetic instructions, which the larger algebras are bound by.
fn products(
    src: &mut String,
    (out, terms, blades): (&str, &[Term], usize),
    (l, r): (&str, &str),
    dtype: Dtype,
) {
    for k in 0..blades {
        let mut first = true;
        for t in terms.iter().filter(|t| t.k == k) {
            let neg = if t.sign < 0 { "-" } else { "" };
            let (x, y) = (operand(l, t.i), operand(r, t.j));
            if first {
                writeln!(src, "    var {out}{k} = {neg}{x} * {y};").expect("string write");
                first = false;
            } else {
                writeln!(src, "    {out}{k} = fma({neg}{x}, {y}, {out}{k});")
                    .expect("string write");
            }
        }
        if first {
            writeln!(src, "    let {out}{k} = {};", zero(dtype)).expect("string write");
        }
    }
}

/// Operand names are `a:V`/`b:V` for loaded rows (V: vectorized) and `t` for temporaries.
fn operand(spec: &str, k: usize) -> String {
    match spec.split_once(':') {
        Some((prefix, v)) => component(prefix, k, v == "v"),
        None => format!("{spec}{k}"),
    }
}

/// The WGSL source of `op` in `algebra` with the given broadcast, computing in `dtype`
/// (float32, or float64 for every operation but `normalize`; the caller checks that with
/// `Operation::check_dtype`). A sandwich by one rotor (`Broadcast::Left`) is the linear map
/// of `ga::codegen_map`.
pub fn generate(algebra: &Algebra, op: Operation, broadcast: Broadcast, dtype: Dtype) -> String {
    if (op, broadcast) == (Operation::Sandwich, Broadcast::Left) {
        return generate_map(algebra, dtype);
    }
    let blades = algebra.blades();
    let out_words = op.output_words(algebra);
    let vin = blades.is_multiple_of(4);
    let vout = out_words.is_multiple_of(4);
    let operands = op.operands();
    let mut src = String::new();
    writeln!(
        src,
        "// Generated by amari-gpu's geometric-algebra code generator (ga::codegen); do not edit.\n\
         // {} {}, broadcast {}: {} words per multivector in bitmask blade order.\n",
        algebra.label(),
        op.name(),
        broadcast.name(),
        blades
    )
    .expect("string write");
    src.push_str(dtype.wgsl_enable());
    if op == Operation::Normalize {
        src.push_str(NORMALIZE_HELPERS);
    }
    let (scalar, vector) = (dtype.wgsl().to_string(), vec4(dtype));
    // What the arithmetic runs in: float16 rows are widened to float32 on load.
    let compute = dtype.compute();
    let row = if vin { vector.as_str() } else { scalar.as_str() };
    let inputs = vec![row; operands.len()];
    entry(&mut src, &inputs, if vout { &vector } else { &scalar });
    let per_row = if vin { blades / 4 } else { blades };
    for (slot, prefix) in ["a", "b"].iter().take(operands.len()).enumerate() {
        let whole = matches!(
            (slot, broadcast),
            (0, Broadcast::Left) | (1, Broadcast::Right)
        );
        for m in 0..per_row {
            let index = if whole {
                format!("{m}u")
            } else {
                format!("{per_row}u * i + {m}u")
            };
            let value = load(dtype, vin, &format!("in{slot}[{index}]"));
            writeln!(src, "    let {prefix}{m} = {value};").expect("string write");
        }
    }
    let (a, b) = if vin { ("a:v", "b:v") } else { ("a:s", "b:s") };
    match op {
        Operation::Geometric | Operation::Outer | Operation::Inner | Operation::Scalar => {
            let terms = product_terms(algebra, op);
            products(&mut src, ("r", &terms, out_words), (a, b), compute);
        }
        Operation::Sandwich => {
            let (first, second) = sandwich_terms(algebra);
            products(&mut src, ("t", &first, blades), (a, b), compute);
            products(&mut src, ("r", &second, blades), ("t", a), compute);
        }
        Operation::Normalize => normalize(&mut src, algebra, vin),
        _ => {
            let terms = linear_terms(algebra, op);
            for k in 0..blades {
                let value = signed_sum(
                    terms
                        .iter()
                        .filter(|t| t.1 == k)
                        .map(|&(i, _, sign)| (sign, operand(a, i))),
                    compute,
                );
                writeln!(src, "    let r{k} = {value};").expect("string write");
            }
        }
    }
    store(&mut src, out_words, dtype);
    src.push_str("}\n");
    src
}

/// WGSL helpers of `normalize`, emitted before the entry point (see [`normalize`]). Powers of
/// two are built from their exponent field and applied by multiplication, not `ldexp`: WGSL
/// leaves `ldexp` undefined past 2^128 and lets it flush below 2^-126, and Mesa computes it
/// as two products, rounding twice into the subnormals; one IEEE product rounds once.
/// `frexp` is read from the bits for the same reason: Mesa's misreads subnormals.
const NORMALIZE_HELPERS: &str = "\
// 2^k for -126 <= k <= 127, exactly.
fn pow2(k: i32) -> f32 {
    return bitcast<f32>(u32(k + 127) << 23u);
}

fn finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

struct Split {
    fract: f32,
    exp: i32,
}

// frexp of a finite non-zero v: v = fract 2^exp, 0.5 <= |fract| < 1. A subnormal is first
// scaled by 2^64, exactly. 0 gives exp -190 and inf/NaN exp 129: callers keep them apart.
fn split(v: f32) -> Split {
    let sub = (bitcast<u32>(v) & 0x7f800000u) == 0u;
    let bits = bitcast<u32>(select(v, v * pow2(64), sub));
    let fract = bitcast<f32>((bits & 0x807fffffu) | 0x3f000000u);
    return Split(fract, i32((bits >> 23u) & 0xffu) - select(126, 190, sub));
}

// v 2^e / s without forming v 2^e, which overflows for a large null component beside tiny
// entering ones: (f / s) 2^a 2^b with v = f 2^ev and a + b = ev + e. f / s lies in
// [2^-4, 2^75) (0.5 <= |f| < 1, 2^-74.5 <= s <= 8), so the first product is exact and
// normal, the second rounds once (into the subnormals) or overflows; past the clamps the
// result is 0 or inf either way. Zero, inf and NaN (in v or s) take v / s.
fn scaled_quotient(v: f32, e: i32, s: f32) -> f32 {
    let x = split(v);
    let n = x.exp + e;
    let a = clamp(n, -122, 52);
    let q = x.fract / s * pow2(a) * pow2(clamp(n - a, -126, 127));
    return select(v / s, q, finite(v) && finite(s) && v != 0.0);
}

// The result for v in a row holding a NaN or an infinity, top the row's largest bits with
// the sign cleared (> 0x7f800000: a NaN): any NaN makes the whole row NaN; otherwise an
// infinite v is NaN and a finite one 0 with its sign. Every NaN is the one quiet NaN
// 0x7fc00000, built at run time (WGSL refuses a NaN constant; top & 0u is not constant).
fn non_finite(v: f32, top: u32) -> f32 {
    let bits = bitcast<u32>(v);
    let nan = bitcast<f32>(0x7fc00000u | (top & 0u));
    let is_nan = top > 0x7f800000u || (bits & 0x7fffffffu) >= 0x7f800000u;
    return select(bitcast<f32>(bits & 0x80000000u), nan, is_nan);
}

";

/// x / sqrt(|⟨x x̃⟩₀|) computed on y = x / 2^e with 2^e the power of two just above the
/// largest |x_i| among the blades that enter the norm (null blades of a degenerate metric do
/// not, and a large null part must not push the others' squares into underflow): the
/// scaling is exact, so no square overflows or underflows and rows of small integers keep
/// exact norms (an exactly null row stays null). The scaling is two products by powers of
/// two of at most 2^64 up (a subnormal maximum needs up to 2^149). Each result is
/// `scaled_quotient` (x_k 2^e) / s, which never forms x_k 2^e: a null x_k far larger than
/// the entering ones would overflow there although the quotient is finite. Results in the
/// normal range are those of (x_k 2^e) / s bit for bit (scaling by a power of two commutes
/// with rounding there); a subnormal result is rounded twice (the quotient, then to the
/// subnormal grid), so it is within 2^-149 of the exact x_k / |x|, not 2^-150. Rows that are
/// zero or null (⟨x x̃⟩₀ = 0) are kept as they are. Rows holding a NaN or an infinity, in any
/// blade, take `non_finite` instead (as `ga::host_normalize::non_finite_row`): found from the
/// bits by an integer max, because a float max may drop a NaN and the sum of squares never
/// sees one in a null blade.
fn normalize(src: &mut String, algebra: &Algebra, vin: bool) {
    let blades = algebra.blades();
    let signs = norm_signs(algebra);
    let enters = |k: usize| signs[k] != 0;
    if vin {
        src.push_str("    var t = vec4<u32>(0u);\n");
        for v in 0..blades / 4 {
            writeln!(
                src,
                "    t = max(t, bitcast<vec4<u32>>(a{v}) & vec4<u32>(0x7fffffffu));"
            )
            .expect("string write");
        }
        src.push_str("    let top = max(max(t.x, t.y), max(t.z, t.w));\n");
    } else {
        src.push_str("    var top = 0u;\n");
        for k in 0..blades {
            writeln!(src, "    top = max(top, bitcast<u32>(a{k}) & 0x7fffffffu);")
                .expect("string write");
        }
    }
    src.push_str("    let special = top >= 0x7f800000u;\n");
    if vin {
        src.push_str("    var m = vec4<f32>(0.0);\n");
        for v in 0..blades / 4 {
            let mask: Vec<bool> = (0..4).map(|l| enters(4 * v + l)).collect();
            if mask.iter().all(|&b| b) {
                writeln!(src, "    m = max(m, abs(a{v}));").expect("string write");
            } else if mask.iter().any(|&b| b) {
                writeln!(
                    src,
                    "    m = max(m, select(vec4<f32>(0.0), abs(a{v}), vec4<bool>({}, {}, {}, {})));",
                    mask[0], mask[1], mask[2], mask[3]
                )
                .expect("string write");
            }
        }
        src.push_str("    let mx = max(max(m.x, m.y), max(m.z, m.w));\n");
    } else {
        src.push_str("    var mx = 0.0;\n");
        for k in (0..blades).filter(|&k| enters(k)) {
            writeln!(src, "    mx = max(mx, abs(a{k}));").expect("string write");
        }
    }
    // e lies in [-128, 149] for a finite non-zero mx; the clamps keep pow2 defined for any.
    src.push_str(
        "    let e = -split(mx).exp;\n    let e1 = clamp(e, -126, 64);\n    \
         let p1 = pow2(e1);\n    let p2 = pow2(clamp(e - e1, -126, 127));\n",
    );
    for k in (0..blades).filter(|&k| enters(k)) {
        writeln!(src, "    let y{k} = {} * p1 * p2;", component("a", k, vin))
            .expect("string write");
    }
    let n2 = signed_sum(
        signs
            .iter()
            .enumerate()
            .filter(|(_, &s)| s != 0)
            .map(|(k, &s)| (s, format!("y{k} * y{k}"))),
        Dtype::F32,
    );
    writeln!(
        src,
        "    let n2 = {n2};\n    let s = sqrt(abs(n2));\n    let keep = mx == 0.0 || s == 0.0;"
    )
    .expect("string write");
    for k in 0..blades {
        let x = component("a", k, vin);
        writeln!(
            src,
            "    let r{k} = select(select(scaled_quotient({x}, e, s), {x}, keep), \
             non_finite({x}, top), special);"
        )
        .expect("string write");
    }
}
