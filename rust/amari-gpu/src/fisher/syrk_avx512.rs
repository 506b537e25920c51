//! AVX-512 micro-kernels of the host SYRK (`fisher::syrk_tile`, `fisher::syrk_block`): the
//! portable kernels' exact arithmetic, 16 lanes a register. Each accumulator register holds
//! 16 independent entries (tile columns, or block threads) whose chains advance one row at
//! a time in order, so the lanes change nothing but the speed. `F` fuses (`vfmadd`) or
//! rounds the product and the sum apart, as the devices do.

use std::arch::x86_64::*;

use super::shape::{BLOCK, TILE};
use super::syrk_pack::{left, Rows, THREADS};

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

/// `syrk_tile::scalar` of a 64 × 64 tile over `lhs.len() / 64` packed rows:
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

/// Lanes `0..n` of a 16-lane mask.
#[inline(always)]
fn lanes(n: usize) -> __mmask16 {
    if n >= 16 {
        u16::MAX
    } else {
        (1u16 << n) - 1
    }
}

/// `syrk_block::scalar` of thread `t` (its rows `t, t + 64, …` of the
/// slice): 16 columns a register, two registers by the 8 rows of the blocks (sixteen
/// accumulators) at a time, columns read straight from the rows with masked loads (lanes
/// past the padded width read as 0 and touch no memory; lanes past the blocks are not
/// stored).
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
pub(super) unsafe fn block<const F: bool>(src: &Rows, t: usize, i0: usize, acc: &mut [f32]) {
    let (width, n) = (src.width, src.len());
    let cols = acc.len() / BLOCK;
    assert!(
        acc.len() == BLOCK * cols && src.scores.len() >= n * width,
        "one row of blocks"
    );
    let (sp, ap) = (src.scores.as_ptr(), acc.as_mut_ptr());
    for c0 in (0..cols).step_by(32) {
        let load: [__mmask16; 2] =
            std::array::from_fn(|g| lanes(width.saturating_sub(i0 + c0 + 16 * g)));
        let store: [__mmask16; 2] = std::array::from_fn(|g| lanes(cols.saturating_sub(c0 + 16 * g)));
        let mut a = [[_mm512_setzero_ps(); 2]; BLOCK];
        for k in (t..n).step_by(THREADS) {
            let x = left(src, k, i0);
            // SAFETY: the loads read lanes l of columns i0 + c0 + 16 g + l < width of row
            // k < n only (the masks), inside the slice's n · width words (checked above);
            // masked-off lanes are not accessed, and `wrapping_add` forms their addresses
            // without claiming they are in bounds.
            let row = sp.wrapping_add(k * width + i0 + c0);
            let ys = [
                _mm512_maskz_loadu_ps(load[0], row),
                _mm512_maskz_loadu_ps(load[1], row.wrapping_add(16)),
            ];
            for (a, &x) in a.iter_mut().zip(&x) {
                let xv = _mm512_set1_ps(x);
                for (a, &y) in a.iter_mut().zip(&ys) {
                    *a = madd::<F>(xv, y, *a);
                }
            }
        }
        for (r, a) in a.iter().enumerate() {
            for (g, &a) in a.iter().enumerate() {
                // SAFETY: lanes l stored have c0 + 16 g + l < cols (the mask): entry
                // r · cols + c0 + 16 g + l < 8 · cols words of `acc` (checked above).
                _mm512_mask_storeu_ps(ap.wrapping_add(r * cols + c0 + 16 * g), store[g], a);
            }
        }
    }
}
