//! The 8 × 8 blocks of the host SYRK (`fisher_rows`' twin, P ≤ 64): a run of rows of blocks
//! of one slice. The shader's 64 threads each take every 64th row of the slice and keep
//! their own 8 × 8 block per pair; here one shader thread at a time has its rows gathered
//! into one contiguous panel (read from memory once, however many rows of blocks the run
//! holds: the panel stays in L2 while every row of blocks of the run sweeps it), then its
//! rows run in order with its accumulators in registers, across every block of a row of
//! blocks at once (vector lanes are columns), and its blocks are added to the total in
//! thread order from 0, as the shader adds them in workgroup memory.

use super::shape::BLOCK;
use super::syrk_pack::{left, Rows, THREADS};
use crate::host::arith::madd;
use crate::host::simd::Level;

/// Rows of blocks `ti0..ti1` of `tiles` (row ti: blocks (ti, ti..tiles)) of the slice `src`
/// into `out` (row after row, 8 × 8 row-major blocks each). `level` is one
/// `Level::at_most_detected` returned.
pub(super) fn run_blocks<const F: bool>(
    level: Level,
    src: &Rows,
    (ti0, ti1): (usize, usize),
    tiles: usize,
    out: &mut [f32],
) {
    let width = src.width;
    // Row ti's entries (r, ti · 8 + c) at r · cols + c, cols = (tiles − ti) · 8: the sums
    // of the threads so far, and one thread's blocks.
    let mut totals: Vec<Vec<f32>> = (ti0..ti1)
        .map(|ti| vec![0.0f32; BLOCK * BLOCK * (tiles - ti)])
        .collect();
    let mut acc = vec![0.0f32; totals.first().map_or(0, Vec::len)];
    let per_thread = src.len().div_ceil(THREADS);
    let mut scores = Vec::with_capacity(per_thread * width);
    let mut weights = Vec::with_capacity(per_thread);
    for t in 0..THREADS {
        scores.clear();
        weights.clear();
        for k in (t..src.len()).step_by(THREADS) {
            scores.extend_from_slice(&src.scores[k * width..(k + 1) * width]);
            weights.push(src.weights[k]);
        }
        let rows = Rows {
            scores: &scores,
            weights: &weights,
            width,
        };
        for (ti, total) in (ti0..ti1).zip(&mut totals) {
            let acc = &mut acc[..total.len()];
            micro::<F>(level, &rows, ti * BLOCK, acc);
            for (sum, &a) in total.iter_mut().zip(acc.iter()) {
                *sum += a;
            }
        }
    }
    let mut out = out;
    for total in &totals {
        let cols = total.len() / BLOCK;
        let (row, tail) = std::mem::take(&mut out).split_at_mut(total.len());
        out = tail;
        for (j, o) in row.chunks_exact_mut(BLOCK * BLOCK).enumerate() {
            for (r, o) in o.chunks_exact_mut(BLOCK).enumerate() {
                o.copy_from_slice(&total[r * cols + j * BLOCK..][..BLOCK]);
            }
        }
    }
}

/// One thread's blocks of the row of blocks from column `i0` into `acc` (from 0), over
/// all of `src`'s rows (that thread's, gathered), at `level`.
fn micro<const F: bool>(level: Level, src: &Rows, i0: usize, acc: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::syrk_simd::run_block::<F>(level, src, i0, &mut *acc) {
        return;
    }
    let _ = level;
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
