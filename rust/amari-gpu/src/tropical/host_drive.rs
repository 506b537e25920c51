//! The host max-plus driver: how one product of rows (a chunk of the engine, a product of
//! the shortest paths) is cut for the threads. `b` is packed once per call into strips of
//! the tile's columns (`host_pack`); the rows of `a` are packed once into panels of the
//! tile's rows, shared by every thread; then the work is a grid of units, one strip of
//! columns of one group of panels each, that the threads take as they come. A unit walks
//! its strip over its panels one k block at a time, so a strip's block stays in L1 while
//! the group's panels come from L2, and each output is still one walk over k in order.
//!
//! Splitting the columns rather than the rows lets both threads share one packing of `a`
//! and read each strip of `b` once per group (a split of the rows had every task stream all
//! of `b` for its few rows), and gives the threads many small, equal units: a thread that
//! starts late (a busy machine) takes fewer of them instead of leaving the other waiting.

use std::marker::PhantomData;
use std::sync::Arc;

use rayon::prelude::*;

use super::host_kernel::{Kernel, Lanes};
use super::host_pack::{pack_a, pack_b, pack_splits, store_row, PackCache};
use super::semiring::Semiring;
use crate::host::simd::Level;

/// The operands of a product of rows: `a` (rows × k), `b` (k × cols) and `c` (rows × cols,
/// combined with the product when given).
#[derive(Clone, Copy)]
pub(super) struct RowOperands<'a, T> {
    /// Rows × k.
    pub a: &'a [T],
    /// K × cols.
    pub b: &'a [T],
    /// Rows × cols, combined with the product when given.
    pub c: Option<&'a [T]>,
    pub k: usize,
    pub cols: usize,
}

/// Inner indices of one k block: a strip's block (128 × 32 float32 or 128 × 16 float64
/// values, 16 KiB) stays in L1.
const K_BLOCK: usize = 128;

/// Bytes of the panels of one group: the group stays in L2 (1 MiB here) beside the strip
/// that meets it.
const GROUP_PANEL_BYTES: usize = 384 << 10;

/// Units each thread gets at least, when the product has that many: enough that a thread
/// starting late costs a fraction of a unit, not half of the product.
const UNITS_PER_THREAD: usize = 8;

/// Pairs (rows × k × cols) below which a product runs on the calling thread alone.
const SPLIT_PAIRS: usize = 1 << 15;

/// How a product of `rows` rows and `strips` strips is cut: `panels` panels of the tile's
/// rows in groups of `group` panels (the last group may be shorter), each group by each
/// strip one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Grid {
    /// Panels of `a` (the last may be shorter than the tile).
    pub panels: usize,
    /// Panels per group.
    pub group: usize,
    /// Groups of panels.
    pub groups: usize,
    /// Strips of `b`.
    pub strips: usize,
}

impl Grid {
    /// The grid of a product of `rows` rows (inner size `k`) and `cols` columns on
    /// `threads` threads: groups small enough for L2 and, on several threads, numerous
    /// enough for [`UNITS_PER_THREAD`] units a thread where the product has that many panels.
    pub fn new<T: Lanes>(
        kernel: &Kernel<T>,
        rows: usize,
        k: usize,
        cols: usize,
        threads: usize,
    ) -> Grid {
        let panels = rows.div_ceil(kernel.mr).max(1);
        let strips = cols.div_ceil(kernel.nr).max(1);
        let panel_bytes = kernel.mr * k.max(1) * std::mem::size_of::<T>();
        let by_cache = panels.div_ceil((GROUP_PANEL_BYTES / panel_bytes).max(1));
        let by_threads = match threads {
            0 | 1 => 1,
            t => (UNITS_PER_THREAD * t).div_ceil(strips),
        };
        // Groups of (nearly) equal size: as many as the larger need asks for.
        let group = panels.div_ceil(by_cache.max(by_threads)).max(1);
        Grid {
            panels,
            group,
            groups: panels.div_ceil(group),
            strips,
        }
    }

    /// Units of the grid.
    pub fn units(&self) -> usize {
        self.groups * self.strips
    }
}

/// The threads a product of `pairs` pairs runs on: one below [`SPLIT_PAIRS`] (waking a
/// second thread costs more than its pairs), else the current pool's.
fn threads_for(pairs: usize) -> usize {
    if pairs < SPLIT_PAIRS {
        1
    } else {
        rayon::current_num_threads().max(1)
    }
}

/// Whether a product of `rows` rows by a `k` × `cols` `b` may share its work among the
/// pool's threads: its own loops past [`SPLIT_PAIRS`] pairs, or the packing of `b`.
pub(super) fn splits(rows: usize, k: usize, cols: usize) -> bool {
    rows.saturating_mul(k).saturating_mul(cols) >= SPLIT_PAIRS || pack_splits(k, cols)
}

/// The product of rows with the micro-kernel of `level` (which the CPU must have), `b`
/// packed once in `cache` when given: see the module.
pub(super) fn product_rows_at<T: Lanes>(
    level: Level,
    semiring: Semiring,
    operands: &RowOperands<'_, T>,
    cache: Option<&PackCache<T>>,
    out: &mut [T],
) {
    let RowOperands { a, b, c, k, cols } = *operands;
    if cols == 0 || out.is_empty() {
        return;
    }
    let kernel = Kernel::<T>::at(level);
    let (mr, nr) = (kernel.mr, kernel.nr);
    let min = semiring == Semiring::MinPlus;
    let pack = || pack_b(b, k, cols, nr, min);
    let strips = match cache {
        Some(cache) => cache.get(b, pack),
        None => Arc::new(pack()),
    };
    let rows = out.len() / cols;
    let threads = threads_for(rows * k * cols);
    let grid = Grid::new(&kernel, rows, k, cols, threads);
    // Below the split, every parallel loop runs whole on the calling thread.
    let least = if threads == 1 { usize::MAX } else { 1 };
    // Panel p starts at row p·mr and word p·mr·k; the last may be shorter.
    let mut packed = vec![T::ZERO; grid.panels * mr * k];
    packed
        .par_chunks_mut((mr * k).max(1))
        .with_min_len(least)
        .enumerate()
        .for_each(|(p, panel)| {
            let (first, last) = (p * mr, ((p + 1) * mr).min(rows));
            let height = kernel.height(last - first);
            pack_a(&a[first * k..last * k], k, height, min, &mut panel[..height * k]);
        });
    let shared = SharedOut::new(out);
    let packed = &packed;
    (0..grid.units())
        .into_par_iter()
        .with_min_len(least)
        .for_each_init(Vec::new, |acc, unit| {
            let (g, s) = (unit / grid.strips, unit % grid.strips);
            let panels = g * grid.group..((g + 1) * grid.group).min(grid.panels);
            let strip = &strips[s * k * nr..(s + 1) * k * nr];
            acc.clear();
            acc.resize(panels.len() * mr * nr, T::NEG_INFINITY);
            for k0 in (0..k).step_by(K_BLOCK) {
                let k1 = (k0 + K_BLOCK).min(k);
                let block = &strip[k0 * nr..k1 * nr];
                for (i, p) in panels.clone().enumerate() {
                    let height = kernel.height(rows.min((p + 1) * mr) - p * mr);
                    let panel = &packed[p * mr * k..][..height * k];
                    let tile = &mut acc[i * mr * nr..][..height * nr];
                    kernel.tile(height, &panel[k0 * height..k1 * height], block, tile);
                }
            }
            let col = s * nr;
            let width = nr.min(cols - col);
            for (i, p) in panels.enumerate() {
                for r in p * mr..rows.min((p + 1) * mr) {
                    let at = r * cols + col;
                    let tile_row = &acc[(i * mr + r - p * mr) * nr..][..width];
                    // SAFETY: the words lie inside `out` (`start` checks it), and unit
                    // (g, s) writes only columns col..col + width of the rows of its
                    // group's panels: no other unit writes them (each (row, strip) pair
                    // belongs to one unit) and nothing reads `out` during this loop.
                    #[allow(unsafe_code)]
                    let dst = unsafe { std::slice::from_raw_parts_mut(shared.start(at, width), width) };
                    store_row(tile_row, c.map(|c| &c[at..at + width]), min, dst);
                }
            }
        });
}

/// An output that units write at once, each its own disjoint ranges of words.
struct SharedOut<'a, T> {
    ptr: *mut T,
    len: usize,
    borrowed: PhantomData<&'a mut [T]>,
}

// SAFETY: the pointer comes from a `&mut [T]` held for the wrapper's life, and its one
// user writes disjoint ranges from the threads, as sending `&mut` sub-slices would.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for SharedOut<'_, T> {}
// SAFETY: as above; shared access only yields addresses, written in disjoint ranges.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for SharedOut<'_, T> {}

impl<'a, T> SharedOut<'a, T> {
    fn new(out: &'a mut [T]) -> SharedOut<'a, T> {
        SharedOut {
            ptr: out.as_mut_ptr(),
            len: out.len(),
            borrowed: PhantomData,
        }
    }

    /// The first of words `at..at + len` of the output, which lie inside it.
    fn start(&self, at: usize, len: usize) -> *mut T {
        let end = at.checked_add(len).filter(|&end| end <= self.len);
        assert!(end.is_some(), "a unit's output range lies inside the output");
        self.ptr.wrapping_add(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_many_equal_units_over_groups_that_stay_in_l2() {
        let avx512 = Kernel::<f32>::at(Level::Avx512);
        // The engine's 128-row chunk of a 1024² product on 2 threads: 11 panels (10 of 12
        // rows, one of 8) in two groups by 32 strips, 32 units a thread.
        let grid = Grid::new(&avx512, 128, 1024, 1024, 2);
        assert_eq!(
            grid,
            Grid {
                panels: 11,
                group: 6,
                groups: 2,
                strips: 32
            }
        );
        // Few strips (a shortest-path panel's product by its 32 × 32 block): the rows are
        // cut into more groups so each thread still gets several units.
        let narrow = Grid::new(&avx512, 512, 32, 32, 2);
        assert_eq!((narrow.strips, narrow.group, narrow.units()), (1, 3, 15));
        // A group's panels fit the L2 budget whatever the rows.
        let deep = Grid::new(&avx512, 4096, 8192, 64, 2);
        assert!(deep.group * 12 * 8192 * 4 <= GROUP_PANEL_BYTES, "{deep:?}");
        // One thread: one group.
        assert_eq!(Grid::new(&avx512, 128, 64, 64, 1).groups, 1);
        for level in Level::available() {
            let kernel = Kernel::<f64>::at(level);
            let grid = Grid::new(&kernel, 64, 100, 50, 2);
            assert!(grid.units() >= grid.strips && grid.group * grid.groups >= grid.panels);
        }
    }
}
