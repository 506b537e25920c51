//! The 8 × 8 blocks of the host SYRK (`fisher_rows`' twin, P ≤ 64): every block of one
//! slice. The shader's 64 threads each take every 64th row of the slice and keep their own
//! 8 × 8 block per pair; here each shader thread's rows are gathered into one contiguous
//! panel (every row of the slice is read from memory once, by one pool thread), with their
//! left values `s · w` beside them unless every weight is 1, its rows
//! run in order with its accumulators in registers, across every block of a row of blocks
//! at once (vector lanes are columns), for each row of blocks in turn while the panel
//! stays in L2. The pool threads take consecutive shader threads, each keeping its blocks
//! apart; they are then added to the total in shader-thread order from 0, as the shader
//! adds them in workgroup memory.

use rayon::prelude::*;

use super::shape::BLOCK;
use super::syrk_pack::{left, with_scratch, Rows, BLOCKS, THREADS};
use crate::host::arith::madd;
use crate::host::simd::{prefetch, Level};

/// Multiply-adds of a slice below which it runs on the calling thread alone.
const MIN_PARALLEL_MACS: usize = 1 << 18;

/// Whether [`run_blocks`] over a slice of `rows` rows into `words` words shares the shader
/// threads' blocks among the pool's threads.
pub(super) fn splits(rows: usize, words: usize) -> bool {
    rows.saturating_mul(words) >= MIN_PARALLEL_MACS
}

/// Every row of blocks of `tiles` (row ti: blocks (ti, ti..tiles)) of the slice `src` into
/// `out` (row after row, 8 × 8 row-major blocks each). `level` is one
/// `Level::at_most_detected` returned.
pub(super) fn run_blocks<const F: bool>(level: Level, src: &Rows, tiles: usize, out: &mut [f32]) {
    let (width, words) = (src.width, out.len());
    // Row ti's entries (r, ti · 8 + c) at its offset + r · cols + c, cols = (tiles − ti) · 8.
    let rows_of_blocks: Vec<(usize, usize)> = (0..tiles)
        .scan(0, |at, ti| {
            let cols = (tiles - ti) * BLOCK;
            *at += BLOCK * cols;
            Some((*at - BLOCK * cols, cols))
        })
        .collect();
    // One shader thread's blocks, all rows of blocks, into `part`.
    let thread = |t: usize, part: &mut [f32], [scores, weights, lefts]: [&mut Vec<f32>; 3]| {
        gather(src, t, [&mut *scores, &mut *weights, &mut *lefts]);
        let rows = Rows {
            scores,
            weights,
            width,
        };
        // Unit weights (every unweighted call): `s · 1` is `s`, the scores are their own
        // left values.
        let lefts = if lefts.is_empty() { &scores[..] } else { &lefts[..] };
        for (ti, &(at, cols)) in rows_of_blocks.iter().enumerate() {
            micro::<F>(level, (&rows, lefts), ti * BLOCK, &mut part[at..at + BLOCK * cols]);
        }
    };
    let per_thread = src.len().div_ceil(THREADS);
    let parallel = splits(src.len(), words);
    let pool = if parallel { rayon::current_num_threads() } else { 1 };
    // Consecutive shader threads per pool thread, each with its own gathering buffers.
    let share = THREADS.div_ceil(pool.clamp(1, THREADS)) * words;
    // The 64 threads' blocks (590 KB at P = 64) in this thread's scratch, not zeroed: the
    // micro-kernels write every value of a thread's blocks (fresh, they were zeroed pages
    // for every slice of every chunk).
    let total = with_scratch(&BLOCKS, THREADS * words, |parts: &mut [f32]| {
        parts.par_chunks_mut(share).enumerate().for_each(|(g, parts)| {
            let mut scores = Vec::with_capacity(per_thread * width);
            let mut weights = Vec::with_capacity(per_thread);
            // Grown only for weighted rows (`gather`).
            let mut lefts = Vec::new();
            for (t, part) in parts.chunks_exact_mut(words).enumerate() {
                let bufs = [&mut scores, &mut weights, &mut lefts];
                thread(g * share / words + t, part, bufs);
            }
        });
        let mut total = vec![0.0f32; words];
        for part in parts.chunks_exact(words) {
            for (sum, &a) in total.iter_mut().zip(part) {
                *sum += a;
            }
        }
        total
    });
    let mut out = out;
    for &(at, cols) in &rows_of_blocks {
        let (row, tail) = std::mem::take(&mut out).split_at_mut(BLOCK * cols);
        out = tail;
        for (j, o) in row.chunks_exact_mut(BLOCK * BLOCK).enumerate() {
            for (r, o) in o.chunks_exact_mut(BLOCK).enumerate() {
                o.copy_from_slice(&total[at + r * cols + j * BLOCK..][..BLOCK]);
            }
        }
    }
}

/// Shader thread `t`'s rows of the slice `src` (rows t, t + 64, …) gathered into `scores`
/// and `weights`, and their left values `s · w` (rounded, as [`left`] computes them) into
/// `lefts`, left empty when every weight is 1 (`s · 1` is `s`): computed once a row here rather than
/// once a row in every pass of the micro-kernel over it (36 at P = 64), where the scalar
/// products took the multiply pipes the vector multiply-adds need. The rows lie 64 rows
/// apart, each in pages of its own, a stride the hardware prefetchers do not follow: the
/// rows [`GATHER_AHEAD`] turns on are asked for before each copy (65,536 × 64 float32
/// calls 7.6 → 6.7 ms on a Zen 3 VM).
fn gather(src: &Rows, t: usize, [scores, weights, lefts]: [&mut Vec<f32>; 3]) {
    let width = src.width;
    scores.clear();
    weights.clear();
    lefts.clear();
    for k in (t..src.len()).step_by(THREADS) {
        prefetch(src.scores, (k + GATHER_AHEAD * THREADS) * width, width);
        scores.extend_from_slice(&src.scores[k * width..(k + 1) * width]);
        weights.push(src.weights[k]);
    }
    if weights.iter().any(|&w| w != 1.0) {
        lefts.reserve(scores.len());
        for (row, &w) in scores.chunks_exact(width).zip(weights.iter()) {
            lefts.extend(row.iter().map(|&x| x * w));
        }
    }
}

/// Rows a shader thread's gather asks for ahead of the one it copies.
const GATHER_AHEAD: usize = 4;

/// One thread's blocks of the row of blocks from column `i0` into `acc` (from 0), over
/// all of `src`'s rows (that thread's, gathered; `lefts` their left values, laid out as
/// the scores), at `level`.
fn micro<const F: bool>(level: Level, (src, lefts): (&Rows, &[f32]), i0: usize, acc: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::syrk_simd::run_block::<F>(level, (src, lefts), i0, &mut *acc) {
        return;
    }
    let _ = (level, lefts);
    scalar::<F>(src, i0, acc);
}

/// The portable micro-kernel, and the definition the vector ones reproduce: one shader
/// thread's rows (`src`: rows t, t + 64, … of the slice) in order, entry (r, c) of its
/// blocks `fma(s[k, i0 + r] · w[k], s[k, i0 + c], ·)` from 0.
pub(super) fn scalar<const F: bool>(src: &Rows, i0: usize, acc: &mut [f32]) {
    let cols = acc.len() / BLOCK;
    acc.fill(0.0);
    for k in 0..src.len() {
        let x = left(src, k, i0);
        let row = &src.scores[k * src.width..(k + 1) * src.width];
        for (&x, acc) in x.iter().zip(acc.chunks_exact_mut(cols)) {
            for (c, a) in acc.iter_mut().enumerate() {
                let y = row.get(i0 + c).copied().unwrap_or(0.0);
                *a = madd::<F>(x, y, *a);
            }
        }
    }
}
