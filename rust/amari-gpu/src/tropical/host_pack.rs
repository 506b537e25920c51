//! Packing for the host max-plus micro-kernels (`host_kernel`): the right operand in strips
//! of a kernel's column width, each strip's k rows contiguous; the left operand in panels of
//! a kernel's row height, each k step's rows contiguous (one broadcast each). Values are
//! stored signed (negated for min-plus, which is exact), and a strip or panel that runs past
//! the matrix is padded with −inf: a −inf term is −inf or NaN, which the accumulation never
//! takes, and padded rows and columns are never stored anyway. Then a finished tile's
//! combination with `c` and its store, as `shaders/tropical.wgsl`'s `finish` does it.

use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;

use super::scalar::Scalar;

/// Words of `b` below which [`pack_b`] packs on one thread.
const PACK_SPLIT_WORDS: usize = 1 << 14;

/// Whether packing a `k` × `cols` `b` shares its copy among the pool's threads.
pub(super) fn pack_splits(k: usize, cols: usize) -> bool {
    k.saturating_mul(cols) >= PACK_SPLIT_WORDS
}

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

/// `b` (k × cols) in strips of `nr` columns: strip s is k rows of `nr` signed words. Each
/// thread packs a run of strips row by row of `b`, so that it reads each row's part as one
/// contiguous run (strip by strip, a row's 128 bytes every 4 KiB of a 1024-wide `b` missed
/// the caches and the TLB each time), and writes every word of its strips, the −inf past
/// the last column included: the buffer is taken zeroed (fresh pages), not filled with −inf
/// on one thread first, which was a serial pass over 4 MiB for a 1024² product.
pub(super) fn pack_b<T: Scalar>(b: &[T], k: usize, cols: usize, nr: usize, min: bool) -> Vec<T> {
    let strips = cols.div_ceil(nr);
    let mut packed = vec![T::ZERO; strips * k * nr];
    if k == 0 {
        return packed;
    }
    // A small `b` is packed by one task: waking a second thread costs more than its copy.
    let threads = if !pack_splits(k, cols) {
        1
    } else {
        rayon::current_num_threads().max(1)
    };
    let per_task = strips.div_ceil(threads).max(1);
    packed
        .par_chunks_mut(per_task * k * nr)
        .enumerate()
        .for_each(|(t, run)| {
            let first = t * per_task;
            for (kk, row) in b.chunks_exact(cols).enumerate() {
                for (i, strip) in run.chunks_exact_mut(k * nr).enumerate() {
                    let j0 = (first + i) * nr;
                    let nc = nr.min(cols - j0);
                    let (dst, past) = strip[kk * nr..(kk + 1) * nr].split_at_mut(nc);
                    for (d, &v) in dst.iter_mut().zip(&row[j0..j0 + nc]) {
                        *d = signed(min, v);
                    }
                    past.fill(T::NEG_INFINITY);
                }
            }
        });
    packed
}

/// Rows of `a` (each k wide; at most `mr` of them) into `panel` (k × mr): step kk holds
/// every row's kk-th word, signed, then −inf for the rows past the end. Row by row: each
/// row of `a` is read in order and its words stored `mr` apart in the panel (in L1).
pub(super) fn pack_a<T: Scalar>(a: &[T], k: usize, mr: usize, min: bool, panel: &mut [T]) {
    let rows = a.len().checked_div(k).unwrap_or(0);
    for r in 0..mr {
        let column = panel.iter_mut().skip(r).step_by(mr);
        if r < rows {
            for (d, &v) in column.zip(&a[r * k..(r + 1) * k]) {
                *d = signed(min, v);
            }
        } else {
            column.for_each(|d| *d = T::NEG_INFINITY);
        }
    }
}

/// Stores one row of a finished tile (`acc`, signed accumulators, as many as `out` holds)
/// into `out`, combined with `c`'s row first (`mx(c, acc)`: a tie keeps `c`), unsigned.
pub(super) fn store_row<T: Scalar>(acc: &[T], c: Option<&[T]>, min: bool, out: &mut [T]) {
    match c {
        Some(c) => {
            for ((d, &v), &c) in out.iter_mut().zip(acc).zip(c) {
                *d = signed(min, mx(signed(min, c), v));
            }
        }
        None => {
            for (d, &v) in out.iter_mut().zip(acc) {
                *d = signed(min, v);
            }
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
pub(super) struct PackCache<T> {
    entries: Mutex<Vec<Packed<T>>>,
}

/// One packed operand: the address and length of the operand, and its strips.
type Packed<T> = (usize, usize, Arc<Vec<T>>);

impl<T> PackCache<T> {
    /// The packed form of `b`, packed by `pack` the first time `b` is asked for.
    pub fn get(&self, b: &[T], pack: impl FnOnce() -> Vec<T>) -> Arc<Vec<T>> {
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
