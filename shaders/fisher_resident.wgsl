// The two passes the empirical Fisher matrix makes over resident scores before its SYRK
// (`fisher.wgsl`): the largest magnitude of every column, from which the host chooses the
// exact power-of-two scaling, and the rows as the SYRK reads them (scaled, padded with zero
// columns to a multiple of 4). Both work on the bits: WGSL promises neither IEEE compares
// with NaN nor subnormals (a driver may flush them), and the scaled rows must be the host's
// `(f64(v) * 2^a) as f32`, bit for bit, for the SYRK to see what the numpy path sees.
//
// ABI shared by every kernel: binding 0 holds the chunk's item count, grid row width and
// first row, then this kernel's parameters; inputs follow, the output comes last.

struct Params {
    n: u32,
    row_threads: u32,
    first: u32, // column_max: the chunk's first row in the bound rows
    _pad0: u32,
    p: u32,     // score columns
    width: u32, // prepare_rows: padded columns, a multiple of 4 and >= p
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;

// ---------------------------------------------------------------------------------------
// Largest magnitude of every column over the chunk's rows, as bits: magnitudes of finite
// floats order as their bit patterns, and anything at or above 0x7f800000 is an infinity
// or a NaN, which the host reports. The rows are cut into SLICES near-equal runs, one
// workgroup row per run (so even a chunk of a few columns keeps every core busy), and each
// thread takes one column of its run: the chunk's partial is SLICES x p maxima, which the
// host folds (a maximum is exact in any order).

const SLICES: u32 = 16u; // COLUMN_SLICES in host/fisher_resident.rs

@group(0) @binding(2) var<storage, read_write> column_top: array<u32>;

@compute @workgroup_size(64)
fn column_max(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    let slice = gid.y;
    if (j >= params.p) {
        return;
    }
    let base = params.n / SLICES;
    let extra = params.n % SLICES;
    let start = slice * base + min(slice, extra);
    let end = start + base + select(0u, 1u, slice < extra);
    var top = 0u;
    for (var r = start; r < end; r = r + 1u) {
        top = max(top, src[(params.first + r) * params.p + j] & 0x7fffffffu);
    }
    column_top[slice * params.p + j] = top;
}

// ---------------------------------------------------------------------------------------
// Rows scaled by 2^exponent[j] per column and padded to `width` columns, one thread per
// row (linear dispatch; one per word measured 2x slower on lavapipe, index arithmetic
// dominating).

@group(0) @binding(2) var<storage, read> exponent: array<i32>;
@group(0) @binding(3) var<storage, read_write> prepared: array<u32>;

// v 2^a for the float32 bits of a finite v, correctly rounded (to nearest, ties to even),
// from the integer fields alone. Exact unless the result is subnormal; mirrored in
// `host/fisher_resident.rs`.
fn scaled(bits: u32, a: i32) -> u32 {
    let sign = bits & 0x80000000u;
    let magnitude = bits & 0x7fffffffu;
    if (magnitude == 0u || a == 0) {
        return bits;
    }
    // v = m 2^k, m an integer below 2^24.
    let field = i32(magnitude >> 23u);
    var m = magnitude & 0x7fffffu;
    var k = -149;
    if (field > 0) {
        m = m | 0x800000u;
        k = field - 150;
    }
    // m brought to [2^23, 2^24): v 2^a = m 2^e.
    let up = 23 - i32(firstLeadingBit(m));
    m = m << u32(up);
    let e = k - up + a;
    let biased = e + 150;
    if (biased >= 255) {
        return sign | 0x7f800000u;
    }
    if (biased >= 1) {
        return sign | (u32(biased) << 23u) | (m & 0x7fffffu);
    }
    // Subnormal: the nearest multiple of 2^-149, m / 2^s rounded to even.
    let s = 1 - biased;
    if (s > 25) {
        return sign;
    }
    let q = m >> u32(s);
    let rest = m & ((1u << u32(s)) - 1u);
    let half = 1u << u32(s - 1);
    let up_one = rest > half || (rest == half && (q & 1u) == 1u);
    return sign | (q + select(0u, 1u, up_one));
}

@compute @workgroup_size(64)
fn prepare_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y * params.row_threads + gid.x;
    if (row >= params.n) {
        return;
    }
    let at = row * params.p;
    let out_at = row * params.width;
    for (var c = 0u; c < params.p; c = c + 1u) {
        prepared[out_at + c] = scaled(src[at + c], exponent[c]);
    }
    for (var c = params.p; c < params.width; c = c + 1u) {
        prepared[out_at + c] = 0u;
    }
}
