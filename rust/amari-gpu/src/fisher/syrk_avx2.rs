//! AVX2 micro-kernels of the host SYRK (`fisher::syrk_tile`, `fisher::syrk_block`): the
//! portable kernels' exact arithmetic, 8 lanes a register (sixteen registers in all, so
//! smaller register blocks than `fisher::syrk_avx512`). `F` fuses (`vfmadd`) or rounds the
//! product and the sum apart, as the devices do.

use std::arch::x86_64::*;

use super::shape::{BLOCK, TILE};
use super::syrk_block::{STATE, THREADS};

const E: usize = TILE;

/// `fma(x, y, acc)` rounded once (`F`) or twice.
#[inline(always)]
fn madd<const F: bool>(x: __m256, y: __m256, acc: __m256) -> __m256 {
    // SAFETY: only called from the `target_feature` functions below, on a CPU with AVX2
    // and FMA; the intrinsics touch registers only.
    #[allow(unsafe_code)]
    unsafe {
        if F {
            _mm256_fmadd_ps(x, y, acc)
        } else {
            _mm256_add_ps(_mm256_mul_ps(x, y), acc)
        }
    }
}

/// [`scalar`](super::syrk_tile::scalar) of a 64 × 64 tile over `lhs.len() / 64` packed rows:
/// four tile rows by 16 columns (eight registers) at a time, from 0 on the `first` block.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
pub(super) unsafe fn tile<const F: bool>(
    first: bool,
    lhs: &[f32],
    rhs: &[f32],
    tile: &mut [f32],
) {
    let kc = lhs.len() / E;
    assert!(rhs.len() == kc * E && tile.len() == E * E, "packed panels");
    let (lp, rp, tp) = (lhs.as_ptr(), rhs.as_ptr(), tile.as_mut_ptr());
    for r0 in (0..E).step_by(4) {
        for c0 in (0..E).step_by(16) {
            let mut acc = [[_mm256_setzero_ps(); 2]; 4];
            // SAFETY (every load and store below): rows r0..r0 + 4 < 64 and columns
            // c0..c0 + 16 <= 64 address inside the 64 × 64 tile; row k < kc of the panels
            // is `k · 64 + 0..64` inside their kc × 64 words (checked above).
            for (rr, a) in acc.iter_mut().enumerate() {
                for (h, a) in a.iter_mut().enumerate() {
                    *a = if first {
                    _mm256_setzero_ps()
                } else {
                    _mm256_loadu_ps(tp.add((r0 + rr) * E + c0 + h * 8))
                };
                }
            }
            for k in 0..kc {
                let y = rp.add(k * E + c0);
                let ys = [_mm256_loadu_ps(y), _mm256_loadu_ps(y.add(8))];
                let x = lp.add(k * E + r0);
                for (rr, a) in acc.iter_mut().enumerate() {
                    let xv = _mm256_set1_ps(*x.add(rr));
                    for (a, &yv) in a.iter_mut().zip(&ys) {
                        *a = madd::<F>(xv, yv, *a);
                    }
                }
            }
            for (rr, a) in acc.iter().enumerate() {
                for (h, &a) in a.iter().enumerate() {
                    _mm256_storeu_ps(tp.add((r0 + rr) * E + c0 + h * 8), a);
                }
            }
        }
    }
}

/// [`scalar`](super::syrk_block::scalar) of one 8 × 8 block pair over rounds `0..rounds`
/// (column c of row k of a slice at `c · ld + k` in `x` and `y`)
/// of all 64 threads: 8 threads a register, four rows by two columns of the block (eight
/// registers) at a time.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
pub(super) unsafe fn block<const F: bool>(
    x: &[f32],
    y: &[f32],
    ld: usize,
    rounds: usize,
    acc: &mut [f32],
) {
    assert!(
        rounds * THREADS <= ld && x.len().min(y.len()) >= (BLOCK - 1) * ld + rounds * THREADS,
        "packed panels"
    );
    assert!(acc.len() == STATE, "one block's threads");
    let (xp, yp, ap) = (x.as_ptr(), y.as_ptr(), acc.as_mut_ptr());
    for v in 0..THREADS / 8 {
        for rb in (0..BLOCK).step_by(4) {
            for cb in (0..BLOCK).step_by(2) {
                let at = |rr: usize, cc: usize| ((rb + rr) * BLOCK + cb + cc) * THREADS + v * 8;
                let mut a = [[_mm256_setzero_ps(); 2]; 4];
                // SAFETY (every load and store below): entries (r, c) < (8, 8) and threads
                // v · 8 + 0..8 < 64 address inside the STATE words of `acc`; column c < 8
                // at row m · 64 + v · 8 + 0..8 < rounds · 64, word c · ld + row <=
                // 7 · ld + rounds · 64, is inside both panels (checked above).
                for (rr, a) in a.iter_mut().enumerate() {
                    for (cc, a) in a.iter_mut().enumerate() {
                        *a = _mm256_loadu_ps(ap.add(at(rr, cc)));
                    }
                }
                for m in 0..rounds {
                    let k = m * THREADS + v * 8;
                    let xs: [__m256; 4] =
                        std::array::from_fn(|rr| _mm256_loadu_ps(xp.add((rb + rr) * ld + k)));
                    let ys: [__m256; 2] =
                        std::array::from_fn(|cc| _mm256_loadu_ps(yp.add((cb + cc) * ld + k)));
                    for (a, &xv) in a.iter_mut().zip(&xs) {
                        for (a, &yv) in a.iter_mut().zip(&ys) {
                            *a = madd::<F>(xv, yv, *a);
                        }
                    }
                }
                for (rr, a) in a.iter().enumerate() {
                    for (cc, &a) in a.iter().enumerate() {
                        _mm256_storeu_ps(ap.add(at(rr, cc)), a);
                    }
                }
            }
        }
    }
}
