//! The 64 × 64 tiles of the host SYRK (`fisher_tiled`'s twin, and the float64
//! `fisher_triangle`'s in tiles): every tile of the upper triangle of one slice, in float32
//! or float64. The slice's rows are taken a sweep at a time: the sweep's left (weighted)
//! and right strips of every column tile are packed once, by all threads, each strip's
//! rows in pieces so that every thread has a share (scores exactly one strip wide are
//! their own right panel, read in place; a sweep whose weights are all 1 has its left
//! strips for right ones, `s · 1` being `s`), and then every tile is computed from them.
//! The tiles are cut into runs of rows, and the runs into one
//! share of equal work per thread, so that the threads are busy to the end (a diagonal
//! tile's rows are uneven, and P ≤ 64 has one tile); each thread takes [`KC`] rows of the
//! sweep at a time through all of its runs, its strips of those rows reused from L1/L2.
//! The rows are thus read from memory once per call and packed once, whatever the number
//! of tiles. The micro-kernel continues every entry's chain from the value the tile holds,
//! so the block and sweep boundaries leave no trace in the bits.
//! The first tile of a row of tiles is on the diagonal: its entries below the diagonal
//! (column < row) are mirrored ones the reduction never reads, so the vector kernels skip
//! what they can of them and every level writes them as 0, as `fisher_tiled` does.

use std::ops::Range;

use rayon::prelude::*;

use super::shape::TILE;
use super::syrk_pack::{pack_rows, with_scratch, One, Panels, Rows, PANELS};
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
/// Rows of a sweep at most: narrow scores' panels stay within one core's L2 (packing more
/// rows at once only writes them out to L3 and reads them back).
const SWEEP_ROWS: usize = 512;

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

impl Unit {
    /// Entries of the unit's rows the micro-kernel computes (on a diagonal tile, row r
    /// holds the 64 − r entries from the diagonal on).
    fn work(&self) -> usize {
        let upto = |r: usize| match self.ti == self.tj {
            true => r * E - r * (r.max(1) - 1) / 2,
            false => r * E,
        };
        upto(self.rows.end) - upto(self.rows.start)
    }
}

/// Every tile (ti, tj), tj ≥ ti, of `tiles` tiles a side, cut into runs of rows (about
/// `8 × threads` runs in all, at most 16 a tile), then into `threads` groups of
/// consecutive runs of near-equal work: each thread's share of the triangle, however
/// uneven its tiles (a diagonal tile's rows are; P ≤ 64 has one tile).
fn groups(tiles: usize, threads: usize) -> Vec<Vec<Unit>> {
    let pairs = tiles * (tiles + 1) / 2;
    let parts = (8 * threads).div_ceil(pairs).clamp(1, E / 4);
    let rows = (E / 4).div_ceil(parts) * 4;
    let mut units = Vec::with_capacity(pairs * parts);
    for ti in 0..tiles {
        for tj in ti..tiles {
            for r0 in (0..E).step_by(rows) {
                units.push(Unit { ti, tj, rows: r0..(r0 + rows).min(E) });
            }
        }
    }
    let total: usize = units.iter().map(Unit::work).sum();
    let threads = threads.clamp(1, units.len());
    let mut groups: Vec<Vec<Unit>> = vec![Vec::new()];
    let mut done = 0;
    for unit in units {
        // Close the group once it holds its share (the last one takes the rest).
        if done * threads >= total * groups.len() && groups.len() < threads {
            groups.push(Vec::new());
        }
        done += unit.work();
        if let Some(group) = groups.last_mut() {
            group.push(unit);
        }
    }
    groups
}

/// Rows of a sweep over `tiles` column tiles of `T`.
fn sweep_rows<T>(tiles: usize) -> usize {
    let bytes = std::mem::size_of::<T>();
    (SWEEP_BYTES / (2 * tiles.max(1) * E * bytes) / KC * KC).clamp(KC, SWEEP_ROWS)
}

/// Whether [`run_triangle`] over a slice of `rows` rows shares its sweeps among the pool's
/// threads.
pub(super) fn splits<T>(rows: usize, tiles: usize) -> bool {
    let macs = sweep_rows::<T>(tiles).min(rows) * E * E * tiles * (tiles + 1) / 2;
    macs >= MIN_PARALLEL_MACS
}

/// Every tile of the upper triangle of `tiles` × `tiles` tiles of the slice `src` into
/// `out`, one E × E tile after another, row-major, tile rows (ti, ti..tiles) in order.
/// `level` is one `Level::at_most_detected` returned.
pub(super) fn run_triangle<T: Elem + One + bytemuck::Pod, const F: bool>(
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
    let sweep = sweep_rows::<T>(tiles);
    let parallel = splits::<T>(n, tiles);
    let threads = if parallel { rayon::current_num_threads() } else { 1 };
    // Each thread's runs with their rows of `out` (disjoint, in the units' order).
    let mut rest = out;
    let mut shares: Vec<Vec<(Unit, &mut [T])>> = groups(tiles, threads)
        .into_iter()
        .map(|group| {
            let with = |unit: Unit| {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(unit.rows.len() * E);
                rest = tail;
                (unit, head)
            };
            group.into_iter().map(with).collect()
        })
        .collect();
    // Scores exactly one strip wide are their own right panel (the rows contiguous, E
    // apart): they are read straight from the scores, not packed. Wider scores are packed:
    // read in place, a strip's rows `width` apart alias in L1 (at W = 256 in float64 a
    // 2 KiB stride puts a block's 64 rows on a quarter of the sets), measured slower than
    // packing them. The panels are allocated once a call and every row of them written
    // before it is read, so nothing needs zeroing (this thread's scratch, see
    // `syrk_pack::with_scratch`).
    let whole = usize::from(src.width == E && tiles == 1);
    let panel = sweep * E;
    let len = (2 * tiles - whole) * panel;
    with_scratch(&PANELS, len, |panels: &mut [T]| {
        let (lhs, rhs) = panels.split_at_mut(tiles * panel);
        sweeps::<T, F>(level, src, (tiles, whole, sweep, threads, parallel), (lhs, rhs), &mut shares);
    });
    for (unit, piece) in shares.into_iter().flatten() {
        if unit.ti == unit.tj {
            zero_below_diagonal(unit.rows.clone(), piece);
        }
    }
}

/// The sweeps of [`run_triangle`]: each sweep's rows packed into `lhs`/`rhs` by every thread,
/// then every thread's `shares` of the tiles continued over them.
#[allow(clippy::type_complexity)]
fn sweeps<T: Elem + One, const F: bool>(
    level: Level,
    src: &Rows<T>,
    (tiles, whole, sweep, threads, parallel): (usize, usize, usize, usize, bool),
    (lhs, rhs): (&mut [T], &mut [T]),
    shares: &mut [Vec<(Unit, &mut [T])>],
) {
    let (n, width, panel) = (src.len(), src.width, sweep * E);
    // Each strip's rows packed in `parts` pieces, a few per thread, so that a few wide
    // strips (or P <= 64's one) still give every thread a share, and a thread slowed by
    // another process's does not hold the others at the sweep's end.
    let parts = (4 * threads).div_ceil(tiles);
    for s0 in (0..n).step_by(sweep) {
        let rows = s0..(s0 + sweep).min(n);
        let kc = rows.len();
        let piece = kc.div_ceil(parts);
        // Rows of weight 1 (every row of an unweighted call) are their own left rows:
        // `s · 1` is `s` exactly, so the left panel serves as the right one too, and only
        // it is packed (half the packing's writes).
        // Scores one strip wide are then both panels as they are: nothing is packed.
        let same = src.weights[rows.clone()].iter().all(|&w| w == T::ONE);
        let in_place = same && whole == 1;
        let mut rights = rhs.chunks_mut(panel);
        let mut pieces = Vec::with_capacity(tiles * parts);
        for (s, l) in lhs.chunks_mut(panel).enumerate().filter(|_| !in_place) {
            let mut r = match s >= whole && !same {
                true => rights.next().map(|r| r[..kc * E].chunks_mut(piece * E)),
                false => None,
            };
            for (p, l) in l[..kc * E].chunks_mut(piece * E).enumerate() {
                let at = s0 + p * piece;
                let right = r.as_mut().and_then(Iterator::next);
                pieces.push((s, at..at + l.len() / E, l, right));
            }
        }
        let pack = |(s, rows, l, r): (usize, Range<usize>, &mut [T], Option<&mut [T]>)| {
            pack_rows::<T, E>(src, rows, s * E, (l, r));
        };
        match parallel {
            true => pieces.into_par_iter().for_each(pack),
            false => pieces.into_iter().for_each(pack),
        }
        let (lhs, rhs) = (&*lhs, &*rhs);
        // A block of KC rows at a time through all of a thread's runs: its strips of the
        // block are read once and reused from L1/L2 by every run.
        let work = |share: &mut Vec<(Unit, &mut [T])>| {
            for k0 in (0..kc).step_by(KC) {
                let k = k0..(k0 + KC).min(kc);
                for (unit, tile) in share.iter_mut() {
                    let l = match in_place {
                        true => &src.scores[(s0 + k.start) * E..(s0 + k.end) * E],
                        false => &lhs[unit.ti * panel..][k.start * E..k.end * E],
                    };
                    let r = match (unit.tj < whole, same) {
                        (true, _) => {
                            let first = (s0 + k.start) * width + unit.tj * E;
                            (&src.scores[first..first + (k.len() - 1) * width + E], width)
                        }
                        (false, true) => (&lhs[unit.tj * panel..][k.start * E..k.end * E], E),
                        (false, false) => {
                            (&rhs[(unit.tj - whole) * panel..][k.start * E..k.end * E], E)
                        }
                    };
                    let at = (s0 + k0 == 0, unit.ti == unit.tj);
                    micro::<T, F>(level, at, unit.rows.clone(), (l, r), tile);
                }
            }
        };
        match parallel {
            true => shares.par_iter_mut().for_each(work),
            false => shares.iter_mut().for_each(work),
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
    panels: Panels<T>,
    tile: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if super::syrk_simd::run_tile::<T, F>(level, (first, diag), rows.clone(), panels, tile)
    {
        return;
    }
    let _ = diag;
    let _ = level;
    if first {
        tile.fill(T::ZERO);
    }
    scalar::<T, F>(rows, panels, tile);
}

/// The portable micro-kernel, and the definition the vector ones reproduce: rows `rows` of
/// the tile (held by `tile`, row-major).
pub(super) fn scalar<T: Real, const F: bool>(
    rows: Range<usize>,
    (lhs, (rhs, stride)): Panels<T>,
    tile: &mut [T],
) {
    for (k, x) in lhs.chunks_exact(E).enumerate() {
        let y = &rhs[k * stride..][..E];
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
    fn groups_cover_every_row_of_every_tile_once_in_shares_of_equal_work() {
        for (tiles, threads) in [(1, 1), (1, 2), (1, 3), (4, 2), (5, 3), (64, 2)] {
            let groups = groups(tiles, threads);
            assert_eq!(groups.len(), threads, "{tiles} tiles");
            let units: Vec<&Unit> = groups.iter().flatten().collect();
            let mut at = 0;
            for ti in 0..tiles {
                for tj in ti..tiles {
                    let mut next = 0;
                    while at < units.len() && (units[at].ti, units[at].tj) == (ti, tj) {
                        assert_eq!(units[at].rows.start, next, "{tiles} tiles, ({ti}, {tj})");
                        assert!(units[at].rows.end > next && units[at].rows.end.is_multiple_of(4));
                        next = units[at].rows.end;
                        at += 1;
                    }
                    assert_eq!(next, E, "{tiles} tiles, ({ti}, {tj})");
                }
            }
            assert_eq!(at, units.len());
            // Every thread's share within 25% of an even one.
            let work: Vec<usize> = groups.iter().map(|g| g.iter().map(Unit::work).sum()).collect();
            let total: usize = work.iter().sum();
            for w in &work {
                assert!(4 * w * threads <= 5 * total, "{tiles} tiles: {work:?}");
            }
        }
        // One diagonal tile (P <= 64) on two threads: both get rows, the first fewer.
        let one = groups(1, 2);
        let rows = |g: &Vec<Unit>| g.iter().map(|u| u.rows.len()).sum::<usize>();
        assert!(rows(&one[0]) < rows(&one[1]));
    }
}
