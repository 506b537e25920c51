//! AVX-512 micro-kernels of the host SYRK (`fisher::syrk_tile`, `fisher::syrk_block`): the
//! portable kernels' exact arithmetic, 16 lanes a register. Each accumulator register holds
//! 16 independent entries (tile columns, or block threads) whose chains advance one row at
//! a time in order, so the lanes change nothing but the speed. `F` fuses (`vfmadd`) or
//! rounds the product and the sum apart, as the devices do.

use std::arch::x86_64::*;

use super::shape::{BLOCK, TILE};
use super::syrk_block::{STATE, THREADS};

const E: usize = TILE;

/// `fma(x, y, acc)` rounded once (`F`) or twice.
#[inline(always)]
fn madd<const F: bool>(x: __m512, y: __m512, acc: __m512) -> __m512 {
    // SAFETY: only called from the `target_feature` functions below, on a CPU with
    // AVX-512F; the intrinsics touch registers only.
    #[allow(unsafe_code)]
    unsafe {
        if F {
            _mm512_fmadd_ps(x, y, acc)
        } else {
            _mm512_add_ps(_mm512_mul_ps(x, y), acc)
        }
    }
}

/// [`scalar`](super::syrk_tile::scalar) of a 64 × 64 tile over `lhs.len() / 64` packed rows:
/// four tile rows by 64 columns (sixteen registers) at a time, loaded from the tile, run
/// over the block's rows, stored back (from 0 on the `first` block: the tile is not read).
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
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
        let mut acc = [[_mm512_setzero_ps(); 4]; 4];
        // SAFETY (every load and store below): rows r0..r0 + 4 < 64 and vectors v < 4 of
        // 16 floats address inside the 64 × 64 tile; row k < kc of the panels is
        // `k · 64 + 0..64` inside their kc × 64 words (checked above).
        for (rr, a) in acc.iter_mut().enumerate() {
            for (v, a) in a.iter_mut().enumerate() {
                *a = if first {
                    _mm512_setzero_ps()
                } else {
                    _mm512_loadu_ps(tp.add((r0 + rr) * E + v * 16))
                };
            }
        }
        for k in 0..kc {
            let y = rp.add(k * E);
            let ys = [
                _mm512_loadu_ps(y),
                _mm512_loadu_ps(y.add(16)),
                _mm512_loadu_ps(y.add(32)),
                _mm512_loadu_ps(y.add(48)),
            ];
            let x = lp.add(k * E + r0);
            for (rr, a) in acc.iter_mut().enumerate() {
                let xv = _mm512_set1_ps(*x.add(rr));
                for (a, &yv) in a.iter_mut().zip(&ys) {
                    *a = madd::<F>(xv, yv, *a);
                }
            }
        }
        for (rr, a) in acc.iter().enumerate() {
            for (v, &a) in a.iter().enumerate() {
                _mm512_storeu_ps(tp.add((r0 + rr) * E + v * 16), a);
            }
        }
    }
}

/// [`scalar`](super::syrk_block::scalar) of one 8 × 8 block pair over rounds `0..rounds`
/// (column c of row k of a slice at `c · ld + k` in `x` and `y`)
/// of all 64 threads: 16 threads a register, four rows by four columns of the block
/// (sixteen registers) at a time.
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
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
    for v in 0..THREADS / 16 {
        for rb in (0..BLOCK).step_by(4) {
            for cb in (0..BLOCK).step_by(4) {
                let at = |rr: usize, cc: usize| ((rb + rr) * BLOCK + cb + cc) * THREADS + v * 16;
                let mut a = [[_mm512_setzero_ps(); 4]; 4];
                // SAFETY (every load and store below): entries (r, c) < (8, 8) and threads
                // v · 16 + 0..16 < 64 address inside the STATE words of `acc`; column
                // c < 8 at row m · 64 + v · 16 + 0..16 < rounds · 64, word
                // c · ld + row <= 7 · ld + rounds · 64, is inside both panels (checked above).
                for (rr, a) in a.iter_mut().enumerate() {
                    for (cc, a) in a.iter_mut().enumerate() {
                        *a = _mm512_loadu_ps(ap.add(at(rr, cc)));
                    }
                }
                for m in 0..rounds {
                    let k = m * THREADS + v * 16;
                    let xs: [__m512; 4] =
                        std::array::from_fn(|rr| _mm512_loadu_ps(xp.add((rb + rr) * ld + k)));
                    let ys: [__m512; 4] =
                        std::array::from_fn(|cc| _mm512_loadu_ps(yp.add((cb + cc) * ld + k)));
                    for (a, &xv) in a.iter_mut().zip(&xs) {
                        for (a, &yv) in a.iter_mut().zip(&ys) {
                            *a = madd::<F>(xv, yv, *a);
                        }
                    }
                }
                for (rr, a) in a.iter().enumerate() {
                    for (cc, &a) in a.iter().enumerate() {
                        _mm512_storeu_ps(ap.add(at(rr, cc)), a);
                    }
                }
            }
        }
    }
}
