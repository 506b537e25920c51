// Information geometry: empirical Fisher information from per-sample scores (a weighted
// SYRK, F = sum_r w_r g_r g_r^T, one partial per chunk of rows), and the batched Fisher
// information of the categorical and diagonal-Gaussian families.
//
// Binding layout shared by every kernel: binding 0 is the uniform below; inputs follow in
// order; the output comes last. The SYRK kernels read scores (1) and weights (2) and write
// partials (3); the map kernels read one array (1) and write one (2). Some bindings have two
// declarations (`weights` and `dst`; scalar and vec4 views of scores and partials): no entry
// point uses both, and each pipeline's layout only holds what its entry point uses.

struct Params {
    n: u32,           // items (rows) in this chunk
    row_threads: u32, // threads per row of a folded two-dimensional grid (map kernels)
    first: u32,       // SYRK: the chunk's first row in the bound scores and weights (0 but on
                      // resident shards, whose chunks start anywhere in a bound window)
    _pad1: u32,
    dim: u32,         // SYRK: padded score columns (a multiple of 4); else K or D
    tiles: u32,       // SYRK: output tiles along one edge, ceil(P / TILE)
    slices: u32,      // SYRK: row slices per chunk, each written as its own partial
    pairs: u32,       // SYRK: upper-triangle tile pairs, tiles (tiles + 1) / 2
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

// ---------------------------------------------------------------------------------------
// Tiled SYRK. Scores are read as vec4: the host pads rows to a multiple of 4 columns, and
// `dim` is that padded width. One workgroup computes one TILE x TILE output tile (ti <= tj)
// of the upper triangle over one slice of the chunk's rows. Each step stages KT rows of the
// tile's two column strips in workgroup memory (the left strip multiplied by the row
// weights); each of the 32 threads then accumulates an 8 x 16 register block, reading
// 6 vec4 per 128 FMAs. Partials are written tile by tile (pair index, then row-major within
// the tile), every word of the output, so the host never reads an unwritten word; columns
// past `dim` hold zeros, and so do the entries below the diagonal of a diagonal tile (see
// `upper`). Few threads with large register blocks, because loads cost more
// than FMAs everywhere and far more on CPU drivers (lavapipe runs every non-uniform load as
// a loop over SIMD lanes): this layout measured 2-4x faster there than 256 threads with
// 4 x 4 blocks. TILE, BLOCK and the partial layouts are mirrored in fisher/syrk.rs.

const TILE: u32 = 64u;
const TILE4: u32 = 16u; // vec4 per tile row
const KT: u32 = 32u;    // rows staged per step
const THREADS: u32 = 32u;

@group(0) @binding(1) var<storage, read> src4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> partial4: array<vec4<f32>>;

var<workgroup> lhs: array<vec4<f32>, 512>; // KT x TILE4, weighted left strip
var<workgroup> rhs: array<vec4<f32>, 512>; // KT x TILE4, right strip

// Tile pair -> (ti, tj), ti <= tj, row by row through the upper triangle.
fn tile_pair(pair: u32) -> vec2<u32> {
    var ti = 0u;
    var rest = pair;
    loop {
        let across = params.tiles - ti;
        if (rest < across) {
            break;
        }
        rest = rest - across;
        ti = ti + 1u;
    }
    return vec2<u32>(ti, ti + rest);
}

// Rows [start, end) of a slice: the chunk's rows cut into `slices` near-equal runs.
fn slice_rows(slice: u32) -> vec2<u32> {
    let base = params.n / params.slices;
    let extra = params.n % params.slices;
    let start = slice * base + min(slice, extra);
    return vec2<u32>(start, start + base + select(0u, 1u, slice < extra));
}

// A thread's register block of both SYRK kernels is made of blocks of 8 x 8 accumulators:
// eight rows of 8 columns (two vec4). Named fields, not arrays, so that the accumulators stay
// in registers (drivers spill dynamically indexed arrays to memory).
struct Row8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

struct Block8 {
    r0: Row8,
    r1: Row8,
    r2: Row8,
    r3: Row8,
    r4: Row8,
    r5: Row8,
    r6: Row8,
    r7: Row8,
}

fn rank1_8(row: Row8, x: f32, y: Row8) -> Row8 {
    let v = vec4<f32>(x);
    return Row8(fma(v, y.lo, row.lo), fma(v, y.hi, row.hi));
}

// One step of a block: row i gains x_i y, x = (x0, x1) the block's 8 left values.
fn rank8(b: Block8, x0: vec4<f32>, x1: vec4<f32>, y: Row8) -> Block8 {
    return Block8(rank1_8(b.r0, x0.x, y), rank1_8(b.r1, x0.y, y), rank1_8(b.r2, x0.z, y),
                  rank1_8(b.r3, x0.w, y), rank1_8(b.r4, x1.x, y), rank1_8(b.r5, x1.y, y),
                  rank1_8(b.r6, x1.z, y), rank1_8(b.r7, x1.w, y));
}

// Columns c..c+3 of tile row r as they are stored: on a diagonal tile the entries below the
// diagonal (c < r) are mirrored ones the host never reads, written as 0 because the host
// device's kernel does not compute them (the partials are the same words on every device).
fn upper(v: vec4<f32>, r: u32, c: u32, diag: bool) -> vec4<f32> {
    let below = vec4<u32>(c, c + 1u, c + 2u, c + 3u) < vec4<u32>(r);
    return select(v, vec4<f32>(0.0), below & vec4<bool>(diag));
}

// One 16-column output row of the tiled kernel: its left and right 8 columns, row r of the
// tile from column c.
fn store_row(at: u32, left: Row8, right: Row8, r: u32, c: u32, diag: bool) {
    partial4[at] = upper(left.lo, r, c, diag);
    partial4[at + 1u] = upper(left.hi, r, c + 4u, diag);
    partial4[at + 2u] = upper(right.lo, r, c + 8u, diag);
    partial4[at + 3u] = upper(right.hi, r, c + 12u, diag);
}

// Thread (x, y) owns tile rows 8y..8y+7 and columns 16x..16x+15: two blocks, `left` holding
// columns 16x..16x+7 and `right` the next 8.
@compute @workgroup_size(4, 8)
fn fisher_tiled(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let width4 = params.dim / 4u;
    let tile = tile_pair(wg.x);
    let rows = slice_rows(wg.y);
    // Staging: thread li loads vec4 column (li % TILE4) of rows li / TILE4 + 2 s.
    let stage_col = li % TILE4;
    let col_i = tile.x * TILE4 + stage_col;
    let col_j = tile.y * TILE4 + stage_col;
    let in_i = col_i < width4;
    let in_j = col_j < width4;
    var left = Block8();
    var right = Block8();
    for (var k0 = rows.x; k0 < rows.y; k0 = k0 + KT) {
        for (var s = 0u; s < KT * TILE4 / THREADS; s = s + 1u) {
            let e = li + THREADS * s;
            let row = k0 + e / TILE4;
            var a = vec4<f32>(0.0);
            var b = vec4<f32>(0.0);
            if (row < rows.y) {
                let at = (params.first + row) * width4;
                a = select(vec4<f32>(0.0), src4[at + col_i], in_i) * weights[params.first + row];
                b = select(vec4<f32>(0.0), src4[at + col_j], in_j);
            }
            lhs[e] = a;
            rhs[e] = b;
        }
        workgroupBarrier();
        for (var k = 0u; k < KT; k = k + 1u) {
            let x0 = lhs[k * TILE4 + lid.y * 2u];
            let x1 = lhs[k * TILE4 + lid.y * 2u + 1u];
            let yb = k * TILE4 + lid.x * 4u;
            left = rank8(left, x0, x1, Row8(rhs[yb], rhs[yb + 1u]));
            right = rank8(right, x0, x1, Row8(rhs[yb + 2u], rhs[yb + 3u]));
        }
        workgroupBarrier();
    }
    let at = (wg.y * params.pairs + wg.x) * TILE * TILE4 + lid.y * 8u * TILE4 + lid.x * 4u;
    let r = lid.y * 8u;
    let c = lid.x * 16u;
    let diag = tile.x == tile.y;
    store_row(at, left.r0, right.r0, r, c, diag);
    store_row(at + TILE4, left.r1, right.r1, r + 1u, c, diag);
    store_row(at + 2u * TILE4, left.r2, right.r2, r + 2u, c, diag);
    store_row(at + 3u * TILE4, left.r3, right.r3, r + 3u, c, diag);
    store_row(at + 4u * TILE4, left.r4, right.r4, r + 4u, c, diag);
    store_row(at + 5u * TILE4, left.r5, right.r5, r + 5u, c, diag);
    store_row(at + 6u * TILE4, left.r6, right.r6, r + 6u, c, diag);
    store_row(at + 7u * TILE4, left.r7, right.r7, r + 7u, c, diag);
}

// ---------------------------------------------------------------------------------------
// SYRK for narrow scores (P <= 64), where a 64-wide tile would be mostly padding. Output
// blocks are 8 x 8 (block pair bi <= bj); one workgroup computes one block pair over one
// slice of rows, its 64 threads taking every 64th row each and accumulating the whole block
// (4 vec4 loads per 64 FMAs, no barrier in the loop). The threads' blocks are then summed in
// workgroup memory in thread order, so the result does not depend on scheduling. Partials:
// (slice, pair, 8 x 8 row-major).

const BLOCK4: u32 = 2u; // vec4 per block row
const ROW_THREADS: u32 = 64u;

var<workgroup> blocks: array<vec4<f32>, 1024>; // ROW_THREADS x 16 vec4

fn spill_row(at: u32, row: Row8) {
    blocks[at] = row.lo;
    blocks[at + 1u] = row.hi;
}

@compute @workgroup_size(64)
fn fisher_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let width4 = params.dim / 4u;
    let pair = tile_pair(wg.x);
    let rows = slice_rows(wg.y);
    let col_i = pair.x * BLOCK4;
    let col_j = pair.y * BLOCK4;
    // Blocks may stick out past the last column; those lanes read zeros.
    let in_i = vec2<bool>(col_i < width4, col_i + 1u < width4);
    let in_j = vec2<bool>(col_j < width4, col_j + 1u < width4);
    var block = Block8();
    for (var row = rows.x + li; row < rows.y; row = row + ROW_THREADS) {
        let at = (params.first + row) * width4;
        let w = weights[params.first + row];
        let x0 = select(vec4<f32>(0.0), src4[at + col_i], in_i.x) * w;
        let x1 = select(vec4<f32>(0.0), src4[at + col_i + 1u], in_i.y) * w;
        let y = Row8(select(vec4<f32>(0.0), src4[at + col_j], in_j.x),
                     select(vec4<f32>(0.0), src4[at + col_j + 1u], in_j.y));
        block = rank8(block, x0, x1, y);
    }
    let mine = li * 16u;
    spill_row(mine, block.r0);
    spill_row(mine + 2u, block.r1);
    spill_row(mine + 4u, block.r2);
    spill_row(mine + 6u, block.r3);
    spill_row(mine + 8u, block.r4);
    spill_row(mine + 10u, block.r5);
    spill_row(mine + 12u, block.r6);
    spill_row(mine + 14u, block.r7);
    workgroupBarrier();
    // 16 threads each sum one vec4 of the block over all threads, in thread order.
    if (li < 16u) {
        var total = vec4<f32>(0.0);
        for (var t = 0u; t < ROW_THREADS; t = t + 1u) {
            total = total + blocks[t * 16u + li];
        }
        partial4[(wg.y * params.pairs + wg.x) * 16u + li] = total;
    }
}

// ---------------------------------------------------------------------------------------
// The same SYRK with one thread per output entry and no data reuse: the baseline the
// benchmark measures the tiled kernel against. Reads the same padded rows and writes a full
// dim x dim partial (row-major, zeros below the diagonal).

@compute @workgroup_size(16, 16)
fn fisher_naive(@builtin(global_invocation_id) gid: vec3<u32>) {
    let p = params.dim;
    let i = gid.y;
    let j = gid.x;
    if (i >= p || j >= p) {
        return;
    }
    var acc = 0.0;
    if (j >= i) {
        for (var r = 0u; r < params.n; r = r + 1u) {
            acc = fma(src[r * p + i] * weights[r], src[r * p + j], acc);
        }
    }
    partial[i * p + j] = acc;
}

// ---------------------------------------------------------------------------------------
// Categorical family. `softmax_rows`: one thread per row of logits, the numerically stable
// softmax (max subtracted before exp), kept to measure the drivers' `exp` against the host's.
// The per-sample maps (`categorical_outer`, `gaussian_diag`) are generated for float32 and
// float64 alike (`fisher::maps_wgsl`).

fn linear_index(gid: vec3<u32>) -> u32 {
    return gid.y * params.row_threads + gid.x;
}

@compute @workgroup_size(64)
fn softmax_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = linear_index(gid);
    if (i >= params.n) {
        return;
    }
    let k = params.dim;
    let offset = i * k;
    var top = src[offset];
    for (var c = 1u; c < k; c = c + 1u) {
        top = max(top, src[offset + c]);
    }
    var total = 0.0;
    for (var c = 0u; c < k; c = c + 1u) {
        total = total + exp(src[offset + c] - top);
    }
    for (var c = 0u; c < k; c = c + 1u) {
        dst[offset + c] = exp(src[offset + c] - top) / total;
    }
}
