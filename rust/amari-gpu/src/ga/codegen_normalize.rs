//! WGSL of `normalize` (see `ga::codegen`): the helpers emitted before the entry point and
//! the body, in float32 and float64 by the same steps. float32 builds its powers of two and
//! `frexp` from the bits; WGSL has no 64-bit bitcast without `SHADER_INT64`, so float64 uses
//! `ldexp` of 1 (a product of normal powers of two, exact however a driver splits it), finds
//! `frexp`'s exponent by a binary search of comparisons (naga's float64 `frexp` returns an
//! i64 exponent, which needs `SHADER_INT64`; a subnormal is pre-scaled by 2^64 first, as in
//! float32), and tells NaN, infinities and the sign of zero by comparisons. `ga::host_normalize` is the host twin.

use std::fmt::Write;

use super::algebra::Algebra;
use super::operation::norm_signs;
use super::wgsl::{component, signed_sum, vec4, zero};
use crate::dtype::Dtype;

/// The helpers of `normalize` in `dtype` (float32 or float64).
pub(super) fn normalize_helpers(dtype: Dtype) -> &'static str {
    if dtype == Dtype::F64 {
        HELPERS_F64
    } else {
        HELPERS_F32
    }
}

/// WGSL helpers of `normalize`, emitted before the entry point (see [`normalize`]). Powers of
/// two are built from their exponent field and applied by multiplication, not `ldexp`: WGSL
/// leaves `ldexp` undefined past 2^128 and lets it flush below 2^-126, and Mesa computes it
/// as two products, rounding twice into the subnormals; one IEEE product rounds once.
/// `frexp` is read from the bits for the same reason: Mesa's misreads subnormals.
const HELPERS_F32: &str = "\
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

/// The float64 helpers: the float32 ones' steps (see [`HELPERS_F32`]), with the clamps of
/// float64's range (`ga::host_normalize::NormFloat::A`) and comparisons for the bit tests.
const HELPERS_F64: &str = "\
// 2^k for -1022 <= k <= 1023, exactly: a driver computing ldexp as two products multiplies
// normal powers of two, which is exact.
fn pow2(k: i32) -> f64 {
    return ldexp(1.0lf, k);
}

fn finite(v: f64) -> bool {
    return abs(v) <= 1.7976931348623157e308lf;
}

struct Split {
    fract: f64,
    exp: i32,
}

// frexp of a finite non-zero v: v = fract 2^exp, 0.5 <= |fract| < 1, by comparisons and
// exact products (naga's float64 frexp has an i64 exponent, which needs SHADER_INT64). A
// subnormal is first scaled by 2^64, exactly; k = floor(log2 |w|) by a binary search over
// the normal exponents; fract = w 2^(-k-1) by two normal powers of two. 0, inf and NaN give
// exponents the callers never use. No constant factor: a compiler may move a constant
// across products (NIR does for inexact ones), and w / 2 first would round in the
// subnormals for w in [2^-1022, 2^-1021).
fn split(v: f64) -> Split {
    let sub = abs(v) < 2.2250738585072014e-308lf;
    let w = select(v, v * pow2(64), sub);
    let a = abs(w);
    var k = -1022;
    for (var step = 1024; step > 0; step = step / 2) {
        let t = min(k + step, 1023);
        k = select(k, t, a >= pow2(t));
    }
    let m = clamp(-k - 1, -1022, 1022);
    return Split(w * pow2(m) * pow2(-k - 1 - m), k + 1 - select(0, 64, sub));
}

// v 2^e / s without forming v 2^e (see the float32 scaled_quotient): f / s lies in
// [2^-4, 2^537) (s >= 2^-537, the root of the least subnormal), so (f / s) 2^a is exact and
// normal for a in [-1018, 486] and the second product rounds once or overflows.
fn scaled_quotient(v: f64, e: i32, s: f64) -> f64 {
    let x = split(v);
    let n = x.exp + e;
    let a = clamp(n, -1018, 486);
    let q = x.fract / s * pow2(a) * pow2(clamp(n - a, -1022, 1023));
    return select(v / s, q, finite(v) && finite(s) && v != 0.0lf);
}

// The result for v in a row holding a NaN (nan) or an infinity: any NaN makes the whole
// row qnan; otherwise an infinite v is qnan and a finite one 0 with its sign (-0 told from
// +0 by the sign of 1 / v). qnan is the one quiet NaN 0x7ff8000000000000, built at run time.
fn non_finite(v: f64, nan: bool, qnan: f64) -> f64 {
    let negative = v < 0.0lf || 1.0lf / v < 0.0lf;
    return select(select(0.0lf, -0.0lf, negative), qnan, nan || !finite(v));
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
pub(super) fn normalize(src: &mut String, algebra: &Algebra, vin: bool, dtype: Dtype) {
    let blades = algebra.blades();
    let signs = norm_signs(algebra);
    let enters = |k: usize| signs[k] != 0;
    let f64 = dtype == Dtype::F64;
    if f64 {
        special_f64(src, blades, vin);
    } else {
        special_f32(src, blades, vin);
    }
    let (zero, vector) = (zero(dtype), vec4(dtype));
    if vin {
        writeln!(src, "    var m = {vector}({zero});").expect("string write");
        for v in 0..blades / 4 {
            let mask: Vec<bool> = (0..4).map(|l| enters(4 * v + l)).collect();
            if mask.iter().all(|&b| b) {
                writeln!(src, "    m = max(m, abs(a{v}));").expect("string write");
            } else if mask.iter().any(|&b| b) {
                writeln!(
                    src,
                    "    m = max(m, select({vector}({zero}), abs(a{v}), vec4<bool>({}, {}, {}, {})));",
                    mask[0], mask[1], mask[2], mask[3]
                )
                .expect("string write");
            }
        }
        src.push_str("    let mx = max(max(m.x, m.y), max(m.z, m.w));\n");
    } else {
        writeln!(src, "    var mx = {zero};").expect("string write");
        for k in (0..blades).filter(|&k| enters(k)) {
            writeln!(src, "    mx = max(mx, abs(a{k}));").expect("string write");
        }
    }
    // e lies in [-128, 149] (float32) or [-1024, 1074] (float64) for a finite non-zero mx;
    // the clamps keep pow2 defined for any.
    let (low, high) = if f64 { (-1022, 1023) } else { (-126, 127) };
    writeln!(
        src,
        "    let e = -split(mx).exp;\n    let e1 = clamp(e, {low}, 64);\n    \
         let p1 = pow2(e1);\n    let p2 = pow2(clamp(e - e1, {low}, {high}));"
    )
    .expect("string write");
    for k in (0..blades).filter(|&k| enters(k)) {
        writeln!(src, "    let y{k} = {} * p1 * p2;", component("a", k, vin))
            .expect("string write");
    }
    let terms: Vec<String> = (0..blades)
        .filter(|&k| enters(k))
        .map(|k| format!("{}y{k}", if signs[k] < 0 { "-" } else { "" }))
        .collect();
    if f64 {
        fused_norm2(src, &terms);
    } else {
        let n2 = signed_sum(
            signs
                .iter()
                .enumerate()
                .filter(|(_, &s)| s != 0)
                .map(|(k, &s)| (s, format!("y{k} * y{k}"))),
            dtype,
        );
        writeln!(src, "    let n2 = {n2};").expect("string write");
    }
    writeln!(
        src,
        "    let s = sqrt(abs(n2));\n    let keep = mx == {zero} || s == {zero};"
    )
    .expect("string write");
    let special = if f64 { "nan, qnan" } else { "top" };
    for k in 0..blades {
        let x = component("a", k, vin);
        writeln!(
            src,
            "    let r{k} = select(select(scaled_quotient({x}, e, s), {x}, keep), \
             non_finite({x}, {special}), special);"
        )
        .expect("string write");
    }
}

/// float32: `special` (the row holds a NaN or an infinity) and `top`, the row's largest bits
/// with the sign cleared, from an integer max over the bits.
fn special_f32(src: &mut String, blades: usize, vin: bool) {
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
}

/// float64: `special` (the row holds a NaN or an infinity), `nan` (a NaN: `==` is ordered,
/// false for NaN, where WGSL's `!=` is ordered too and misses it) and `qnan`, the quiet NaN
/// 0x7ff8000000000000 (0 / 0 with the sign cleared; `i & 0u` keeps it out of WGSL's
/// constant evaluation, which refuses a NaN).
fn special_f64(src: &mut String, blades: usize, vin: bool) {
    src.push_str("    var finite_row = true;\n    var nan = false;\n");
    if vin {
        for v in 0..blades / 4 {
            writeln!(
                src,
                "    finite_row = finite_row & all(abs(a{v}) <= vec4<f64>(1.7976931348623157e308lf));\n    \
                 nan = nan | any(!(a{v} == a{v}));"
            )
            .expect("string write");
        }
    } else {
        for k in 0..blades {
            writeln!(
                src,
                "    finite_row = finite_row & finite(a{k});\n    nan = nan | !(a{k} == a{k});"
            )
            .expect("string write");
        }
    }
    src.push_str(
        "    let special = !finite_row;\n    let zero = f64(i & 0u);\n    let qnan = abs(zero / zero);\n",
    );
}

/// float64's `n2`: `fma(±y0, y0, ±y1 * y1)` then `fma(±y_k, y_k, n2)` per further entering
/// blade, the contracted chain of `ga::host_normalize::norm2`. Written with `fma`, it rounds
/// as the device's `fma` does, which the host's `FmaMode` follows per dtype (probed); a plain
/// `a * a + b * b` would be contracted or not as the driver's compiler pleases, with no
/// probe to tell the host. `terms` are the signed names.
fn fused_norm2(src: &mut String, terms: &[String]) {
    let unsigned = |t: &str| t.trim_start_matches('-').to_string();
    let first = match terms {
        [] => "0.0lf".to_string(),
        [only] => format!("{only} * {}", unsigned(only)),
        [a, b, ..] => format!("fma({a}, {}, {b} * {})", unsigned(a), unsigned(b)),
    };
    writeln!(src, "    var n2 = {first};").expect("string write");
    for t in terms.iter().skip(2) {
        writeln!(src, "    n2 = fma({t}, {}, n2);", unsigned(t)).expect("string write");
    }
}
