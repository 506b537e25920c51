// Streaming-copy micro-benchmark: one vec4 read and one vec4 written per thread, the memory
// traffic a kernel can reach on the device (as opposed to a driver's buffer copy, which on
// CPU adapters is a plain memcpy that no shader approaches).

struct Params {
    n: u32,
    row_threads: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> source: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> copied: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * params.row_threads + gid.x;
    if (i >= params.n) {
        return;
    }
    copied[i] = source[i];
}
