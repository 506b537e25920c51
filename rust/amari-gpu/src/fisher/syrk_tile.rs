//! The 64 × 64 tiles of the host SYRK (`fisher_tiled`'s twin, and the float64
//! `fisher_triangle`'s in tiles): every tile of the upper triangle of one slice, in float32
//! or float64. The slice's rows are taken a sweep at a time: the sweep's left (weighted)
//! and right strips of every column tile are packed once, by all threads, and then every
//! tile is computed from them, cut into runs of its rows so that the threads share the
//! work to the end (a diagonal tile's rows are uneven, and P ≤ 64 has one tile). The rows
//! are thus read from memory once per call and packed once, whatever the number of tiles.
//! Within a sweep the micro-kernel takes [`KC`] rows at a time and continues every entry's
//! chain from the value the tile holds, so the block boundaries leave no trace in the bits.
//! The first tile of a row of tiles is on the diagonal: its entries below the diagonal
//! (column < row) are mirrored ones the reduction never reads, so the vector kernels skip
//! what they can of them and every level writes them as 0, as `fisher_tiled` does.

use std::ops::Range;

use rayon::prelude::*;

use super::shape::TILE;
use super::syrk_pack::{pack_rows, Rows};
use crate::host::arith::Real;
use crate::host::simd::Level;

#[cfg(target_arch = "x86_64")]
pub(super) use super::syrk_vector::Lanes as Elem;

/// The element types of the tiles (where no vector kernels exist, any float type).
#[cfg(not(target_arch = "x86_64"))]
pub(super) trait Elem: Real + Default + Send + Sync {}
#[cfg(not(target_arch = "x86_64"))]
impl<T: Real + Default + Send + Sync> Elem for T {}

/// Rows per micro-kernel block: its left and right panels (2 × 16 KiB in float32, 2 × 32 KiB
/// in float64) stay in L1/L2 while the tile's rows sweep them.
pub(super) const KC: usize = 64;

/// Bytes of packed panels per sweep at most (both panels of every column tile): within the
/// two cores' L2, far within L3, so the packed rows are read from the caches.
const SWEEP_BYTES: usize = 2 << 20;

/// Multiply-adds of a sweep below which it runs on the calling thread alone (handing work
/// to another thread costs more).
const MIN_PARALLEL_MACS: usize = 1 << 18;

const E: usize = TILE;

/// One piece of work of a sweep: rows `rows` (multiples of 4) of tile `(ti, tj)`.
#[derive(Debug, Clone)]
struct Unit {
    ti: usize,
    tj: usize,
    rows: Range<usize>,
}

/// Every tile (ti, tj), tj ≥ ti, of `tiles` tiles a side, cut into runs of rows: about
/// `4 × threads` runs in all, a diagonal tile's runs of equal work (row r of it holds the
/// 64 − r entries from the diagonal on), so the threads can share any P evenly.
fn units(tiles: usize, threads: usize) -> Vec<Unit> {
    let pairs = tiles * (tiles + 1) / 2;
    let parts = (4 * threads).div_ceil(pairs).clamp(1, E / 4);
    let mut units = Vec::with_capacity(pairs * parts);
    for ti in 0..tiles {
        for tj in ti..tiles {
            // Work of rows 0..r: r rows of 64, less the entries below the diagonal.
            let work = |r: usize| if ti == tj { r * E - r * r / 2 } else { r * E };
            let mut start = 0;
            for part in 1..=parts {
                let mut end = start;
                while end < E && work(end) * parts < work(E) * part {
                    end += 4;
                }
                if part == parts {
                    end = E;
                }
                if end > start {
                    units.push(Unit { ti, tj, rows: start..end });
                    start = end;
                }
            }
        }
    }
    units
}

/// Every tile of the upper triangle of `tiles` × `tiles` tiles of the slice `src` into
/// `out`, one E × E tile after another, row-major, tile rows (ti, ti..tiles) in order.
/// `level` is one `Level::at_most_detected` returned.
pub(super) fn run_triangle<T: Elem, const F: bool>(
    level: Level,
    src: &Rows<T>,
    tiles: usize,
    out: &mut [T],
) {
    let n = src.len();
    if n == 0 {
        out.fill(T::ZERO);
        return;
    }
    let units = units(tiles, rayon::current_num_threads());
    // Each unit's rows of its tile: disjoint runs of `out`, in the units' order.
    let mut pieces: Vec<&mut [T]> = Vec::with_capacity(units.len());
    let mut rest = out;
    for unit in &units {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(unit.rows.len() * E);
        pieces.push(head);
        rest = tail;
    }
    let bytes = std::mem::size_of::<T>();
    let sweep = (SWEEP_BYTES / (2 * tiles * E * bytes) / KC * KC).max(KC);
    let panel = sweep * E;
    let mut lhs = vec![T::ZERO; tiles * panel];
    let mut rhs = vec![T::ZERO; tiles * panel];
    let parallel = sweep.min(n) * E * E * tiles * (tiles + 1) / 2 >= MIN_PARALLEL_MACS;
    for s0 in (0..n).step_by(sweep) {
        let rows = s0..(s0 + sweep).min(n);
        let kc = rows.len();
        let pack = |(s, (l, r)): (usize, (&mut [T], &mut [T]))| {
            pack_rows::<T, E>(src, rows.clone(), s * E, true, &mut l[..kc * E]);
            pack_rows::<T, E>(src, rows.clone(), s * E, false, &mut r[..kc * E]);
        };
        let strips = lhs.chunks_mut(panel).zip(rhs.chunks_mut(panel)).enumerate();
        match parallel {
            true => strips.collect::<Vec<_>>().into_par_iter().for_each(pack),
            false => strips.for_each(pack),
        }
        let (lhs, rhs) = (&lhs, &rhs);
        let work = |(unit, tile): (&Unit, &mut &mut [T])| {
            let (l, r) = (&lhs[unit.ti * panel..], &rhs[unit.tj * panel..]);
            for k0 in (0..kc).step_by(KC) {
                let k = k0..(k0 + KC).min(kc);
                let (l, r) = (&l[k.start * E..k.end * E], &r[k.start * E..k.end * E]);
                let at = (s0 + k0 == 0, unit.ti == unit.tj);
                micro::<T, F>(level, at, unit.rows.clone(), (l, r), tile);
            }
        };
        match parallel {
            true => units.par_iter().zip(pieces.par_iter_mut()).for_each(work),
            false => units.iter().zip(pieces.iter_mut()).for_each(work),
        }
    }
    for (unit, piece) in units.iter().zip(pieces) {
        if unit.ti == unit.tj {
            zero_below_diagonal(unit.rows.clone(), piece);
        }
    }
}

/// Entries (r, c) with c < r of rows `rows` of a diagonal tile (`piece`: those rows,
/// row-major) to 0.
fn zero_below_diagonal<T: Real>(rows: Range<usize>, piece: &mut [T]) {
    for (r, row) in rows.zip(piece.chunks_exact_mut(E)) {
        row[..r].fill(T::ZERO);
    }
}

/// `tile[r][c] = fma(lhs[k][r], rhs[k][c], tile[r][c])` for k in order and r in `rows` (the
/// rows `tile` holds), at `level`; on the `first` block the chains start from 0 instead
/// (what the tile holds is not read); on a `diag`onal tile entries below the diagonal may
/// be left as they are.
fn micro<T: Elem, const F: bool>(
    level: Level,
    (first, diag): (bool, bool),
    rows: Range<usize>,
    (lhs, rhs): (&[T], &[T]),
    tile: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if super::syrk_simd::run_tile::<T, F>(level, (first, diag), rows.clone(), (lhs, rhs), tile)
    {
        return;
    }
    let _ = diag;
    let _ = level;
    if first {
        tile.fill(T::ZERO);
    }
    scalar::<T, F>(rows, lhs, rhs, tile);
}

/// The portable micro-kernel, and the definition the vector ones reproduce: rows `rows` of
/// the tile (held by `tile`, row-major).
pub(super) fn scalar<T: Real, const F: bool>(
    rows: Range<usize>,
    lhs: &[T],
    rhs: &[T],
    tile: &mut [T],
) {
    for (x, y) in lhs.chunks_exact(E).zip(rhs.chunks_exact(E)) {
        for (&xv, row) in x[rows.clone()].iter().zip(tile.chunks_exact_mut(E)) {
            for (acc, &yv) in row.iter_mut().zip(y) {
                *acc = T::madd::<F>(xv, yv, *acc);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_cover_every_row_of_every_tile_once() {
        for (tiles, threads) in [(1, 1), (1, 2), (1, 8), (4, 2), (5, 3), (64, 2)] {
            let units = units(tiles, threads);
            let mut at = 0;
            for ti in 0..tiles {
                for tj in ti..tiles {
                    let mut next = 0;
                    while at < units.len() && (units[at].ti, units[at].tj) == (ti, tj) {
                        assert_eq!(units[at].rows.start, next, "{tiles} tiles, ({ti}, {tj})");
                        assert!(units[at].rows.end > next && units[at].rows.end % 4 == 0);
                        next = units[at].rows.end;
                        at += 1;
                    }
                    assert_eq!(next, E, "{tiles} tiles, ({ti}, {tj})");
                }
            }
            assert_eq!(at, units.len());
        }
        // One diagonal tile on two threads: eight runs, the first narrower than the last.
        let one = units(1, 2);
        assert_eq!(one.len(), 8);
        assert!(one[0].rows.len() < one[7].rows.len());
    }
}
