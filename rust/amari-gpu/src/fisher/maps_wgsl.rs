//! The WGSL of the family's per-sample maps, `categorical_outer` and `gaussian_diag`,
//! generated for a scalar type: float32 (every device) and float64 (devices with
//! `SHADER_F64`) are the same text but for the type and its literals, so both compute the
//! same arithmetic (one `fma` per categorical entry, IEEE divisions for the Gaussian's). The
//! binding layout and the uniform are `shaders/fisher.wgsl`'s: the input at binding 1, the
//! output at 2.

use std::sync::OnceLock;

use crate::dtype::Dtype;

/// The source of both map entry points in `dtype` (float32 or float64; float16 takes
/// float32's), made once per process.
pub fn source(dtype: Dtype) -> &'static str {
    static F32: OnceLock<String> = OnceLock::new();
    static F64: OnceLock<String> = OnceLock::new();
    match dtype {
        Dtype::F64 => F64.get_or_init(|| generate(Dtype::F64)),
        Dtype::F16 | Dtype::F32 => F32.get_or_init(|| generate(Dtype::F32)),
    }
}

/// The source in `dtype`: a float32 literal is spelled as always (`0.5`), a float64 one
/// with its `lf` suffix (a bare literal bound by `var` would be an f32).
fn generate(dtype: Dtype) -> String {
    let t = dtype.wgsl();
    let lit = |v: &str| match dtype {
        Dtype::F64 => format!("{v}lf"),
        Dtype::F16 | Dtype::F32 => v.to_string(),
    };
    let (zero, one, half) = (lit("0.0"), lit("1.0"), lit("0.5"));
    format!(
        "// Categorical and diagonal-Gaussian Fisher maps in {t}: one thread per output entry.
struct Params {{ n: u32, row_threads: u32, first: u32, _pad1: u32, dim: u32, tiles: u32, \
slices: u32, pairs: u32, }}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<{t}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{t}>;

fn linear_index(gid: vec3<u32>) -> u32 {{
    return gid.y * params.row_threads + gid.x;
}}

// Output entry t of a batch of edge x edge matrices, one per item: (item, row, column).
fn matrix_entry(t: u32, edge: u32) -> vec3<u32> {{
    let per_item = edge * edge;
    let e = t % per_item;
    return vec3<u32>(t / per_item, e / edge, e % edge);
}}

// F_rc = p_r [r == c] - p_r p_c for each (N, K) row, written as (N, K, K).
@compute @workgroup_size(64)
fn categorical_outer(@builtin(global_invocation_id) gid: vec3<u32>) {{
    let t = linear_index(gid);
    let k = params.dim;
    if (t >= params.n * k * k) {{
        return;
    }}
    let at = matrix_entry(t, k);
    let pr = src[at.x * k + at.y];
    let pc = src[at.x * k + at.z];
    dst[t] = fma(-pr, pc, select({zero}, pr, at.y == at.z));
}}

// The (2D, 2D) block-diagonal matrix diag(1 / var, 1 / (2 var^2)) of each (N, D) row.
@compute @workgroup_size(64)
fn gaussian_diag(@builtin(global_invocation_id) gid: vec3<u32>) {{
    let t = linear_index(gid);
    let d = params.dim;
    let edge = 2u * d;
    if (t >= params.n * edge * edge) {{
        return;
    }}
    let at = matrix_entry(t, edge);
    let r = at.y;
    var value = {zero};
    if (r == at.z) {{
        let v = src[at.x * d + r % d];
        if (r < d) {{
            value = {one} / v;
        }} else {{
            value = ({half} / v) / v; // not 0.5 / (v * v): v * v over- or underflows first
        }}
    }}
    dst[t] = value;
}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_maps_validate_in_each_dtype() {
        for (dtype, capabilities) in [
            (Dtype::F32, naga::valid::Capabilities::empty()),
            (Dtype::F64, naga::valid::Capabilities::FLOAT64),
        ] {
            let module = naga::front::wgsl::parse_str(source(dtype)).expect("parses");
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities)
                .validate(&module)
                .expect("validates");
            for entry in ["categorical_outer", "gaussian_diag"] {
                assert!(module.entry_points.iter().any(|e| e.name == entry), "{entry}");
            }
        }
        assert!(source(Dtype::F64).contains("array<f64>") && source(Dtype::F64).contains("0.5lf"));
        assert!(!source(Dtype::F32).contains("lf"));
    }
}
