//! The WGSL of the categorical and Gaussian maps in float64 (`categorical_outer`,
//! `gaussian_diag` on `f64` rows, for devices with `SHADER_F64`): the same arithmetic as
//! `shaders/fisher.wgsl`'s float32 entry points (one `fma` per categorical entry, IEEE
//! divisions for the Gaussian's), which keep their source and their bits. The binding
//! layout and the uniform are that file's: the input at binding 1, the output at 2.

/// The float64 source of both map entry points.
pub const SOURCE: &str = "\
// Categorical and diagonal-Gaussian Fisher maps in f64: one thread per output entry.
struct Params { n: u32, row_threads: u32, first: u32, _pad1: u32, dim: u32, tiles: u32, \
slices: u32, pairs: u32, }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<f64>;
@group(0) @binding(2) var<storage, read_write> dst: array<f64>;

fn linear_index(gid: vec3<u32>) -> u32 {
    return gid.y * params.row_threads + gid.x;
}

// Output entry t of a batch of edge x edge matrices, one per item: (item, row, column).
fn matrix_entry(t: u32, edge: u32) -> vec3<u32> {
    let per_item = edge * edge;
    let e = t % per_item;
    return vec3<u32>(t / per_item, e / edge, e % edge);
}

@compute @workgroup_size(64)
fn categorical_outer(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = linear_index(gid);
    let k = params.dim;
    if (t >= params.n * k * k) {
        return;
    }
    let at = matrix_entry(t, k);
    let pr = src[at.x * k + at.y];
    let pc = src[at.x * k + at.z];
    dst[t] = fma(-pr, pc, select(0.0lf, pr, at.y == at.z));
}

@compute @workgroup_size(64)
fn gaussian_diag(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = linear_index(gid);
    let d = params.dim;
    let edge = 2u * d;
    if (t >= params.n * edge * edge) {
        return;
    }
    let at = matrix_entry(t, edge);
    let r = at.y;
    var value = 0.0lf;
    if (r == at.z) {
        let v = src[at.x * d + r % d];
        if (r < d) {
            value = 1.0lf / v;
        } else {
            value = (0.5lf / v) / v; // not 0.5 / (v * v): v * v over- or underflows first
        }
    }
    dst[t] = value;
}
";

#[cfg(test)]
mod tests {
    #[test]
    fn the_float64_maps_validate_with_shader_f64() {
        let module = naga::front::wgsl::parse_str(super::SOURCE).expect("parses");
        let mut validator = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::FLOAT64,
        );
        validator.validate(&module).expect("validates");
        for entry in ["categorical_outer", "gaussian_diag"] {
            assert!(module.entry_points.iter().any(|e| e.name == entry), "{entry}");
        }
    }
}
