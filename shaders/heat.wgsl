// One explicit Jacobi step of the 2-D heat equation on a band of rows:
//   u' = u + alpha * ((up + down) + (left + right) - 4u)
// The sum is bracketed and the update is an explicit fma so that every device computes the
// same bits for a cell whatever band it sits in (drivers may not contract or reorder it).
// Dirichlet cells on the grid's outer frame keep their value.
//
// Rows are padded to whole vec4s and one thread updates four cells: three vec4 loads (the
// cells, the row above, the row below) and the two cells beside them, instead of five loads
// per cell. Padding cells stay as they are.
//
// The cells' type: f32, or f64 in the float64 kernel (the same text with this one line
// changed, for devices with SHADER_F64; `domain::rule` makes it).
alias Real = f32;

struct Params {
    width: u32,        // cells per row
    height: u32,       // rows of the whole grid
    row0: u32,         // global row of buffer row 0 (Dirichlet only)
    lo: u32,           // first buffer row this step computes
    hi: u32,           // one past the last
    slice_rows: u32,   // rows per z slice of the dispatch (at most the y limit)
    periodic: u32,     // 1: wrap both directions; 0: Dirichlet frame
    row_vecs: u32,     // vec4s per row (width / 4 rounded up)
    alpha: Real,       // word 8 (f32), or words 8 and 9 (f64: 8-byte aligned there)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<Real>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<Real>>;

fn cell(row: u32, c: u32) -> Real {
    return src[row * p.row_vecs + (c >> 2u)][c & 3u];
}

@compute @workgroup_size(64, 4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    // x: vec4 within the row, y + z: row (z slices only for bands taller than the y limit).
    let q = gid.x;
    let r = p.lo + gid.y + gid.z * p.slice_rows;
    if (q >= p.row_vecs || r >= p.hi) {
        return;
    }
    let i = r * p.row_vecs + q;
    let u = src[i];
    if (p.periodic == 0u) {
        let g = p.row0 + r;
        if (g == 0u || g + 1u == p.height) {
            dst[i] = u;
            return;
        }
    }
    let c0 = q * 4u;
    let last = p.width - 1u;
    // Left neighbours: the cell before the vec4 (wrapping to the row's last), then u.xyz.
    let left = vec4<Real>(cell(r, select(c0 - 1u, last, c0 == 0u)), u.x, u.y, u.z);
    // Right neighbours: u.yzw, then the cell after the vec4; the row's last cell wraps to
    // its first.
    var right = vec4<Real>(u.y, u.z, u.w, 0.0);
    if (c0 + 3u < last) {
        right.w = cell(r, c0 + 4u);
    } else {
        right[last - c0] = cell(r, 0u);
    }
    let s = (src[i - p.row_vecs] + src[i + p.row_vecs]) + (left + right);
    let next = fma(vec4<Real>(p.alpha), s - 4.0 * u, u);
    let c = vec4<u32>(c0, c0 + 1u, c0 + 2u, c0 + 3u);
    // Padding cells, and on a Dirichlet grid the first and last columns, keep their value.
    let frame = (c == vec4<u32>(0u)) | (c == vec4<u32>(last));
    let keep = (c > vec4<u32>(last)) | (frame & vec4<bool>(p.periodic == 0u));
    dst[i] = select(next, u, keep);
}
