// One explicit Jacobi step of the 2-D heat equation on a band of rows:
//   u' = u + alpha * ((up + down) + (left + right) - 4u)
// The sum is bracketed and the update is an explicit fma so that every device computes the
// same bits for a cell whatever band it sits in (drivers may not contract or reorder it).
// Dirichlet cells on the grid's outer frame keep their value.

struct Params {
    width: u32,        // cells per row (and words: one f32 per cell)
    height: u32,       // rows of the whole grid
    row0: u32,         // global row of buffer row 0 (Dirichlet only)
    lo: u32,           // first buffer row this step computes
    hi: u32,           // one past the last
    slice_rows: u32,   // rows per z slice of the dispatch (at most the y limit)
    periodic: u32,     // 1: wrap both directions; 0: Dirichlet frame
    alpha: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // x: column, y + z: row (z slices only for bands taller than the y limit).
    let c = gid.x;
    let r = p.lo + gid.y + gid.z * p.slice_rows;
    if (c >= p.width || r >= p.hi) {
        return;
    }
    let i = r * p.width + c;
    let u = src[i];
    if (p.periodic == 0u) {
        let g = p.row0 + r;
        if (g == 0u || g + 1u == p.height || c == 0u || c + 1u == p.width) {
            dst[i] = u;
            return;
        }
    }
    let row = r * p.width;
    let left = select(c - 1u, p.width - 1u, c == 0u);
    let right = select(c + 1u, 0u, c + 1u == p.width);
    let s = (src[i - p.width] + src[i + p.width]) + (src[row + left] + src[row + right]);
    dst[i] = fma(p.alpha, s - 4.0 * u, u);
}
