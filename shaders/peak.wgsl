// Arithmetic-peak micro-benchmarks: long independent chains of one operation on vec4, enough
// of them per thread to hide latency. The operation is `step`, appended after this file by
// `shaders.rs` (a fused multiply-add for calibration's peak, an add, or the max-plus step: an
// add then a max). Each thread runs ITERATIONS * 8 vec4 steps, 256 loop trips: far below the
// 65,535 trips after which Mesa's CPU drivers stop an invocation's loops. The result is
// written so that no compiler can drop the work.

// A map kernel (`map.wgsl`).

const ITERATIONS: u32 = 256u;

@group(0) @binding(1) var<storage, read> seed: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;

fn item(i: u32) {
    let s = seed[i];
    let m = vec4<f32>(0.999, 0.998, 0.997, 0.996);
    var a = s;
    var b = s + 1.0;
    var c = s + 2.0;
    var d = s + 3.0;
    var e = s + 4.0;
    var f = s + 5.0;
    var g = s + 6.0;
    var h = s + 7.0;
    for (var k = 0u; k < ITERATIONS; k = k + 1u) {
        a = step(a, m, s);
        b = step(b, m, s);
        c = step(c, m, s);
        d = step(d, m, s);
        e = step(e, m, s);
        f = step(f, m, s);
        g = step(g, m, s);
        h = step(h, m, s);
    }
    out[i] = a + b + c + d + e + f + g + h;
}
