//! Packing for the host SYRK's 64 × 64 tiles (`fisher::syrk_tile`): a block of a slice's
//! rows copied into a small contiguous panel the micro-kernels stream from L1/L2, instead of
//! striding through the whole chunk once per output tile; and the rows as the 8 × 8 blocks
//! read them (`fisher::syrk_block`). The left panel is the rows times their weights
//! (rounded to the element type, as the shaders compute `s · w`); columns past the padded
//! width are 0. Float32 and float64 rows alike.

use std::cell::Cell;
use std::ops::Range;
use std::thread::LocalKey;

use super::shape::BLOCK;
use crate::host::arith::Real;

thread_local! {
    /// Each thread's packed panels (`fisher::syrk_tile`), kept from chunk to chunk.
    pub(super) static PANELS: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
    /// Each thread's tiles of a float64 chunk (`fisher::syrk64`), kept likewise.
    pub(super) static TILES: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
    /// Each thread's 8 × 8 blocks of the 64 shader threads of a slice (`fisher::syrk_block`).
    pub(super) static BLOCKS: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
}

/// `f` given `len` values of `T` from this thread's scratch `slot` (what an earlier chunk
/// left in them: the caller writes before it reads), grown when too short and kept for the
/// next chunk. Fresh per chunk, the panels and tiles (megabytes a chunk, 64 chunks a call)
/// came from the allocator zeroed on one thread or faulted in again after the heap was
/// trimmed: a sixth of a 65,536 x 256 float64 Fisher call's CPU. A nested call with the
/// same slot (none today) would get a buffer of its own.
pub(super) fn with_scratch<T: bytemuck::Pod, R>(
    slot: &'static LocalKey<Cell<Vec<u64>>>,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    let mut words = slot.take();
    let need = (len * std::mem::size_of::<T>()).div_ceil(8);
    // The values start on a cache line: the micro-kernels' 64-byte loads of panel rows
    // (and of float64 tiles) then never straddle two lines, which costs a second load.
    let slack = LINE / 8 - 1;
    if words.len() < need + slack {
        words.resize(need + slack, 0);
    }
    let skip = words.as_ptr().align_offset(LINE).min(slack);
    let values = &mut words[skip..skip + need];
    let result = f(&mut bytemuck::cast_slice_mut::<u64, T>(values)[..len]);
    slot.set(words);
    result
}

/// Bytes of a cache line.
const LINE: usize = 64;

/// The float types' 1, which a weight is when the left row (`s · w`) is the right one (`s`).
pub(super) trait One {
    /// 1.0.
    const ONE: Self;
}

impl One for f32 {
    const ONE: f32 = 1.0;
}

impl One for f64 {
    const ONE: f64 = 1.0;
}

/// Threads of a `fisher_rows` workgroup: row r of a slice belongs to thread r mod 64.
pub(super) const THREADS: usize = 64;

/// A micro-kernel's panels: the packed left rows (a tile's width of values each), and the
/// right rows with the distance from one to the next (the tile's width when packed, the
/// padded width when read from the scores).
pub(super) type Panels<'a, T> = (&'a [T], (&'a [T], usize));

/// The rows of one slice of a chunk: padded scores (`width` values a row) and their
/// weights.
pub(super) struct Rows<'a, T = f32> {
    pub scores: &'a [T],
    pub weights: &'a [T],
    pub width: usize,
}

// By hand: a derive would ask `T: Clone`, which the slices do not need.
impl<T> Clone for Rows<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Rows<'_, T> {}

impl<T> Rows<'_, T> {
    /// Rows in the slice.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// Row `r`'s columns `c0..c0 + len` that exist (fewer past the padded width).
    #[inline(always)]
    fn columns(&self, r: usize, c0: usize, len: usize) -> &[T] {
        let cols = self.width.saturating_sub(c0).min(len);
        &self.scores[r * self.width + c0.min(self.width)..][..cols]
    }
}

/// Rows `rows`, columns `c0..c0 + E`, row-major into the left panel `lhs` (times the rows'
/// weights) and, if given, the right panel `rhs` (as they are), `rows.len() × E` words each:
/// the panels of a 64 × 64 tile's micro-kernel, one row of the tile's strip after another
/// (none is asked for when the scores are exactly one strip wide: they are their own). One pass over the rows writes both, so each row is
/// read from memory once.
pub(super) fn pack_rows<T: Real, const E: usize>(
    src: &Rows<T>,
    rows: Range<usize>,
    c0: usize,
    (lhs, mut rhs): (&mut [T], Option<&mut [T]>),
) {
    for (k, (r, lhs)) in rows.zip(lhs.chunks_exact_mut(E)).enumerate() {
        let from = src.columns(r, c0, E);
        let w = src.weights[r];
        if let (Ok(from), Ok(l)) = (<&[T; E]>::try_from(from), <&mut [T; E]>::try_from(&mut *lhs)) {
            // A whole strip: a loop of known length, inlined as vector moves rather than a
            // library call per row.
            for (l, &x) in l.iter_mut().zip(from) {
                *l = x * w;
            }
        } else {
            let (head, tail) = lhs.split_at_mut(from.len());
            head.iter_mut().zip(from).for_each(|(v, &x)| *v = x * w);
            tail.fill(T::ZERO);
        }
        if let Some(rhs) = rhs.as_deref_mut() {
            let (head, tail) = rhs[k * E..(k + 1) * E].split_at_mut(from.len());
            head.copy_from_slice(from);
            tail.fill(T::ZERO);
        }
    }
}

/// Row `k`'s eight left columns from `i0`, times its weight (0 past the padded width):
/// what the shader stages.
#[inline(always)]
pub(super) fn left(src: &Rows, k: usize, i0: usize) -> [f32; BLOCK] {
    let row = &src.scores[k * src.width..(k + 1) * src.width];
    let w = src.weights[k];
    std::array::from_fn(|r| row.get(i0 + r).map_or(0.0, |&x| x * w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_starts_on_a_cache_line_and_is_kept() {
        for len in [1, 7, 1000, 5000] {
            let first = with_scratch(&PANELS, len, |v: &mut [f32]| {
                assert_eq!(v.len(), len);
                v[len - 1] = 3.5;
                v.as_ptr() as usize
            });
            assert_eq!(first % LINE, 0, "{len} values");
            // The same buffer, as the last call left it, when it is long enough.
            let again = with_scratch(&PANELS, len, |v: &mut [f32]| (v.as_ptr() as usize, v[len - 1]));
            assert_eq!(again, (first, 3.5));
            let wide = with_scratch(&PANELS, len, |v: &mut [f64]| v.as_ptr() as usize);
            assert_eq!(wide % LINE, 0, "{len} values");
        }
    }

    #[test]
    fn panels_hold_the_rows_weighted_and_zero_past_the_width() {
        // Two rows of width 4, weights 2 and 3.
        let scores = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let src = Rows {
            scores: &scores,
            weights: &[2.0, 3.0],
            width: 4,
        };
        let (mut lhs, mut rhs) = ([f32::NAN; 2 * 8], [f32::NAN; 2 * 8]);
        pack_rows::<f32, 8>(&src, 0..2, 2, (&mut lhs, Some(&mut rhs)));
        assert_eq!(
            lhs,
            [6.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 21.0, 24.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(
            rhs,
            [3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
        // Whole strips (width 4 = E from column 0): the same values; no right panel asked,
        // none written.
        let (mut lhs, mut rhs) = ([f32::NAN; 4], [f32::NAN; 4]);
        pack_rows::<f32, 4>(&src, 1..2, 0, (&mut lhs, Some(&mut rhs)));
        assert_eq!((lhs, rhs), ([15.0, 18.0, 21.0, 24.0], [5.0, 6.0, 7.0, 8.0]));
        let mut lhs = [f32::NAN; 4];
        pack_rows::<f32, 4>(&src, 1..2, 0, (&mut lhs, None));
        assert_eq!(lhs, [15.0, 18.0, 21.0, 24.0]);
    }
}
