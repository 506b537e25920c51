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
// index, then this family's parameters; inputs follow in order, the output comes last.

struct Params {
    n: u32,
    row_threads: u32,
    _pad0: u32,
    // Which pass over the inner dimension this dispatch is.
    pass_index: u32,
    // +1 (max-plus) or -1 (min-plus).
    sign: f32,
    // Inner dimension K.
    k: u32,
    // Columns of the right operand and of the result.
    cols: u32,
    // 1: combine the result with `c`.
    accumulate: u32,
    // -inf, passed in so that no compiler folds an infinite constant.
    neg_inf: f32,
    // Batches held in `b` (a row's batch index is clamped to it before addressing `b`).
    batches: u32,
    // Inner indices one pass walks at most.
    k_pass: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> item_batch: array<u32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> c: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// Tropical sum in max-plus that ignores NaN terms (see above).
fn mx(acc: f32, s: f32) -> f32 {
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
fn finish(index: u32, acc: f32) -> f32 {
    var v = acc;
    if (params.pass_index != 0u) {
        v = mx(params.sign * out[index], acc);
    } else if (params.accumulate != 0u) {
        v = mx(params.sign * c[index], acc);
    }
    return params.sign * v;
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
var<workgroup> a_tile: array<vec4<f32>, 256>;
var<workgroup> b_tile: array<vec4<f32>, 256>;

fn mx4(acc: vec4<f32>, s: vec4<f32>) -> vec4<f32> {
    return select(acc, s, s > acc);
}

@compute @workgroup_size(8, 8)
fn matmul_tiled(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) lindex: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // Row blocks are folded over y and z (a chunk may hold more than 65535 of them); the
    // folded grid can overshoot, and those workgroups clamp to the last block and store
    // nothing. No early return: on some drivers (lavapipe) everything after a divergent
    // return runs with slower masked memory accesses.
    let block = wid.z * groups.y + wid.y;
    let live = block < params.n;
    let item = min(block, params.n - 1u);
    let col0 = wid.x * TILE;
    let kdim = params.k;
    let cols = params.cols;
    let sign = params.sign;
    let zero = params.neg_inf;
    let a_base = item * TILE * kdim;
    let b_base = min(item_batch[item], params.batches - 1u) * kdim * cols;

    let z4 = vec4<f32>(zero);
    // acc_r_h: row ty*8 + r, columns tx*8 + 4h .. 4h + 3.
    var acc0_0 = z4; var acc0_1 = z4; var acc1_0 = z4; var acc1_1 = z4;
    var acc2_0 = z4; var acc2_1 = z4; var acc3_0 = z4; var acc3_1 = z4;
    var acc4_0 = z4; var acc4_1 = z4; var acc5_0 = z4; var acc5_1 = z4;
    var acc6_0 = z4; var acc6_1 = z4; var acc7_0 = z4; var acc7_1 = z4;
    let a_slot = lid.y * 2u;
    let b_slot = lid.x * 2u;
    let range = pass_range();
    for (var k0 = range.x; k0 < range.y; k0 += TK) {
        workgroupBarrier();
        // Each tile is 256 vec4 slots, 4 per thread, each filled by one vec4 store.
        // A: slot (kk, q) holds rows 4q..4q+3 at step kk; consecutive threads take
        // consecutive steps, so each of the four loads reads consecutive words of a row.
        for (var s = lindex; s < 256u; s += 64u) {
            let q = s / TK;
            let kk = s % TK;
            var v = z4;
            if (k0 + kk < range.y) {
                let i = a_base + q * 4u * kdim + k0 + kk;
                v = sign * vec4<f32>(a[i], a[i + kdim], a[i + 2u * kdim], a[i + 3u * kdim]);
            }
            a_tile[kk * 16u + q] = v;
        }
        // B: slot (kk, q) holds columns col0 + 4q..4q+3 of row k0 + kk (clamped reads, then
        // tropical zeros past the last column).
        for (var s = lindex; s < 256u; s += 64u) {
            let kk = s / 16u;
            let q = s % 16u;
            let col = col0 + q * 4u;
            var v = z4;
            if (k0 + kk < range.y) {
                let row = b_base + (k0 + kk) * cols;
                let last = row + cols - 1u;
                let i = row + col;
                v = vec4<f32>(b[min(i, last)], b[min(i + 1u, last)], b[min(i + 2u, last)],
                              b[min(i + 3u, last)]);
                let inside = vec4<u32>(col, col + 1u, col + 2u, col + 3u) < vec4<u32>(cols);
                v = select(z4, sign * v, inside);
            }
            b_tile[kk * 16u + q] = v;
        }
        workgroupBarrier();
        let steps = min(TK, range.y - k0);
        for (var kk = 0u; kk < steps; kk++) {
            let a0 = a_tile[kk * 16u + a_slot];
            let a1 = a_tile[kk * 16u + a_slot + 1u];
            let b0 = b_tile[kk * 16u + b_slot];
            let b1 = b_tile[kk * 16u + b_slot + 1u];
            acc0_0 = mx4(acc0_0, a0.x + b0); acc0_1 = mx4(acc0_1, a0.x + b1);
            acc1_0 = mx4(acc1_0, a0.y + b0); acc1_1 = mx4(acc1_1, a0.y + b1);
            acc2_0 = mx4(acc2_0, a0.z + b0); acc2_1 = mx4(acc2_1, a0.z + b1);
            acc3_0 = mx4(acc3_0, a0.w + b0); acc3_1 = mx4(acc3_1, a0.w + b1);
            acc4_0 = mx4(acc4_0, a1.x + b0); acc4_1 = mx4(acc4_1, a1.x + b1);
            acc5_0 = mx4(acc5_0, a1.y + b0); acc5_1 = mx4(acc5_1, a1.y + b1);
            acc6_0 = mx4(acc6_0, a1.z + b0); acc6_1 = mx4(acc6_1, a1.z + b1);
            acc7_0 = mx4(acc7_0, a1.w + b0); acc7_1 = mx4(acc7_1, a1.w + b1);
        }
    }
    if (!live) {
        return;
    }
    let row = item * TILE + lid.y * 8u;
    let col = col0 + lid.x * 8u;
    store_row(row, col, acc0_0, acc0_1);
    store_row(row + 1u, col, acc1_0, acc1_1);
    store_row(row + 2u, col, acc2_0, acc2_1);
    store_row(row + 3u, col, acc3_0, acc3_1);
    store_row(row + 4u, col, acc4_0, acc4_1);
    store_row(row + 5u, col, acc5_0, acc5_1);
    store_row(row + 6u, col, acc6_0, acc6_1);
    store_row(row + 7u, col, acc7_0, acc7_1);
}

// Stores the 8 outputs of one thread's row that fall inside the result's columns.
fn store_row(row: u32, col: u32, lo: vec4<f32>, hi: vec4<f32>) {
    for (var j = 0u; j < 8u; j++) {
        if (col + j < params.cols) {
            let index = row * params.cols + col + j;
            out[index] = finish(index, select(hi, lo, j < 4u)[j % 4u]);
        }
    }
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
fn matmul_rows(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) lindex: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // Row tiles are folded over y and z as in `matmul_tiled`; the overshoot stores nothing.
    let tile = wid.z * groups.y + wid.y;
    let row0 = tile * TILE;
    let live = row0 < params.n;
    let last_row = max(min(row0 + TILE, params.n), 1u) - 1u;
    let first_row = min(row0, last_row);
    let col0 = wid.x * TILE;
    let kdim = params.k;
    let cols = params.cols;
    let sign = params.sign;
    let zero = params.neg_inf;
    let z4 = vec4<f32>(zero);
    let top = params.batches - 1u;
    let first_batch = min(item_batch[first_row], top);
    let last_batch = min(item_batch[last_row], top);

    var acc0_0 = z4; var acc0_1 = z4; var acc1_0 = z4; var acc1_1 = z4;
    var acc2_0 = z4; var acc2_1 = z4; var acc3_0 = z4; var acc3_1 = z4;
    var acc4_0 = z4; var acc4_1 = z4; var acc5_0 = z4; var acc5_1 = z4;
    var acc6_0 = z4; var acc6_1 = z4; var acc7_0 = z4; var acc7_1 = z4;
    let a_slot = lid.y * 2u;
    let b_slot = lid.x * 2u;
    let range = pass_range();
    for (var p = first_batch; p <= last_batch; p++) {
        let b_base = p * kdim * cols;
        for (var k0 = range.x; k0 < range.y; k0 += TK) {
            workgroupBarrier();
            // A: slot (kk, q) holds rows row0 + 4q..4q+3 at step kk; a row of another batch,
            // or past the last row, holds the tropical zero (its read clamped in bounds).
            for (var s = lindex; s < 256u; s += 64u) {
                let q = s / TK;
                let kk = s % TK;
                var v = z4;
                if (k0 + kk < range.y) {
                    let r = row0 + q * 4u;
                    let rows = vec4<u32>(r, r + 1u, r + 2u, r + 3u);
                    let held = min(rows, vec4<u32>(last_row));
                    let col = k0 + kk;
                    let x = sign * vec4<f32>(a[held.x * kdim + col], a[held.y * kdim + col],
                                             a[held.z * kdim + col], a[held.w * kdim + col]);
                    var own = rows <= vec4<u32>(last_row);
                    // Uniform over the workgroup: a tile in one batch reads no batch index.
                    if (first_batch != last_batch) {
                        let batch = min(vec4<u32>(item_batch[held.x], item_batch[held.y],
                                                  item_batch[held.z], item_batch[held.w]),
                                        vec4<u32>(top));
                        own = own & (batch == vec4<u32>(p));
                    }
                    v = select(z4, x, own);
                }
                a_tile[kk * 16u + q] = v;
            }
            // B: as in `matmul_tiled`, from batch p's right operand.
            for (var s = lindex; s < 256u; s += 64u) {
                let kk = s / 16u;
                let q = s % 16u;
                let col = col0 + q * 4u;
                var v = z4;
                if (k0 + kk < range.y) {
                    let row = b_base + (k0 + kk) * cols;
                    let last = row + cols - 1u;
                    let i = row + col;
                    v = vec4<f32>(b[min(i, last)], b[min(i + 1u, last)], b[min(i + 2u, last)],
                                  b[min(i + 3u, last)]);
                    let inside = vec4<u32>(col, col + 1u, col + 2u, col + 3u) < vec4<u32>(cols);
                    v = select(z4, sign * v, inside);
                }
                b_tile[kk * 16u + q] = v;
            }
            workgroupBarrier();
            let steps = min(TK, range.y - k0);
            for (var kk = 0u; kk < steps; kk++) {
                let a0 = a_tile[kk * 16u + a_slot];
                let a1 = a_tile[kk * 16u + a_slot + 1u];
                let b0 = b_tile[kk * 16u + b_slot];
                let b1 = b_tile[kk * 16u + b_slot + 1u];
                acc0_0 = mx4(acc0_0, a0.x + b0); acc0_1 = mx4(acc0_1, a0.x + b1);
                acc1_0 = mx4(acc1_0, a0.y + b0); acc1_1 = mx4(acc1_1, a0.y + b1);
                acc2_0 = mx4(acc2_0, a0.z + b0); acc2_1 = mx4(acc2_1, a0.z + b1);
                acc3_0 = mx4(acc3_0, a0.w + b0); acc3_1 = mx4(acc3_1, a0.w + b1);
                acc4_0 = mx4(acc4_0, a1.x + b0); acc4_1 = mx4(acc4_1, a1.x + b1);
                acc5_0 = mx4(acc5_0, a1.y + b0); acc5_1 = mx4(acc5_1, a1.y + b1);
                acc6_0 = mx4(acc6_0, a1.z + b0); acc6_1 = mx4(acc6_1, a1.z + b1);
                acc7_0 = mx4(acc7_0, a1.w + b0); acc7_1 = mx4(acc7_1, a1.w + b1);
            }
        }
    }
    if (!live) {
        return;
    }
    let row = row0 + lid.y * 8u;
    let col = col0 + lid.x * 8u;
    store_live_row(row, col, acc0_0, acc0_1);
    store_live_row(row + 1u, col, acc1_0, acc1_1);
    store_live_row(row + 2u, col, acc2_0, acc2_1);
    store_live_row(row + 3u, col, acc3_0, acc3_1);
    store_live_row(row + 4u, col, acc4_0, acc4_1);
    store_live_row(row + 5u, col, acc5_0, acc5_1);
    store_live_row(row + 6u, col, acc6_0, acc6_1);
    store_live_row(row + 7u, col, acc7_0, acc7_1);
}

// `store_row` for rows that exist: a tile of `matmul_rows` may run past the shard's last row.
fn store_live_row(row: u32, col: u32, lo: vec4<f32>, hi: vec4<f32>) {
    if (row < params.n) {
        store_row(row, col, lo, hi);
    }
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
    var acc = params.neg_inf;
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

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn matvec(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let t = gid.y * params.row_threads + gid.x;
    let row = t / 64u;
    let lane = lid.x;
    let kdim = params.k;
    let sign = params.sign;
    var acc = params.neg_inf;
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
