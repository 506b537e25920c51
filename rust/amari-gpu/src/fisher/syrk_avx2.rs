//! AVX2 micro-kernels of the host SYRK (`fisher::syrk_tile`, `fisher::syrk_block`): the
//! portable kernels' exact arithmetic, 8 lanes a register (sixteen registers in all, so
//! smaller register blocks than `fisher::syrk_avx512`). `F` fuses (`vfmadd`) or rounds the
//! product and the sum apart, as the devices do.

use std::arch::x86_64::*;

use super::shape::{BLOCK, TILE};
use super::syrk_pack::{left, Rows, THREADS};

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

/// `syrk_tile::scalar` of a 64 × 64 tile over `lhs.len() / 64` packed rows:
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

/// `syrk_block::scalar` of thread `t` (its rows `t, t + 64, …` of the
/// slice): one block's 8 columns a register by its 8 rows (eight accumulators) at a time,
/// columns read straight from the rows (a block starting past the padded width reads 0).
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
pub(super) unsafe fn block<const F: bool>(src: &Rows, t: usize, i0: usize, acc: &mut [f32]) {
    let (width, n) = (src.width, src.len());
    let cols = acc.len() / BLOCK;
    assert!(
        acc.len() == BLOCK * cols && src.scores.len() >= n * width,
        "one row of blocks"
    );
    let ap = acc.as_mut_ptr();
    for c0 in (0..cols).step_by(BLOCK) {
        // Columns i0 + c0 + 0..8 that exist: 8, 4 (width is a multiple of 4) or none.
        let have = width.saturating_sub(i0 + c0).min(BLOCK);
        let mut a = [_mm256_setzero_ps(); BLOCK];
        for k in (t..n).step_by(THREADS) {
            let x = left(src, k, i0);
            let mut y = [0.0f32; BLOCK];
            if have > 0 {
                y[..have].copy_from_slice(&src.scores[k * width + i0 + c0..][..have]);
            }
            // SAFETY: `y` is 8 floats.
            let yv = _mm256_loadu_ps(y.as_ptr());
            for (a, &x) in a.iter_mut().zip(&x) {
                *a = madd::<F>(_mm256_set1_ps(x), yv, *a);
            }
        }
        for (r, &a) in a.iter().enumerate() {
            // SAFETY: entries r · cols + c0 + 0..8 < 8 · cols words of `acc` (c0 + 8 <=
            // cols, a multiple of 8; checked above).
            _mm256_storeu_ps(ap.add(r * cols + c0), a);
        }
    }
}
