//! The 64 × 64 tiles of the host SYRK (`fisher_tiled`'s twin, and the float64
//! `fisher_triangle`'s in tiles): a run of rows of tiles of one slice, blocked over the
//! slice's rows, in float32 or float64. Per block of [`KC`] rows each left strip
//! (weighted) and each right strip are packed, and the micro-kernel continues every entry's chain from
//! the value the tile holds, so the block boundaries leave no trace in the bits. The first
//! tile of a row of tiles is on the diagonal: its entries below the diagonal (column < row)
//! are mirrored ones the reduction never reads, so the vector kernels skip what they can of
//! them and every level writes them as 0, as `fisher_tiled` does.

use super::shape::TILE;
use super::syrk_pack::{pack_rows, Rows};
use crate::host::arith::Real;
use crate::host::simd::Level;

#[cfg(target_arch = "x86_64")]
pub(super) use super::syrk_vector::Lanes as Elem;

/// The element types of the tiles (where no vector kernels exist, any float type).
#[cfg(not(target_arch = "x86_64"))]
pub(super) trait Elem: Real + Default {}
#[cfg(not(target_arch = "x86_64"))]
impl<T: Real + Default> Elem for T {}

/// Rows per block: the two panels (2 × 16 KiB in float32, 2 × 32 KiB in float64) stay in
/// L1/L2 while all the tile's micro-kernels sweep them.
pub(super) const KC: usize = 64;

const E: usize = TILE;

/// Tile rows `ti0..ti1` of the slice `src` (tiles (ti, tj) for tj = ti..tiles, row by row)
/// into `out`, one E × E tile after another, row-major. Per block of rows every right strip
/// from `ti0` on is packed once and shared by all the tile rows, so the block is read from
/// memory once and from the caches after. `level` is one `Level::at_most_detected`
/// returned.
pub(super) fn run_tiles<T: Elem, const F: bool>(
    level: Level,
    src: &Rows<T>,
    (ti0, ti1, tiles): (usize, usize, usize),
    out: &mut [T],
) {
    let n = src.len();
    if n == 0 {
        out.fill(T::ZERO);
        return;
    }
    let panel = KC * E;
    let mut lhs = vec![T::ZERO; panel];
    let mut rhs = vec![T::ZERO; (tiles - ti0) * panel];
    for k0 in (0..n).step_by(KC) {
        let rows = k0..(k0 + KC).min(n);
        let kc = rows.len();
        for (s, strip) in rhs.chunks_exact_mut(panel).enumerate() {
            pack_rows::<T, E>(src, rows.clone(), (ti0 + s) * E, false, strip);
        }
        let mut rest = &mut *out;
        for ti in ti0..ti1 {
            pack_rows::<T, E>(src, rows.clone(), ti * E, true, &mut lhs);
            let (row, tail) = std::mem::take(&mut rest).split_at_mut((tiles - ti) * E * E);
            rest = tail;
            for (j, tile) in row.chunks_exact_mut(E * E).enumerate() {
                let strip = &rhs[(ti - ti0 + j) * panel..][..kc * E];
                micro::<T, F>(level, (k0 == 0, j == 0), &lhs[..kc * E], strip, tile);
            }
        }
    }
    let mut at = 0;
    for ti in ti0..ti1 {
        zero_below_diagonal(&mut out[at..at + E * E]);
        at += (tiles - ti) * E * E;
    }
}

/// Entries (r, c) with c < r of a diagonal tile (row-major E × E) to 0.
pub(super) fn zero_below_diagonal<T: Real>(tile: &mut [T]) {
    for (r, row) in tile.chunks_exact_mut(E).enumerate() {
        row[..r].fill(T::ZERO);
    }
}

/// `tile[r][c] = fma(lhs[k][r], rhs[k][c], tile[r][c])` for k in order, at `level`; on the
/// `first` block the chains start from 0 instead (what the tile holds is not read); on a
/// `diag`onal tile entries below the diagonal may be left as they are.
fn micro<T: Elem, const F: bool>(
    level: Level,
    (first, diag): (bool, bool),
    lhs: &[T],
    rhs: &[T],
    tile: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if super::syrk_simd::run_tile::<T, F>(level, (first, diag), lhs, rhs, &mut *tile) {
        return;
    }
    let _ = diag;
    let _ = level;
    if first {
        tile.fill(T::ZERO);
    }
    scalar::<T, F>(lhs, rhs, tile);
}

/// The portable micro-kernel, and the definition the vector ones reproduce.
pub(super) fn scalar<T: Real, const F: bool>(lhs: &[T], rhs: &[T], tile: &mut [T]) {
    for (x, y) in lhs.chunks_exact(E).zip(rhs.chunks_exact(E)) {
        for (&xv, row) in x.iter().zip(tile.chunks_exact_mut(E)) {
            for (acc, &yv) in row.iter_mut().zip(y) {
                *acc = T::madd::<F>(xv, yv, *acc);
            }
        }
    }
}
