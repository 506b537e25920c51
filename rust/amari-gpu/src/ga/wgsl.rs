//! WGSL pieces the geometric-algebra generators share (`ga::codegen`, `ga::codegen_map`):
//! component names, signed sums, the bindings and entry point every kernel of the crate has (see
//! `kernel.rs`), the store of a result row, and the scalar type a kernel computes in
//! (a `Dtype`: the one parameter that makes a float64 kernel of the same generator).

use std::fmt::Write;

use crate::dtype::Dtype;

/// A zero literal of `dtype`'s WGSL type: a float32 kernel is spelled exactly as it always
/// was (`0.0`); a float64 one writes `0.0lf` (a bare `0.0` bound by `let` would be an f32).
pub(super) fn zero(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::F64 => "0.0lf",
        Dtype::F16 => "0.0h",
        Dtype::F32 => "0.0",
    }
}

/// `vec4<T>` of `dtype`'s WGSL type.
pub(super) fn vec4(dtype: Dtype) -> String {
    format!("vec4<{}>", dtype.wgsl())
}

const LANES: [char; 4] = ['x', 'y', 'z', 'w'];

/// The WGSL name of component `k` of the row loaded into `prefix`.
pub(super) fn component(prefix: &str, k: usize, vectorized: bool) -> String {
    if vectorized {
        format!("{prefix}{}.{}", k / 4, LANES[k % 4])
    } else {
        format!("{prefix}{k}")
    }
}

/// The shared bindings and the entry point's opening: the uniform header at binding 0, one
/// read-only array of element type `inputs[s]` at binding `s + 1`, the result `output` last,
/// then `main` up to the bounds check of row `i`.
pub(super) fn entry(src: &mut String, inputs: &[&str], output: &str) {
    src.push_str(
        "struct Params {\n    n: u32,\n    row_threads: u32,\n    _pad0: u32,\n    _pad1: u32,\n}\n\n\
         @group(0) @binding(0) var<uniform> params: Params;\n",
    );
    for (slot, element) in inputs.iter().enumerate() {
        writeln!(
            src,
            "@group(0) @binding({}) var<storage, read> in{slot}: array<{element}>;",
            slot + 1
        )
        .expect("string write");
    }
    writeln!(
        src,
        "@group(0) @binding({}) var<storage, read_write> out: array<{output}>;\n\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{\n    \
         let i = gid.y * params.row_threads + gid.x;\n    \
         if (i >= params.n) {{\n        return;\n    }}",
        inputs.len() + 1,
    )
    .expect("string write");
}

/// The value of storage element `element` (a `vec4` when `vectorized`) in the type a kernel
/// of `dtype` computes in: float16 is widened to float32 (exactly), others are as stored.
pub(super) fn load(dtype: Dtype, vectorized: bool, element: &str) -> String {
    match (dtype, vectorized) {
        (Dtype::F16, true) => format!("vec4<f32>({element})"),
        (Dtype::F16, false) => format!("f32({element})"),
        _ => element.to_string(),
    }
}

/// Stores `r0 .. r{out_words - 1}` as row `i` of `out` (as `vec4`s of `dtype` when
/// `out_words` is a multiple of 4). float16 results are computed in float32 and rounded
/// once here, at the store.
pub(super) fn store(src: &mut String, out_words: usize, dtype: Dtype) {
    let vout = out_words.is_multiple_of(4);
    let out_row = if vout { out_words / 4 } else { out_words };
    for m in 0..out_row {
        let value = if vout {
            format!(
                "{}(r{}, r{}, r{}, r{})",
                vec4(dtype.compute()),
                4 * m,
                4 * m + 1,
                4 * m + 2,
                4 * m + 3
            )
        } else {
            format!("r{m}")
        };
        let value = match (dtype, vout) {
            (Dtype::F16, true) => format!("vec4<f16>({value})"),
            (Dtype::F16, false) => format!("f16({value})"),
            _ => value,
        };
        writeln!(src, "    out[{out_row}u * i + {m}u] = {value};").expect("string write");
    }
}

/// Terms per source line of a long sum, for a readable generated file.
const TERMS_PER_LINE: usize = 8;

/// `±f0 ± f1 ...` over signed factor pairs, or a zero of `dtype` when there is none.
pub(super) fn signed_sum(terms: impl Iterator<Item = (i8, String)>, dtype: Dtype) -> String {
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
