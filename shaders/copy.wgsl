// Streaming-copy micro-benchmark: one vec4 read and one vec4 written per thread, the memory
// traffic a kernel can reach on the device (as opposed to a driver's buffer copy, which on
// CPU adapters is a plain memcpy that no shader approaches). A map kernel (`map.wgsl`).

@group(0) @binding(1) var<storage, read> source: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> copied: array<vec4<f32>>;

fn item(i: u32) {
    copied[i] = source[i];
}
