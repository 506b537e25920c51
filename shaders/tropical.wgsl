// Tropical (max-plus / min-plus) matrix products and matrix-vector products.
//
// The tiled and matrix-vector kernels compute in the max-plus semiring; min-plus is the same
// product on negated operands, negated back (min(a + b) = -max(-a + -b), exact in IEEE
// arithmetic, infinities included, and -(a + b) = -a + -b exactly): `params.sign` is +1 for
// max-plus and -1 for min-plus and is applied where a value is loaded and where a result is
// stored.
//
// Tropical zero (-inf in max-plus) is absorbing for the product: a term whose operands are
// -inf and +inf is -inf + inf = NaN in IEEE arithmetic, and the accumulation
// `mx(acc, s) = select(acc, s, s > acc)` never takes a NaN (a comparison with NaN is false),
// which is exactly "that term is the tropical zero". Inputs never hold NaN (the host checks).
//
// Products work on row blocks: item q of a chunk is a block of 64 consecutive rows of `a`
// (the host pads each batch's rows to a multiple of 64), all of batch `item_batch[q]`, which
// are multiplied by that batch's right operand `b[batch]` (K x cols). When
// `params.accumulate` is 1 the result is `c ⊕ (a ⊗ b)` with `c` shaped like the output;
// otherwise `c` is a one-word placeholder that is never read. The matrix-vector kernel works
// on single rows instead (item = row, `item_batch` per row).
//
// Long inner dimensions are walked in passes: Mesa's llvmpipe and lavapipe stop the loops of
// an invocation silently once 65,535 trips have run over all of them, so no invocation walks
// more than `params.k_pass` inner indices. Pass p (the host dispatches them in order over the
// same bindings) walks indices [p k_pass, (p + 1) k_pass) and combines its accumulator with
// what pass p - 1 stored, the stored value first: a tie keeps the earlier value, exactly as
// one walk over every index would, so the bits do not depend on the pass length.
//
// ABI shared by every kernel: binding 0 holds the chunk's item count, grid row width and pass
// index, then this family's parameters; inputs follow in order, the output comes last. The
// row statistics (last in this file) read `a` as bits and write their own output, through
// second declarations of bindings 1 and 2: no entry point uses both declarations of a binding,
// and each pipeline's layout only holds what its entry point uses.

struct Params {
    n: u32,
    row_threads: u32,
    _pad0: u32,
    // Which pass over the inner dimension this dispatch is.
    pass_index: u32,
    // +1 (max-plus) or -1 (min-plus).
    sign: f32,
    // Inner dimension K (row statistics: words per row).
    k: u32,
    // Columns of the right operand and of the result.
    cols: u32,
    // 1: combine the result with `c`.
    accumulate: u32,
    // -inf, passed in so that no compiler folds an infinite constant.
    neg_inf: f32,
    // Batches held in `b` (a row's batch index is clamped to it before addressing `b`).
    batches: u32,
    // Inner indices one pass walks at most (row statistics: words of a row one pass reads).
    k_pass: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<uniform> params: Params;

// The element type of `a`, `b`, `c` and the output: f32, or f64 in the float64 kernels,
// which are this text with this one line changed (`tropical::kernels::source`). The
// parameters stay f32: ±1 and -inf are exact in both.
alias Real = f32;

// params.sign and params.neg_inf in the element type.
fn sgn() -> Real {
    return Real(params.sign);
}

fn ninf() -> Real {
    return Real(params.neg_inf);
}

@group(0) @binding(1) var<storage, read> a: array<Real>;
@group(0) @binding(2) var<storage, read> item_batch: array<u32>;
@group(0) @binding(3) var<storage, read> b: array<Real>;
@group(0) @binding(4) var<storage, read> c: array<Real>;
@group(0) @binding(5) var<storage, read_write> out: array<Real>;

// Tropical sum in max-plus that ignores NaN terms (see above).
fn mx(acc: Real, s: Real) -> Real {
    return select(acc, s, s > acc);
}

// The inner indices [start, end) this pass walks.
fn pass_range() -> vec2<u32> {
    let start = min(params.pass_index * params.k_pass, params.k);
    return vec2<u32>(start, min(params.k - start, params.k_pass) + start);
}

// The stored value of a finished max-plus accumulator for output word `index`: after the
// first pass, combined with what the pass before stored (itself first); in the first, with
// `c` when accumulating.
fn finish(index: u32, acc: Real) -> Real {
    var v = acc;
    if (params.pass_index != 0u) {
        v = mx(sgn() * out[index], acc);
    } else if (params.accumulate != 0u) {
        v = mx(sgn() * c[index], acc);
    }
    return sgn() * v;
}

// --- tiled product -------------------------------------------------------------------------
//
// A workgroup of 8 x 8 threads computes a 64 x 64 output tile: one row block (item) by 64
// columns. Thread (tx, ty) keeps the 8 x 8 outputs of rows ty*8.. and columns tx*8.. in 16 vec4
// registers (register blocking). K is walked in steps of TK: the workgroup stages a 64 x TK
// block of A and a TK x 64 block of B in workgroup memory (signed, and padded with tropical
// zeros past the edges of K and of the columns), then each thread does 64 tropical
// multiply-adds per step of K from two vec4 reads of each tile. Staged values are read as
// vec4 because a vec4 read costs little more than one float on most devices (on lavapipe
// every workgroup-memory read is a loop over the SIMD lanes, so reads are what counts).

const TILE: u32 = 64u;
const TK: u32 = 16u;

// a_tile[kk * 16 + r / 4][r % 4] = sign * A[r, k0 + kk]; b_tile likewise for columns
// (16 = TILE / 4 vec4 slots per step of K).
var<workgroup> a_tile: array<vec4<Real>, 256>;
var<workgroup> b_tile: array<vec4<Real>, 256>;

fn mx4(acc: vec4<Real>, s: vec4<Real>) -> vec4<Real> {
    return select(acc, s, s > acc);
}

// The ids of a thread of the tiled products.
struct TileThread {
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) lindex: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
}

// The workgroup's row block (tile) index: blocks are folded over y and z of the grid, as a
// chunk may hold more than 65535 of them.
fn folded_tile(t: TileThread) -> u32 {
    return t.wid.z * t.groups.y + t.wid.y;
}

// One thread's 8 x 8 outputs: row r (ty*8 + r) in r_lo (columns tx*8 .. +3) and r_hi
// (columns tx*8 + 4 .. +7). Named fields, not an array, so that the accumulators stay in
// registers (drivers spill dynamically indexed arrays to memory).
struct Block {
    r0_lo: vec4<Real>, r0_hi: vec4<Real>, r1_lo: vec4<Real>, r1_hi: vec4<Real>,
    r2_lo: vec4<Real>, r2_hi: vec4<Real>, r3_lo: vec4<Real>, r3_hi: vec4<Real>,
    r4_lo: vec4<Real>, r4_hi: vec4<Real>, r5_lo: vec4<Real>, r5_hi: vec4<Real>,
    r6_lo: vec4<Real>, r6_hi: vec4<Real>, r7_lo: vec4<Real>, r7_hi: vec4<Real>,
}

fn zero_block() -> Block {
    let z4 = vec4<Real>(ninf());
    return Block(z4, z4, z4, z4, z4, z4, z4, z4, z4, z4, z4, z4, z4, z4, z4, z4);
}

// Stages a_tile for the step of K at k0 (< end): slot (kk, q) holds rows row0 + 4q..4q+3 of
// `a` (k words each) at column k0 + kk, signed; consecutive threads take consecutive steps, so
// each of the four loads reads consecutive words of a row. Rows past `last_row` hold the
// tropical zero (their reads clamped in bounds), and so, when the rows are `mixed` (of
// several batches), do rows of a batch other than p.
fn stage_a(lindex: u32, k0: u32, end: u32, row0: u32, last_row: u32, p: u32, mixed: bool) {
    let kdim = params.k;
    let top = params.batches - 1u;
    let z4 = vec4<Real>(ninf());
    // Each tile is 256 vec4 slots, 4 per thread, each filled by one vec4 store.
    for (var s = lindex; s < 256u; s += 64u) {
        let q = s / TK;
        let kk = s % TK;
        var v = z4;
        if (k0 + kk < end) {
            let r = row0 + q * 4u;
            let rows = vec4<u32>(r, r + 1u, r + 2u, r + 3u);
            let held = min(rows, vec4<u32>(last_row));
            let col = k0 + kk;
            let x = sgn() * vec4<Real>(a[held.x * kdim + col], a[held.y * kdim + col],
                                            a[held.z * kdim + col], a[held.w * kdim + col]);
            var own = rows <= vec4<u32>(last_row);
            if (mixed) {
                let batch = min(vec4<u32>(item_batch[held.x], item_batch[held.y],
                                          item_batch[held.z], item_batch[held.w]),
                                vec4<u32>(top));
                own = own & (batch == vec4<u32>(p));
            }
            v = select(z4, x, own);
        }
        a_tile[kk * 16u + q] = v;
    }
}

// Walks this pass's inner indices in steps of TK for the rows row0..=last_row of `a` (of
// batch p unless `mixed`, see `stage_a`) against the K x cols matrix at `b_base`: stages both
// tiles, then multiplies them into the block of thread `t`.
fn walk_k(acc: ptr<function, Block>, t: TileThread, row0: u32, last_row: u32, p: u32,
          mixed: bool, b_base: u32, col0: u32) {
    let range = pass_range();
    for (var k0 = range.x; k0 < range.y; k0 += TK) {
        workgroupBarrier();
        stage_a(t.lindex, k0, range.y, row0, last_row, p, mixed);
        stage_b(t.lindex, k0, range.y, b_base, col0);
        workgroupBarrier();
        multiply_tiles(acc, min(TK, range.y - k0), t.lid);
    }
}

// Stages b_tile for the step of K at k0 (< end) from the K x cols matrix at `b_base`:
// slot (kk, q) holds columns col0 + 4q..4q+3 of row k0 + kk (clamped reads, then tropical
// zeros past the last column and past `end`).
fn stage_b(lindex: u32, k0: u32, end: u32, b_base: u32, col0: u32) {
    let cols = params.cols;
    let z4 = vec4<Real>(ninf());
    for (var s = lindex; s < 256u; s += 64u) {
        let kk = s / 16u;
        let q = s % 16u;
        let col = col0 + q * 4u;
        var v = z4;
        if (k0 + kk < end) {
            let row = b_base + (k0 + kk) * cols;
            let last = row + cols - 1u;
            let i = row + col;
            v = vec4<Real>(b[min(i, last)], b[min(i + 1u, last)], b[min(i + 2u, last)],
                          b[min(i + 3u, last)]);
            let inside = vec4<u32>(col, col + 1u, col + 2u, col + 3u) < vec4<u32>(cols);
            v = select(z4, sgn() * v, inside);
        }
        b_tile[kk * 16u + q] = v;
    }
}

// The tropical multiply-adds of the `steps` staged steps of K into the block of thread
// `lid`: its rows' A values from a_tile, its columns' B values from b_tile.
fn multiply_tiles(acc: ptr<function, Block>, steps: u32, lid: vec3<u32>) {
    let a_slot = lid.y * 2u;
    let b_slot = lid.x * 2u;
    for (var kk = 0u; kk < steps; kk++) {
        let a0 = a_tile[kk * 16u + a_slot];
        let a1 = a_tile[kk * 16u + a_slot + 1u];
        let b0 = b_tile[kk * 16u + b_slot];
        let b1 = b_tile[kk * 16u + b_slot + 1u];
        (*acc).r0_lo = mx4((*acc).r0_lo, a0.x + b0); (*acc).r0_hi = mx4((*acc).r0_hi, a0.x + b1);
        (*acc).r1_lo = mx4((*acc).r1_lo, a0.y + b0); (*acc).r1_hi = mx4((*acc).r1_hi, a0.y + b1);
        (*acc).r2_lo = mx4((*acc).r2_lo, a0.z + b0); (*acc).r2_hi = mx4((*acc).r2_hi, a0.z + b1);
        (*acc).r3_lo = mx4((*acc).r3_lo, a0.w + b0); (*acc).r3_hi = mx4((*acc).r3_hi, a0.w + b1);
        (*acc).r4_lo = mx4((*acc).r4_lo, a1.x + b0); (*acc).r4_hi = mx4((*acc).r4_hi, a1.x + b1);
        (*acc).r5_lo = mx4((*acc).r5_lo, a1.y + b0); (*acc).r5_hi = mx4((*acc).r5_hi, a1.y + b1);
        (*acc).r6_lo = mx4((*acc).r6_lo, a1.z + b0); (*acc).r6_hi = mx4((*acc).r6_hi, a1.z + b1);
        (*acc).r7_lo = mx4((*acc).r7_lo, a1.w + b0); (*acc).r7_hi = mx4((*acc).r7_hi, a1.w + b1);
    }
}

// Stores the thread's block at output row `row`, column `col`: the rows below `rows` and
// the columns inside the result.
fn store_block(row: u32, col: u32, acc: Block, rows: u32) {
    store_row(row, col, acc.r0_lo, acc.r0_hi, rows);
    store_row(row + 1u, col, acc.r1_lo, acc.r1_hi, rows);
    store_row(row + 2u, col, acc.r2_lo, acc.r2_hi, rows);
    store_row(row + 3u, col, acc.r3_lo, acc.r3_hi, rows);
    store_row(row + 4u, col, acc.r4_lo, acc.r4_hi, rows);
    store_row(row + 5u, col, acc.r5_lo, acc.r5_hi, rows);
    store_row(row + 6u, col, acc.r6_lo, acc.r6_hi, rows);
    store_row(row + 7u, col, acc.r7_lo, acc.r7_hi, rows);
}

// Stores the 8 outputs of one thread's row that fall inside the result's columns (none when
// the row is not below `rows`).
fn store_row(row: u32, col: u32, lo: vec4<Real>, hi: vec4<Real>, rows: u32) {
    for (var j = 0u; j < 8u; j++) {
        if (row < rows && col + j < params.cols) {
            let index = row * params.cols + col + j;
            out[index] = finish(index, select(hi, lo, j < 4u)[j % 4u]);
        }
    }
}

@compute @workgroup_size(8, 8)
fn matmul_tiled(t: TileThread) {
    // Row blocks are folded over y and z (a chunk may hold more than 65535 of them); the
    // folded grid can overshoot, and those workgroups clamp to the last block and store
    // nothing. No early return: on some drivers (lavapipe) everything after a divergent
    // return runs with slower masked memory accesses.
    let block = folded_tile(t);
    let live = block < params.n;
    let item = min(block, params.n - 1u);
    let row0 = item * TILE;
    let col0 = t.wid.x * TILE;
    let b_base = min(item_batch[item], params.batches - 1u) * params.k * params.cols;
    var acc = zero_block();
    // The block's rows all exist and are all of one batch.
    walk_k(&acc, t, row0, row0 + TILE - 1u, 0u, false, b_base, col0);
    if (!live) {
        return;
    }
    // Every row of a live block exists: n blocks of TILE rows.
    store_block(row0 + t.lid.y * 8u, col0 + t.lid.x * 8u, acc, params.n * TILE);
}

// --- tiled product over rows of any batch ---------------------------------------------------
//
// The resident product: item = one row of `a` (k words) with its batch index in
// `item_batch`, output `cols` words per row. Rows come as a device's shard holds them, cut
// anywhere, so a 64-row tile may hold the end of one batch and the start of the next. One
// workgroup per 64 x 64 output tile, register-blocked like `matmul_tiled`; the tile's rows are
// consecutive, so their batch indices are non-decreasing: the workgroup walks every batch
// from its first row's to its last row's (one pass when the tile sits in one batch), staging
// that batch's B tiles, and stages the A values of rows of other batches (and past the last
// row) as the tropical zero. A zero term never changes an accumulator (-inf + b is -inf or
// NaN, neither of which `mx` takes), so each row's accumulator sees exactly its own batch's
// terms, k in order, as in `matmul_tiled`: the same bits.

@compute @workgroup_size(8, 8)
fn matmul_rows(t: TileThread) {
    // Row tiles are folded over y and z as in `matmul_tiled`; the overshoot stores nothing.
    let row0 = folded_tile(t) * TILE;
    let live = row0 < params.n;
    let last_row = max(min(row0 + TILE, params.n), 1u) - 1u;
    let first_row = min(row0, last_row);
    let col0 = t.wid.x * TILE;
    let top = params.batches - 1u;
    let first_batch = min(item_batch[first_row], top);
    let last_batch = min(item_batch[last_row], top);
    var acc = zero_block();
    // Uniform over the workgroup: a tile in one batch reads no batch index.
    let mixed = first_batch != last_batch;
    for (var p = first_batch; p <= last_batch; p++) {
        walk_k(&acc, t, row0, last_row, p, mixed, p * params.k * params.cols, col0);
    }
    if (!live) {
        return;
    }
    // A tile may run past the shard's last row (n rows): those rows store nothing.
    store_block(row0 + t.lid.y * 8u, col0 + t.lid.x * 8u, acc, params.n);
}

// --- one thread per output -----------------------------------------------------------------
//
// The straightforward kernel, kept as the baseline the tiled one is measured against (and
// checked against it in the tests). Linear dispatch with 64 * `cols` threads per row block.

@compute @workgroup_size(64)
fn matmul_naive(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y * params.row_threads + gid.x;
    let cols = params.cols;
    if (t >= params.n * TILE * cols) {
        return;
    }
    let row = t / cols;
    let col = t % cols;
    let kdim = params.k;
    let a_base = row * kdim;
    let b_base = min(item_batch[row / TILE], params.batches - 1u) * kdim * cols + col;
    let range = pass_range();
    var acc = ninf();
    if (params.sign > 0.0) {
        for (var k = range.x; k < range.y; k++) {
            acc = mx(acc, a[a_base + k] + b[b_base + k * cols]);
        }
    } else {
        // min-plus directly: the same loop with the comparison reversed.
        acc = -acc;
        for (var k = range.x; k < range.y; k++) {
            let s = a[a_base + k] + b[b_base + k * cols];
            acc = select(acc, s, s < acc);
        }
        acc = -acc;
    }
    out[t] = finish(t, acc);
}

// --- matrix-vector product -----------------------------------------------------------------
//
// One workgroup per row (linear dispatch, 64 threads per item): thread t takes k = t, t + 64,
// ..., then the 64 partial results are combined in a fixed tree, so the result does not
// depend on how rows are split into chunks. `b` holds one vector of length K per batch.

var<workgroup> partial: array<Real, 64>;

@compute @workgroup_size(64)
fn matvec(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let t = gid.y * params.row_threads + gid.x;
    let row = t / 64u;
    let lane = lid.x;
    let kdim = params.k;
    let sign = sgn();
    var acc = ninf();
    if (row < params.n) {
        let a_base = row * kdim;
        let x_base = min(item_batch[row], params.batches - 1u) * kdim;
        // k_pass is a multiple of 64: every lane walks its own indices in every pass.
        let range = pass_range();
        for (var k = range.x + lane; k < range.y; k += 64u) {
            acc = mx(acc, sign * (a[a_base + k] + b[x_base + k]));
        }
    }
    partial[lane] = acc;
    for (var width = 32u; width > 0u; width /= 2u) {
        workgroupBarrier();
        if (lane < width) {
            partial[lane] = mx(partial[lane], partial[lane + width]);
        }
    }
    if (lane == 0u && row < params.n) {
        out[row] = finish(row, partial[0]);
    }
}

// --- row statistics ------------------------------------------------------------------------
//
// Per-row statistics of tropical operands, for the checks of resident products: for each row
// of `k` words, the first column holding NaN (-1 without one) and the largest finite
// magnitude (0 without one). NaN is found from the bits (WGSL does not promise IEEE
// comparisons with NaN), and so are the infinities, which are left out of the magnitude.
// Long rows are read in passes, as products walk K: pass p reads the words `pass_range()`
// gives of each row and folds in what pass p - 1 stored. Both statistics are exact in any
// order. Only `k` and `k_pass` of the parameters are read.

@group(0) @binding(1) var<storage, read> a_bits: array<u32>;
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;

// One thread per row (linear dispatch). Magnitudes compare as their bit patterns, which
// order finite non-negative floats exactly, so the largest is found without float compares.
@compute @workgroup_size(64)
fn row_stats(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y * params.row_threads + gid.x;
    if (row >= params.n) {
        return;
    }
    let base = row * params.k;
    let range = pass_range();
    var first = -1;
    var top = 0u;
    if (params.pass_index != 0u) {
        first = i32(stats[row * 2u]);
        top = bitcast<u32>(stats[row * 2u + 1u]);
    }
    for (var j = range.x; j < range.y; j++) {
        let bits = a_bits[base + j] & 0x7fffffffu;
        if (bits > 0x7f800000u) {
            if (first < 0) {
                first = i32(j);
            }
        } else if (bits < 0x7f800000u) {
            top = max(top, bits);
        }
    }
    stats[row * 2u] = f32(first);
    stats[row * 2u + 1u] = bitcast<f32>(top);
}

// The row statistics of float64 rows (a value is two words, the low one first; `params.k`
// counts values), as three words per row, every one u32 bits so that no float store can
// change them: the first NaN column plus one (0 without one), then the low and high words
// of the largest finite magnitude (0 without one). A float64 magnitude's order is that of
// its (high, low) word pairs. Used by no float32 call, and its own view of binding 2.

@group(0) @binding(2) var<storage, read_write> stats_bits: array<u32>;

@compute @workgroup_size(64)
fn row_stats64(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y * params.row_threads + gid.x;
    if (row >= params.n) {
        return;
    }
    let base = row * params.k * 2u;
    let range = pass_range();
    var first = 0u;
    var top_lo = 0u;
    var top_hi = 0u;
    if (params.pass_index != 0u) {
        first = stats_bits[row * 3u];
        top_lo = stats_bits[row * 3u + 1u];
        top_hi = stats_bits[row * 3u + 2u];
    }
    for (var j = range.x; j < range.y; j++) {
        let lo = a_bits[base + 2u * j];
        let hi = a_bits[base + 2u * j + 1u] & 0x7fffffffu;
        if (hi > 0x7ff00000u || (hi == 0x7ff00000u && lo != 0u)) {
            if (first == 0u) {
                first = j + 1u;
            }
        } else if (hi < 0x7ff00000u && (hi > top_hi || (hi == top_hi && lo > top_lo))) {
            top_lo = lo;
            top_hi = hi;
        }
    }
    stats_bits[row * 3u] = first;
    stats_bits[row * 3u + 1u] = top_lo;
    stats_bits[row * 3u + 2u] = top_hi;
}
