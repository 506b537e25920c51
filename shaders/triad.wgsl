// Streaming triad micro-benchmark (the roofline's bandwidth limit on a wgpu device):
// out = b + s * c over vec4, each thread eight vec4 of each array, at strides of the item
// count so that consecutive threads touch consecutive words (coalesced on a GPU), while a
// CPU driver pays its per-invocation cost once per 384 bytes rather than once per vec4 (as
// `copy.wgsl` does, which on lavapipe measures invocations more than memory). Eight trips,
// far below Mesa's 65,535 per invocation. A map kernel (`map.wgsl`).

const PER_THREAD: u32 = 8u;

@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> c: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> triad: array<vec4<f32>>;

fn item(i: u32) {
    let s = vec4<f32>(0.5);
    for (var j = 0u; j < PER_THREAD; j = j + 1u) {
        let at = j * params.n + i;
        triad[at] = fma(s, c[at], b[at]);
    }
}
