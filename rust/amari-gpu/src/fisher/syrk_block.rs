//! The 8 × 8 blocks of the host SYRK (`fisher_rows`' twin, P ≤ 64): one row of blocks of
//! one slice. The shader's 64 threads each take every 64th row and keep their own block;
//! here the threads are vector lanes: a block of rows is packed transposed (a column's
//! values for consecutive rows, i.e. consecutive threads, side by side) and each thread's
//! accumulators continue their chain across blocks. At the end the 64 thread blocks are
//! added in thread order from 0, as the shader adds them in workgroup memory.

use super::shape::BLOCK;
use super::syrk_pack::{pack_columns, Rows};
use crate::host::arith::madd;
use crate::host::simd::Level;

/// Threads of a `fisher_rows` workgroup: row r of a slice belongs to thread r mod 64.
pub(super) const THREADS: usize = 64;

/// Rounds of 64 rows per packed block.
const ROUNDS: usize = 4;

/// Words of one block pair's per-thread accumulators: entry (r, c) of thread t at
/// `(r · 8 + c) · 64 + t`.
pub(super) const STATE: usize = BLOCK * BLOCK * THREADS;

/// Blocks (bi, bj) for bj = bi, bi + 1, … of the slice `src` into `out` (8 × 8 row-major
/// each), the left columns starting at `i0 = bi · 8`. `level` is one
/// [`usable`](super::host_syrk::usable) returned.
pub(super) fn run_blocks<const F: bool>(level: Level, src: &Rows, i0: usize, out: &mut [f32]) {
    let blocks = out.len() / (BLOCK * BLOCK);
    let n = src.len();
    let ld = ROUNDS * THREADS;
    let mut x = vec![0.0f32; BLOCK * ld];
    let mut y = vec![0.0f32; blocks * BLOCK * ld];
    let mut acc = vec![0.0f32; blocks * STATE];
    for k0 in (0..n).step_by(ld) {
        let rows = k0..(k0 + ld).min(n);
        let (full, tail) = (rows.len() / THREADS, rows.len() % THREADS);
        pack_columns(src, rows.clone(), i0, BLOCK, true, ld, &mut x);
        pack_columns(src, rows, i0, blocks * BLOCK, false, ld, &mut y);
        for (yj, aj) in y.chunks_exact(BLOCK * ld).zip(acc.chunks_exact_mut(STATE)) {
            if full > 0 {
                micro::<F>(level, &x, yj, ld, full, aj);
            }
            if tail > 0 {
                // The slice's last, partial round: threads past its end have no row.
                scalar::<F>(&x, yj, ld, full..full + 1, tail, aj);
            }
        }
    }
    for (o, aj) in out.chunks_exact_mut(BLOCK * BLOCK).zip(acc.chunks_exact(STATE)) {
        for (v, threads) in o.iter_mut().zip(aj.chunks_exact(THREADS)) {
            *v = threads.iter().fold(0.0f32, |total, &t| total + t);
        }
    }
}

/// Rounds `0..rounds` of all 64 threads into `acc`, at `level`.
fn micro<const F: bool>(
    level: Level,
    x: &[f32],
    y: &[f32],
    ld: usize,
    rounds: usize,
    acc: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    match level {
        // SAFETY: `level` came from `usable`, which returns `Avx512` only when the CPU has
        // AVX-512F, AVX2 and FMA (all the function enables); it checks its slices' lengths.
        #[allow(unsafe_code)]
        Level::Avx512 => return unsafe { super::syrk_avx512::block::<F>(x, y, ld, rounds, acc) },
        // SAFETY: as above, `Avx2` only when the CPU has AVX2 and FMA.
        #[allow(unsafe_code)]
        Level::Avx2 => return unsafe { super::syrk_avx2::block::<F>(x, y, ld, rounds, acc) },
        _ => {}
    }
    let _ = level;
    scalar::<F>(x, y, ld, 0..rounds, THREADS, acc);
}

/// Threads `0..lanes` over `rounds` (row `m · 64 + t` of the packed block for thread t in
/// round m): the portable micro-kernel, and the definition the vector ones reproduce.
pub(super) fn scalar<const F: bool>(
    x: &[f32],
    y: &[f32],
    ld: usize,
    rounds: std::ops::Range<usize>,
    lanes: usize,
    acc: &mut [f32],
) {
    for r in 0..BLOCK {
        for c in 0..BLOCK {
            let entry = &mut acc[(r * BLOCK + c) * THREADS..][..lanes];
            for (t, a) in entry.iter_mut().enumerate() {
                for m in rounds.clone() {
                    let k = m * THREADS + t;
                    *a = madd::<F>(x[r * ld + k], y[c * ld + k], *a);
                }
            }
        }
    }
}
