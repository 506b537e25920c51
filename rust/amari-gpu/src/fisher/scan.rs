//! One pass over host scores before a Fisher call: every column's largest magnitude, taken
//! as the largest `bits & 0x7fff_ffff` (the integer order of non-negative float32 bits is
//! their numeric order, and NaN and the infinities sit above every finite value). The same
//! numbers tell whether every score is finite and choose the exact scaling
//! (`fisher::scale`), so the scores are read once for both instead of twice. A maximum is
//! exact in any order: the rows are cut into blocks scanned in parallel, and the result
//! does not depend on how.

use rayon::prelude::*;

use crate::host::simd::{dispatch, Task};

/// Rows per parallel block: enough to amortise a task, few enough to share two threads.
const BLOCK_ROWS: usize = 1024;

/// Bits of the smallest magnitude that is not finite (the infinities; NaNs lie above).
const NOT_FINITE: u32 = 0x7f80_0000;

/// The largest magnitude of every column of row-major (N, `p`) `scores`, as float32 bits
/// (`p` words; 0 without rows). A column holds a NaN or an infinity exactly when its word
/// is at least `0x7f80_0000`.
pub(crate) fn column_maxima(scores: &[f32], p: usize) -> Vec<u32> {
    let p = p.max(1);
    if !scanned_in_parallel(scores.len(), p) {
        // One block: scanned here. Handing it to rayon's pool from this (non-pool) thread
        // would cost a wake-up and a wait, several times a small call's whole scan.
        let mut maxima = vec![0u32; p];
        dispatch(Maxima {
            rows: scores,
            maxima: &mut maxima,
        });
        return maxima;
    }
    scores
        .par_chunks(BLOCK_ROWS * p)
        .fold(
            || vec![0u32; p],
            |mut maxima, block| {
                dispatch(Maxima {
                    rows: block,
                    maxima: &mut maxima,
                });
                maxima
            },
        )
        .reduce(
            || vec![0u32; p],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(a, &b)| *a = (*a).max(b));
                a
            },
        )
}

/// Whether [`column_maxima`] scans `words` scores of `p` columns in parallel blocks.
pub(crate) fn scanned_in_parallel(words: usize, p: usize) -> bool {
    words > BLOCK_ROWS * p.max(1)
}

/// Whether every column of [`column_maxima`] is finite.
pub(crate) fn all_finite(maxima: &[u32]) -> bool {
    maxima.iter().all(|&m| m < NOT_FINITE)
}

/// One block's rows folded into the maxima, compiled for the CPU's SIMD level: integer
/// maxima across a row vectorise (lanes are columns).
struct Maxima<'a> {
    rows: &'a [f32],
    maxima: &'a mut [u32],
}

impl Task for Maxima<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let p = self.maxima.len();
        for row in self.rows.chunks_exact(p) {
            for (m, &v) in self.maxima.iter_mut().zip(row) {
                *m = (*m).max(v.to_bits() & 0x7fff_ffff);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxima_are_the_columns_largest_magnitudes_and_flag_non_finite_columns() {
        // 3 columns over 2,500 rows (three blocks, the last partial): column 0 ordinary
        // with its largest magnitude negative and in the last block, column 1 subnormal
        // and zeros of both signs, column 2 a NaN in the second block.
        let n = 2_500;
        let mut scores = vec![0.0f32; n * 3];
        for r in 0..n {
            scores[r * 3] = (r % 7) as f32 - 3.0;
            scores[r * 3 + 1] = if r % 2 == 0 { -0.0 } else { f32::from_bits(5) };
            scores[r * 3 + 2] = 1.0;
        }
        scores[2_400 * 3] = -9.5;
        let m = column_maxima(&scores, 3);
        assert_eq!(m, vec![9.5f32.to_bits(), 5, 1.0f32.to_bits()]);
        assert!(all_finite(&m));
        scores[1_500 * 3 + 2] = f32::NAN;
        assert!(!all_finite(&column_maxima(&scores, 3)));
        scores[1_500 * 3 + 2] = f32::NEG_INFINITY;
        let m = column_maxima(&scores, 3);
        assert_eq!(m[2], NOT_FINITE);
        assert!(!all_finite(&m));
        assert_eq!(column_maxima(&[], 4), vec![0; 4]);
    }
}
