//! The 8 × 8 blocks of the host SYRK (`fisher_rows`' twin, P ≤ 64): one row of blocks of
//! one slice. The shader's 64 threads each take every 64th row of the slice and keep their
//! own 8 × 8 block per pair; here one thread at a time runs its rows in order with its
//! accumulators in registers, across every block of the row at once (vector lanes are
//! columns, read straight from the rows: nothing is packed), and its blocks are added to
//! the total in thread order from 0, as the shader adds them in workgroup memory.

use super::shape::BLOCK;
use super::syrk_pack::{left, Rows, THREADS};
use crate::host::arith::madd;
use crate::host::simd::Level;

/// Blocks (bi, bj) for bj = bi, bi + 1, … of the slice `src` into `out` (8 × 8 row-major
/// each), the left columns starting at `i0 = bi · 8`. `level` is one
/// `Level::at_most_detected` returned.
pub(super) fn run_blocks<const F: bool>(level: Level, src: &Rows, i0: usize, out: &mut [f32]) {
    let cols = out.len() / BLOCK;
    // Entry (r, i0 + c) at r · cols + c: one thread's blocks, and their sum so far.
    let mut acc = vec![0.0f32; BLOCK * cols];
    let mut total = vec![0.0f32; BLOCK * cols];
    for t in 0..THREADS {
        micro::<F>(level, src, t, i0, &mut acc);
        for (sum, &a) in total.iter_mut().zip(&acc) {
            *sum += a;
        }
    }
    for (j, o) in out.chunks_exact_mut(BLOCK * BLOCK).enumerate() {
        for (r, o) in o.chunks_exact_mut(BLOCK).enumerate() {
            o.copy_from_slice(&total[r * cols + j * BLOCK..][..BLOCK]);
        }
    }
}

/// Thread `t`'s blocks into `acc` (from 0), at `level`.
fn micro<const F: bool>(level: Level, src: &Rows, t: usize, i0: usize, acc: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::syrk_simd::run_block::<F>(level, src, t, i0, &mut *acc) {
        return;
    }
    let _ = level;
    scalar::<F>(src, t, i0, acc);
}

/// The portable micro-kernel, and the definition the vector ones reproduce: thread `t`'s
/// rows `t, t + 64, …` of the slice in order, entry (r, c) of its blocks
/// `fma(s[k, i0 + r] · w[k], s[k, i0 + c], ·)` from 0.
pub(super) fn scalar<const F: bool>(src: &Rows, t: usize, i0: usize, acc: &mut [f32]) {
    let cols = acc.len() / BLOCK;
    acc.fill(0.0);
    for k in (t..src.len()).step_by(THREADS) {
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
