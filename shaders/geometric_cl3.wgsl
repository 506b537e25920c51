// Geometric product in Cl(3,0), one multivector pair per thread.
//
// Multivectors are 8 floats in bitmask blade order (1, e1, e2, e12, e3, e13, e23, e123),
// read as two vec4 so that loads and stores are 16-byte wide. The product below is the
// Cayley table of Cl(3,0) expanded term by term (generated from the blade bitmasks).
//
// A map kernel (`map.wgsl`).

@group(0) @binding(1) var<storage, read> lhs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> rhs: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

fn item(i: u32) {
    let a0 = lhs[2u * i];
    let a1 = lhs[2u * i + 1u];
    let b0 = rhs[2u * i];
    let b1 = rhs[2u * i + 1u];
    let r0 = a0.x * b0.x + a0.y * b0.y + a0.z * b0.z - a0.w * b0.w + a1.x * b1.x - a1.y * b1.y - a1.z * b1.z - a1.w * b1.w;
    let r1 = a0.x * b0.y + a0.y * b0.x - a0.z * b0.w + a0.w * b0.z - a1.x * b1.y + a1.y * b1.x - a1.z * b1.w - a1.w * b1.z;
    let r2 = a0.x * b0.z + a0.y * b0.w + a0.z * b0.x - a0.w * b0.y - a1.x * b1.z + a1.y * b1.w + a1.z * b1.x + a1.w * b1.y;
    let r3 = a0.x * b0.w + a0.y * b0.z - a0.z * b0.y + a0.w * b0.x + a1.x * b1.w - a1.y * b1.z + a1.z * b1.y + a1.w * b1.x;
    let r4 = a0.x * b1.x + a0.y * b1.y + a0.z * b1.z - a0.w * b1.w + a1.x * b0.x - a1.y * b0.y - a1.z * b0.z - a1.w * b0.w;
    let r5 = a0.x * b1.y + a0.y * b1.x - a0.z * b1.w + a0.w * b1.z - a1.x * b0.y + a1.y * b0.x - a1.z * b0.w - a1.w * b0.z;
    let r6 = a0.x * b1.z + a0.y * b1.w + a0.z * b1.x - a0.w * b1.y - a1.x * b0.z + a1.y * b0.w + a1.z * b0.x + a1.w * b0.y;
    let r7 = a0.x * b1.w + a0.y * b1.z - a0.z * b1.y + a0.w * b1.x + a1.x * b0.w - a1.y * b0.z + a1.z * b0.y + a1.w * b0.x;
    out[2u * i] = vec4<f32>(r0, r1, r2, r3);
    out[2u * i + 1u] = vec4<f32>(r4, r5, r6, r7);
}
