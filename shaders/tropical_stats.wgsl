// Per-row statistics of tropical operands, for the checks of resident products: for each
// row of `k` words, the first column holding NaN (-1 without one) and the largest finite
// magnitude (0 without one). NaN is found from the bits (WGSL does not promise IEEE
// comparisons with NaN), and so are the infinities, which are left out of the magnitude.
//
// Long rows are read in passes (Mesa's llvmpipe and lavapipe stop an invocation's loops
// silently after 65,535 trips): pass p reads words [p k_pass, (p + 1) k_pass) of each row and
// folds in what pass p - 1 stored. Both statistics are exact in any order.
//
// ABI shared by every kernel: binding 0 holds the chunk's item count, grid row width and pass
// index, then this kernel's parameters; the input follows, the output comes last.

struct Params {
    n: u32,
    row_threads: u32,
    _pad0: u32,
    pass_index: u32,
    // Words per row.
    k: u32,
    // Words of a row one pass reads at most.
    k_pass: u32,
    _pad3: u32,
    _pad4: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

// One thread per row (linear dispatch). Magnitudes compare as their bit patterns, which
// order finite non-negative floats exactly, so the largest is found without float compares.
@compute @workgroup_size(64)
fn row_stats(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y * params.row_threads + gid.x;
    if (row >= params.n) {
        return;
    }
    let base = row * params.k;
    let start = min(params.pass_index * params.k_pass, params.k);
    let end = min(params.k - start, params.k_pass) + start;
    var first = -1;
    var top = 0u;
    if (params.pass_index != 0u) {
        first = i32(out[row * 2u]);
        top = bitcast<u32>(out[row * 2u + 1u]);
    }
    for (var j = start; j < end; j++) {
        let bits = a[base + j] & 0x7fffffffu;
        if (bits > 0x7f800000u) {
            if (first < 0) {
                first = i32(j);
            }
        } else if (bits < 0x7f800000u) {
            top = max(top, bits);
        }
    }
    out[row * 2u] = f32(first);
    out[row * 2u + 1u] = bitcast<f32>(top);
}
