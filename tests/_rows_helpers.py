"""Row kernels (WGSL ``fn row``) shared by the ``map_rows`` tests of numpy operands
(test_map_rows.py) and of DeviceArrays (test_device_array_rows.py): two, three and four arrays,
a ``(C,)`` broadcast, params, and a helper function beside ``row``."""

from __future__ import annotations

AFFINE = """
// Affine map of each point by one (3,) offset, scaled by params.scale.
fn row(p: array<f32, 3>, offset: array<f32, 3>) -> array<f32, 3> {
    var r: array<f32, 3>;
    for (var j = 0; j < 3; j++) {
        r[j] = params.scale * p[j] + offset[j];
    }
    return r;
}
"""

THREE = """
fn clampf(x: f32) -> f32 { return clamp(x, -params.limit, params.limit); }

fn row(a: array<f32, 2>, b: array<f32, 4>, w: array<f32, 1>) -> array<f32, 1> {
    let dot = a[0] * b[0] + a[1] * b[1];
    return array<f32, 1>(clampf(dot * w[0] + b[2] - b[3]));
}
"""

FOUR = """
fn row(a: array<f32, 1>, b: array<f32, 1>, c: array<f32, 2>, d: array<f32, 1>) -> array<f32, 4> {
    return array<f32, 4>(a[0] + b[0], c[0] * c[1], d[0] - a[0], params.k);
}
"""
