//! Packing for the host max-plus micro-kernels (`host_kernel`): the right operand in strips
//! of a kernel's column width, each strip's k rows contiguous; the left operand in panels of
//! a kernel's row height, each k step's rows contiguous (one broadcast each). Values are
//! stored signed (negated for min-plus, which is exact), and a strip or panel that runs past
//! the matrix is padded with −inf: a −inf term is −inf or NaN, which the accumulation never
//! takes, and padded rows and columns are never stored anyway. Then the finished tile's
//! combination with `c` and its store, as `shaders/tropical.wgsl`'s `finish` does it.

use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;

use super::scalar::Scalar;

#[inline(always)]
pub(super) fn signed<T: Scalar>(min: bool, x: T) -> T {
    if min {
        -x
    } else {
        x
    }
}

/// The accumulation step every kernel computes: `s` when it is greater than `acc`, else
/// `acc` (so a NaN term is never taken and a tie keeps the earlier value).
#[inline(always)]
pub(super) fn mx<T: PartialOrd>(acc: T, s: T) -> T {
    if s > acc {
        s
    } else {
        acc
    }
}

/// `b` (k × cols) in strips of `nr` columns: strip s is k rows of `nr` signed words.
pub(super) fn pack_b<T: Scalar>(b: &[T], k: usize, cols: usize, nr: usize, min: bool) -> Vec<T> {
    let strips = cols.div_ceil(nr);
    let mut packed = vec![T::NEG_INFINITY; strips * k * nr];
    if k == 0 {
        return packed;
    }
    packed
        .par_chunks_mut(k * nr)
        .enumerate()
        .for_each(|(s, strip)| {
            let j0 = s * nr;
            let nc = nr.min(cols - j0);
            for (row, dst) in b.chunks_exact(cols).zip(strip.chunks_exact_mut(nr)) {
                for (d, &v) in dst.iter_mut().zip(&row[j0..j0 + nc]) {
                    *d = signed(min, v);
                }
            }
        });
    packed
}

/// Rows of `a` (each k wide; at most `mr` of them) into `panel` (k × mr): step kk holds
/// every row's kk-th word, signed, then −inf for the rows past the end.
pub(super) fn pack_a<T: Scalar>(a: &[T], k: usize, mr: usize, min: bool, panel: &mut [T]) {
    let rows = a.len().checked_div(k).unwrap_or(0);
    for (kk, step) in panel.chunks_exact_mut(mr).enumerate() {
        for (r, d) in step.iter_mut().enumerate() {
            *d = if r < rows {
                signed(min, a[r * k + kk])
            } else {
                T::NEG_INFINITY
            };
        }
    }
}

/// Where a finished tile goes: its first row and column in `out` (rows × `cols`), and how
/// many of its rows and columns are inside.
pub(super) struct Place {
    pub row: usize,
    pub col: usize,
    pub rows: usize,
    pub cols: usize,
}

/// Stores a finished tile (`acc`, rows of `nr` signed accumulators) at `place` in `out`,
/// combined with `c` first (`mx(c, acc)`: a tie keeps `c`), unsigned.
pub(super) fn store_tile<T: Scalar>(
    acc: &[T],
    nr: usize,
    place: &Place,
    c: Option<&[T]>,
    cols: usize,
    min: bool,
    out: &mut [T],
) {
    for (r, tile_row) in acc.chunks_exact(nr).take(place.rows).enumerate() {
        let at = (place.row + r) * cols + place.col;
        let dst = &mut out[at..at + place.cols];
        for (l, (d, &v)) in dst.iter_mut().zip(tile_row).enumerate() {
            let v = match c {
                Some(c) => mx(signed(min, c[at + l]), v),
                None => v,
            };
            *d = signed(min, v);
        }
    }
}

/// Packed right operands of one kernel, by the address and length of the operand they were
/// packed from. The engine runs a product as many chunks of rows, each reading all of `b`:
/// packing it once per call rather than once per chunk keeps the packing from costing as
/// much as the product. A kernel is built for one call and run on that call's inputs only
/// (`blocks::run_product`, `resident`; calibration builds its reference per measurement
/// over inputs it keeps alive), and those inputs are borrowed for the whole call, so an
/// operand's address and length name its contents for the kernel's life.
#[derive(Debug, Default)]
pub(super) struct PackCache {
    entries: Mutex<Vec<Packed>>,
}

/// One packed operand: the address and length of the operand, and its strips.
type Packed = (usize, usize, Arc<Vec<f32>>);

impl PackCache {
    /// The packed form of `b`, packed by `pack` the first time `b` is asked for.
    pub fn get(
        &self,
        b: &[f32],
        pack: impl FnOnce() -> Vec<f32>,
    ) -> Arc<Vec<f32>> {
        let key = (b.as_ptr() as usize, b.len());
        // A poisoned lock only means a chunk panicked mid-call (its device is then failed);
        // the entries themselves are always whole.
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, packed)) = entries.iter().find(|(p, l, _)| (*p, *l) == key) {
            return packed.clone();
        }
        let packed = Arc::new(pack());
        entries.push((key.0, key.1, packed.clone()));
        packed
    }
}
