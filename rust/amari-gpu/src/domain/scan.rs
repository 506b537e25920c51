//! The one read of a heat grid's cells that its checks need: the bits of the largest |u|,
//! which say both whether every cell is finite and how far the grid must be scaled down
//! (`domain::check_heat`). Either a pass of its own before the run, or, where the result is
//! a new array, folded into the run ([`GridScan`]): a host pass reading the caller's grid
//! in place scans each row as it first reads it (the row is then in the core's cache for
//! the step that reads it next), and whatever rows no host pass read (those of wgpu bands)
//! are scanned after the run, before anything is returned.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

use super::host_grid::HeatCell;
use crate::host::simd::{dispatch, Task};
use crate::host::HostPool;

/// The bits of the largest |u| of `grid`, in one pass that vectorises: the bits of
/// non-negative floats order as their values, and those of inf and NaN above every finite
/// one, so the finiteness check and the scaling read the grid once.
#[inline(always)]
pub(super) fn top_bits<T: HeatCell>(grid: &[T]) -> T::Bits {
    grid.iter()
        .fold(T::Bits::default(), |m, v| m.max(v.abs_bits()))
}

/// [`top_bits`] compiled for the CPU's widest vectors: x86-64's baseline (SSE2) has no
/// unsigned 32- or 64-bit max, and emulating it made the check a fifth of a float64 heat
/// call's samples.
struct Top<'a, T>(&'a [T]);

impl<T: HeatCell> Task for Top<'_, T> {
    type Output = T::Bits;
    #[inline(always)]
    fn run(self) -> T::Bits {
        top_bits(self.0)
    }
}

/// [`top_bits`] in pieces on `pool`'s threads where there is one (the pass is a read of the
/// whole grid, otherwise serial before any band starts).
pub(super) fn top_bits_on<T: HeatCell>(pool: Option<&HostPool>, grid: &[T]) -> T::Bits {
    // 256 KiB per piece: the pool's cost per task stays small beside it.
    let piece = (256 << 10) / size_of::<T>();
    match pool {
        Some(pool) if pool.threads() > 1 && grid.len() > piece => pool.run_with(|| {
            grid.par_chunks(piece)
                .map(|piece| dispatch(Top(piece)))
                .max()
                .unwrap_or_default()
        }),
        _ => dispatch(Top(grid)),
    }
}

/// The largest |u| of a grid's rows as a run reads them: each row scanned once, the first
/// time a host pass reads it where the caller's grid holds it ([`see`](Self::see)); the
/// rows no pass saw scanned at the end ([`finish`](Self::finish)).
pub(crate) struct GridScan {
    /// Where the grid's cells start, as an address: a row read is placed by its own.
    start: usize,
    /// Bytes per row (the grid's rows have no padding) and rows.
    row_bytes: usize,
    rows: usize,
    /// A flag per row: scanned. A byte each, not a bit: the threads of a pass scan rows of
    /// their own chunks, and their flags then lie on lines of their own (bits of 64 rows
    /// to a word put both threads' rows on one line of 16 words).
    seen: Vec<AtomicBool>,
    /// The largest bits of |u| over the rows scanned, as 64 bits.
    top: AtomicU64,
}

impl GridScan {
    /// A scan of `grid`'s rows of `width` cells, none scanned yet.
    pub(super) fn new<T: HeatCell>(grid: &[T], width: usize) -> GridScan {
        let rows = grid.len() / width.max(1);
        GridScan {
            start: grid.as_ptr() as usize,
            row_bytes: width * size_of::<T>(),
            rows,
            seen: (0..rows).map(|_| AtomicBool::new(false)).collect(),
            top: AtomicU64::new(0),
        }
    }

    /// `row`, read by a pass: scanned if it is one of the grid's rows, whole, not yet
    /// scanned (two threads reading it at once may both scan it; the largest is the same).
    /// Any other slice is left to [`finish`](Self::finish).
    #[inline]
    pub(super) fn see<T: HeatCell>(&self, row: &[T]) {
        let at = (row.as_ptr() as usize).wrapping_sub(self.start);
        if std::mem::size_of_val(row) != self.row_bytes || !at.is_multiple_of(self.row_bytes) {
            return;
        }
        let r = at / self.row_bytes;
        if r >= self.rows {
            return;
        }
        if self.seen[r].load(Ordering::Relaxed) {
            return;
        }
        let top: u64 = dispatch(Top(row)).into();
        // Written only when larger (rarely after the first rows): a write each row from both
        // threads would move the line between their cores every time.
        if top > self.top.load(Ordering::Relaxed) {
            self.top.fetch_max(top, Ordering::Relaxed);
        }
        self.seen[r].store(true, Ordering::Relaxed);
    }

    /// The bits of `grid`'s largest |u| (`grid` is the grid the scan was made for): the
    /// rows no pass scanned are scanned now, on `pool`'s threads where there is one.
    pub(super) fn finish<T: HeatCell>(&self, pool: Option<&HostPool>, grid: &[T]) -> T::Bits {
        let cells = self.row_bytes / size_of::<T>();
        let unseen = self.unseen();
        let row = |r: usize| &grid[r * cells..(r + 1) * cells];
        let rest = match pool {
            Some(pool) if pool.threads() > 1 && unseen.len() > 1 => pool.run_with(|| {
                unseen
                    .par_iter()
                    .map(|&r| dispatch(Top(row(r))))
                    .max()
                    .unwrap_or_default()
            }),
            _ => unseen
                .iter()
                .map(|&r| dispatch(Top(row(r))))
                .max()
                .unwrap_or_default(),
        };
        // The pass's threads were joined before this (the pool's scope): their stores are
        // seen here.
        let seen = T::Bits::try_from(self.top.load(Ordering::Relaxed)).unwrap_or_default();
        rest.max(seen)
    }

    /// The rows no pass has scanned yet.
    pub(super) fn unseen(&self) -> Vec<usize> {
        (0..self.rows)
            .filter(|&r| !self.seen[r].load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass finds both the largest |u| and whether any cell is not finite: the bits of
    /// |u| order as the values, inf and NaN of either sign above every finite one.
    #[test]
    fn the_top_bits_of_a_grid_order_as_its_magnitudes() {
        assert_eq!(top_bits::<f32>(&[]), 0);
        assert_eq!(top_bits(&[-0.0f32, 0.0]), 0);
        assert_eq!(f32::from_bits(top_bits(&[1.0f32, -3.5, 2.0])), 3.5);
        assert_eq!(f32::from_bits(top_bits(&[-f32::MAX, 1.0])), f32::MAX);
        assert_eq!(f64::from_bits(top_bits(&[1.0f64, -3.5, 2.0])), 3.5);
        assert!(top_bits(&[-f64::NAN, 1.0]) >= f64::INFINITY.to_bits());
        let finite = f32::INFINITY.to_bits();
        assert!(top_bits(&[1.0, f32::NEG_INFINITY]) >= finite);
        assert!(top_bits(&[-f32::NAN, 1.0]) >= finite);
        assert!(top_bits(&[f32::MAX, f32::MIN_POSITIVE]) < finite);
    }

    /// Rows seen by a pass are scanned then and not again; other slices (part of a row, a
    /// row of another array, a row-sized slice off the row starts) are ignored; the rows
    /// never seen are scanned at the end, so every cell counts exactly as a full pass would.
    #[test]
    fn a_grid_scan_counts_every_row_once_whoever_read_it() {
        let (h, w) = (70, 5);
        let mut grid: Vec<f32> = (0..h * w).map(|i| (i % 7) as f32).collect();
        grid[68 * w + 3] = -9.5;
        grid[2 * w + 1] = f32::NAN;
        let want = top_bits(&grid);
        for seen in [vec![], vec![0, 1, 2, 68], (0..h).collect::<Vec<_>>()] {
            let scan = GridScan::new(&grid, w);
            for &r in &seen {
                scan.see(&grid[r * w..(r + 1) * w]);
                scan.see(&grid[r * w..(r + 1) * w]);
            }
            let other = vec![1e30f32; w];
            scan.see(&other);
            scan.see(&grid[1..1 + w]);
            scan.see(&grid[..w - 1]);
            let unseen: Vec<usize> = (0..h).filter(|r| !seen.contains(r)).collect();
            assert_eq!(scan.unseen(), unseen, "{seen:?}");
            assert_eq!(scan.finish(None, &grid), want, "{seen:?}");
        }
        // The NaN's row not seen by a pass still makes the top non-finite.
        let scan = GridScan::new(&grid, w);
        scan.see(&grid[68 * w..69 * w]);
        assert_eq!(f32::from_bits(scan.top.load(Ordering::Relaxed) as u32), 9.5);
        assert!(scan.finish(None, &grid) >= f32::INFINITY.to_bits());
    }
}
