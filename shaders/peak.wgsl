// Arithmetic peak micro-benchmark: long independent chains of fused multiply-adds on vec4,
// enough of them per thread to hide latency. The result is written so that no compiler can
// drop the work. Each thread does ITERATIONS * 8 vec4 FMAs = ITERATIONS * 64 flops.

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
        a = fma(a, m, s);
        b = fma(b, m, s);
        c = fma(c, m, s);
        d = fma(d, m, s);
        e = fma(e, m, s);
        f = fma(f, m, s);
        g = fma(g, m, s);
        h = fma(h, m, s);
    }
    out[i] = a + b + c + d + e + f + g + h;
}
