//! The 8 × 8 blocks of the host SYRK (`fisher_rows`' twin, P ≤ 64): one row of blocks of
//! one slice. The shader's 64 threads each take every 64th row and keep their own block;
//! here the threads are vector lanes: the chunk's rows are transposed once (a column's
//! values for consecutive rows, i.e. consecutive threads, side by side) and each thread's
//! chain runs over its rows in order. At the end the 64 thread blocks are added in thread
//! order from 0, as the shader adds them in workgroup memory.

use rayon::prelude::*;

use super::shape::BLOCK;
use super::syrk_pack::{pack_columns, Rows};
use crate::host::arith::madd;
use crate::host::simd::Level;

/// Threads of a `fisher_rows` workgroup: row r of a slice belongs to thread r mod 64.
pub(super) const THREADS: usize = 64;

/// Words of one block pair's per-thread accumulators: entry (r, c) of thread t at
/// `(r · 8 + c) · 64 + t`.
pub(super) const STATE: usize = BLOCK * BLOCK * THREADS;

/// A chunk's rows transposed, once for all its tasks: column c of row k at `c · ld + k`
/// (`ld` the chunk's rows), weighted (`x`, the left columns) and as given (`y`), with zero
/// columns up to whole blocks.
pub(super) struct Columns {
    x: Vec<f32>,
    y: Vec<f32>,
    ld: usize,
}

impl Columns {
    /// The chunk `src` transposed into `columns` columns (a multiple of 8), 8 columns per
    /// task on the current thread pool.
    pub fn new(src: &Rows, columns: usize) -> Columns {
        let ld = src.len();
        let mut x = vec![0.0f32; columns * ld];
        let mut y = vec![0.0f32; columns * ld];
        if ld > 0 {
            x.par_chunks_mut(BLOCK * ld)
                .zip(y.par_chunks_mut(BLOCK * ld))
                .enumerate()
                .for_each(|(b, (x, y))| {
                    pack_columns(src, 0..ld, b * BLOCK, BLOCK, true, ld, x);
                    pack_columns(src, 0..ld, b * BLOCK, BLOCK, false, ld, y);
                });
        }
        Columns { x, y, ld }
    }
}

/// Blocks (bi, bj) for bj = bi, bi + 1, … over the chunk's rows `rows` (one slice) into
/// `out` (8 × 8 row-major each), the left columns starting at `i0 = bi · 8`. `level` is
/// one [`usable`](super::host_syrk::usable) returned.
pub(super) fn run_blocks<const F: bool>(
    level: Level,
    cols: &Columns,
    rows: std::ops::Range<usize>,
    i0: usize,
    out: &mut [f32],
) {
    let ld = cols.ld;
    let (full, tail) = (rows.len() / THREADS, rows.len() % THREADS);
    let x = &cols.x[i0 * ld + rows.start..];
    let mut acc = vec![0.0f32; STATE];
    for (j, o) in out.chunks_exact_mut(BLOCK * BLOCK).enumerate() {
        let y = &cols.y[(i0 + j * BLOCK) * ld + rows.start..];
        acc.fill(0.0);
        if full > 0 {
            micro::<F>(level, x, y, ld, full, &mut acc);
        }
        if tail > 0 {
            // The slice's last, partial round: threads past its end have no row.
            scalar::<F>(x, y, ld, full..full + 1, tail, &mut acc);
        }
        // The 64 thread blocks added in thread order from 0, as in workgroup memory.
        for (v, threads) in o.iter_mut().zip(acc.chunks_exact(THREADS)) {
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

/// Threads `0..lanes` over `rounds` (row `m · 64 + t` of the slice for thread t in round m;
/// column c of row k at `c · ld + k`): the portable micro-kernel, and the definition the vector ones reproduce.
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
