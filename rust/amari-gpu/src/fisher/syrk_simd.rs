//! Vector micro-kernels of the host SYRK (`fisher::syrk_tile`, `fisher::syrk_block`),
//! written once over a [`Vector`] and compiled for AVX-512 (16 lanes) and AVX2 + FMA (8
//! lanes): the portable kernels' exact arithmetic, each lane an independent entry (a tile
//! column, or a block column of one shader thread) whose chain advances one row at a time
//! in order, so the lanes change nothing but the speed. `F` fuses (`vfmadd`) or rounds the
//! product and the sum apart, as the devices do.

use std::arch::x86_64::{__m256, __m512};

use crate::host::simd::Level;

use super::shape::{BLOCK, TILE};
use super::syrk_pack::{left, Rows, THREADS};
use super::syrk_vector::Vector;

const E: usize = TILE;

/// `syrk_tile::scalar` of a 64 × 64 tile over `lhs.len() / 64` packed rows: four tile rows
/// by `NV` registers of columns at a time, loaded from the tile (or 0 on the `first` block),
/// run over the block's rows, stored back.
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn tile<V: Vector, const NV: usize, const F: bool>(
    first: bool,
    lhs: &[f32],
    rhs: &[f32],
    tile: &mut [f32],
) {
    let kc = lhs.len() / E;
    assert!(rhs.len() == kc * E && tile.len() == E * E, "packed panels");
    let (lp, rp, tp) = (lhs.as_ptr(), rhs.as_ptr(), tile.as_mut_ptr());
    let step = NV * V::LANES;
    for r0 in (0..E).step_by(4) {
        for c0 in (0..E).step_by(step) {
            // SAFETY (every load and store below): rows r0..r0 + 4 <= 64 and columns
            // c0..c0 + step <= 64 (64 is a multiple of step) address inside the 64 × 64
            // tile; row k < kc of the panels is `k · 64 + 0..64`, inside their kc × 64
            // words (checked above).
            let mut acc = [[V::zero(); NV]; 4];
            if !first {
                for (rr, a) in acc.iter_mut().enumerate() {
                    for (v, a) in a.iter_mut().enumerate() {
                        *a = V::load(tp.add((r0 + rr) * E + c0 + v * V::LANES));
                    }
                }
            }
            for k in 0..kc {
                let y = rp.add(k * E + c0);
                let ys: [V; NV] = std::array::from_fn(|v| V::load(y.add(v * V::LANES)));
                let x = lp.add(k * E + r0);
                for (rr, a) in acc.iter_mut().enumerate() {
                    let xv = V::splat(*x.add(rr));
                    for (a, &yv) in a.iter_mut().zip(&ys) {
                        *a = V::madd::<F>(xv, yv, *a);
                    }
                }
            }
            for (rr, a) in acc.iter().enumerate() {
                for (v, a) in a.iter().enumerate() {
                    a.store(tp.add((r0 + rr) * E + c0 + v * V::LANES));
                }
            }
        }
    }
}

/// `syrk_block::scalar` of thread `t` (its rows `t, t + 64, …` of the slice): `G` registers
/// of columns by the 8 rows of the blocks at a time, columns read straight from the rows
/// (lanes past the padded width read as 0 and touch no memory; lanes past the blocks are
/// not stored).
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn block<V: Vector, const G: usize, const F: bool>(
    src: &Rows,
    t: usize,
    i0: usize,
    acc: &mut [f32],
) {
    let (width, n, lanes) = (src.width, src.len(), V::LANES);
    let cols = acc.len() / BLOCK;
    assert!(
        acc.len() == BLOCK * cols && src.scores.len() >= n * width,
        "one row of blocks"
    );
    let (sp, ap) = (src.scores.as_ptr(), acc.as_mut_ptr());
    for c0 in (0..cols).step_by(G * lanes) {
        // Lanes of each register that hold columns of the rows, and that hold blocks.
        let have: [usize; G] =
            std::array::from_fn(|g| width.saturating_sub(i0 + c0 + g * lanes).min(lanes));
        let keep: [usize; G] =
            std::array::from_fn(|g| cols.saturating_sub(c0 + g * lanes).min(lanes));
        let mut a = [[V::zero(); G]; BLOCK];
        for k in (t..n).step_by(THREADS) {
            let x = left(src, k, i0);
            // SAFETY: register g reads columns i0 + c0 + g · lanes + 0..have[g] < width of
            // row k < n only, inside the slice's n · width words (checked above);
            // `wrapping_add` forms the address of a register that reads nothing without
            // claiming it is in bounds.
            let row = sp.wrapping_add(k * width + i0 + c0);
            let ys: [V; G] = std::array::from_fn(|g| {
                let p = row.wrapping_add(g * lanes);
                if have[g] == lanes {
                    V::load(p)
                } else {
                    V::load_first(p, have[g])
                }
            });
            for (a, &x) in a.iter_mut().zip(&x) {
                let xv = V::splat(x);
                for (a, &y) in a.iter_mut().zip(&ys) {
                    *a = V::madd::<F>(xv, y, *a);
                }
            }
        }
        for (r, a) in a.iter().enumerate() {
            for (g, &a) in a.iter().enumerate() {
                // SAFETY: lanes stored have c0 + g · lanes + l < cols (`keep`): entry
                // r · cols + that < 8 · cols words of `acc` (checked above).
                let p = ap.wrapping_add(r * cols + c0 + g * lanes);
                if keep[g] == lanes {
                    a.store(p);
                } else {
                    a.store_first(p, keep[g]);
                }
            }
        }
    }
}

/// [`tile`] on AVX-512: four registers, the tile's 64 columns, per row.
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn tile_avx512<const F: bool>(first: bool, l: &[f32], r: &[f32], t: &mut [f32]) {
    tile::<__m512, 4, F>(first, l, r, t)
}

/// [`tile`] on AVX2: two registers (16 columns) per row, sixteen registers in all.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn tile_avx2<const F: bool>(first: bool, l: &[f32], r: &[f32], t: &mut [f32]) {
    tile::<__m256, 2, F>(first, l, r, t)
}

/// [`block`] on AVX-512: 32 columns (two registers) per block row.
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn block_avx512<const F: bool>(s: &Rows, t: usize, i0: usize, a: &mut [f32]) {
    block::<__m512, 2, F>(s, t, i0, a)
}

/// [`block`] on AVX2: one block's 8 columns (one register) per block row.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn block_avx2<const F: bool>(s: &Rows, t: usize, i0: usize, a: &mut [f32]) {
    block::<__m256, 1, F>(s, t, i0, a)
}

/// One micro-kernel call.
pub(super) enum Call<'a> {
    /// [`tile`]'s arguments.
    Tile {
        first: bool,
        lhs: &'a [f32],
        rhs: &'a [f32],
        tile: &'a mut [f32],
    },
    /// [`block`]'s arguments.
    Block {
        src: &'a Rows<'a>,
        t: usize,
        i0: usize,
        acc: &'a mut [f32],
    },
}

/// Runs `call` with the vector kernels of `level`, which must come from
/// `Level::at_most_detected`; false, having done nothing, at a level without them.
pub(super) fn run<const F: bool>(level: Level, call: Call) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: `Level::at_most_detected` returns `Avx512` only when the CPU has AVX-512F,
    // AVX2 and FMA, and `Avx2` only when it has AVX2 and FMA: all each function enables;
    // they check their slices' lengths.
    unsafe {
        match (level, call) {
            (Level::Avx512, Call::Tile { first, lhs, rhs, tile }) => {
                tile_avx512::<F>(first, lhs, rhs, tile)
            }
            (Level::Avx2, Call::Tile { first, lhs, rhs, tile }) => {
                tile_avx2::<F>(first, lhs, rhs, tile)
            }
            (Level::Avx512, Call::Block { src, t, i0, acc }) => block_avx512::<F>(src, t, i0, acc),
            (Level::Avx2, Call::Block { src, t, i0, acc }) => block_avx2::<F>(src, t, i0, acc),
            _ => return false,
        }
    }
    true
}
