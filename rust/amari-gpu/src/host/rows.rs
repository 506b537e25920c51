//! Copies of many rows between large host buffers (a grid's rows into a padded board and
//! back, a band's rows out of its buffer, a result placed by the bindings), cut into tasks of whole rows on a host pool's
//! threads: one core copying several megabytes leaves the others idle for most of a grid
//! call. Without a pool the same rows are copied on the calling thread.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::device::HostPool;
use crate::error::{Error, Result};

/// Bytes a task copies at least: the pool's cost per task stays small beside it.
const TASK_BYTES: usize = 64 << 10;

/// Copies row `i` of `src` (rows `src_row` words apart) into row `i` of `dst` (rows
/// `dst_row` words apart) with `copy(dst_row, src_row)`, for every row both hold.
fn each_row<D: Send, T: Sync>(
    pool: Option<&HostPool>,
    (dst, dst_row): (&mut [D], usize),
    (src, src_row): (&[T], usize),
    copy: impl Fn(&mut [D], &[T]) + Sync,
) {
    let (dst_row, src_row) = (dst_row.max(1), src_row.max(1));
    let row_bytes = dst_row.max(src_row) * std::mem::size_of::<T>().max(1);
    let per_task = (TASK_BYTES / row_bytes.max(1)).max(1);
    let task = |(d, s): (&mut [D], &[T])| {
        for (d, s) in d.chunks_mut(dst_row).zip(s.chunks(src_row)) {
            copy(d, s);
        }
    };
    match pool {
        Some(pool) if pool.threads() > 1 && dst.len() > per_task * dst_row => {
            let tasks = dst
                .par_chunks_mut(per_task * dst_row)
                .zip(src.par_chunks(per_task * src_row));
            pool.run_with(|| tasks.for_each(task));
        }
        _ => dst
            .chunks_mut(per_task * dst_row)
            .zip(src.chunks(per_task * src_row))
            .for_each(task),
    }
}

/// Copies the first `len` words of each row of `src` (rows `src_row` words apart) to the
/// start of the same row of `dst` (rows `dst_row` words apart), then `tail` (which sees
/// the whole destination row) on each: the rows split across `pool`'s threads.
pub(crate) fn copy_rows<T: Copy + Send + Sync>(
    pool: Option<&HostPool>,
    (dst, dst_row): (&mut [T], usize),
    (src, src_row): (&[T], usize),
    len: usize,
    tail: impl Fn(&mut [T]) + Sync,
) {
    each_row(pool, (dst, dst_row), (src, src_row), |d, s| {
        d[..len].copy_from_slice(&s[..len]);
        tail(d);
    });
}

/// A new vector of `rows` rows of `len` values of `T`, row `i` the first `len` values'
/// bytes of row `i` of `src` (rows `src_row` bytes apart, `src` holding at least `rows`
/// of them; only byte-aligned, so a grid's float64 rows come out of a board of 4-byte
/// words): each byte is written once (no zeros first), the rows split across `pool`'s
/// threads. `None` when the memory cannot be reserved.
pub(crate) fn new_rows<T: bytemuck::Pod + Send + Sync>(
    pool: Option<&HostPool>,
    (src, src_row): (&[u8], usize),
    rows: usize,
    len: usize,
) -> Option<Vec<T>> {
    let words = rows.checked_mul(len)?;
    let row_bytes = len.checked_mul(std::mem::size_of::<T>())?;
    if row_bytes > src_row || rows.checked_mul(src_row)? > src.len() || row_bytes == 0 && words > 0
    {
        return None;
    }
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(words).ok()?;
    let slots: &mut [MaybeUninit<T>] = &mut out.spare_capacity_mut()[..words];
    // SAFETY: the `words` slots of `T` are `words * size_of::<T>()` bytes of the vector's
    // reserved memory, exclusively borrowed here; `MaybeUninit<u8>` has alignment 1 and
    // admits any byte, initialised or not.
    #[allow(unsafe_code)]
    let bytes: &mut [MaybeUninit<u8>] = unsafe {
        std::slice::from_raw_parts_mut(slots.as_mut_ptr().cast(), words * size_of::<T>())
    };
    each_row(
        pool,
        (bytes, row_bytes),
        (&src[..rows * src_row], src_row),
        |d, s| {
            let n = d.len().min(s.len());
            // One `memcpy` per row (a loop writing `MaybeUninit` bytes one by one is left
            // to 16-byte moves). SAFETY: `n` bytes are in bounds of both rows, and the
            // source (the caller's) and destination (this vector's spare memory) are
            // different allocations.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::copy_nonoverlapping(s.as_ptr(), d.as_mut_ptr().cast::<u8>(), n)
            };
        },
    );
    // Not zeroed first (a grid call's result is megabytes, written once here).
    // SAFETY: the `rows` chunks of `row_bytes` bytes tile the first `words` slots' bytes,
    // and each chunk was paired with a source row of at least `row_bytes` bytes (checked
    // above), so every byte below `words` slots was written; `T` is `Pod`, so any bytes
    // are a valid `T`.
    #[allow(unsafe_code)]
    unsafe {
        out.set_len(words)
    };
    Some(out)
}

/// Bytes a task of a whole copy ([`HostPool::copy_rows`]) moves at once: large enough that a
/// task is one long copy, small enough that a 64 MiB result is sixteen tasks, which the
/// pool's threads take as they come free (a thread another process holds delays only its
/// own task).
const BLOCK_BYTES: usize = 4 << 20;

impl HostPool {
    /// Copies `src` into `dst`, both rows of `row` values, on the pool's threads: for code
    /// outside the crate that places a large result (the bindings' `copy_rows`). Both are
    /// contiguous, so the rows are one run of values, copied in tasks of [`BLOCK_BYTES`]
    /// (copying row by row made millions of tiny copies where a few long ones do the same
    /// for 13 to 20% less CPU time); a copy past one task is written with streaming stores
    /// on x86-64, since what is copied this large is past the caches anyway and an ordinary
    /// store reads each line it writes (another fifth off its CPU time; docs/benchmarks.md,
    /// cluster section). An `InvalidArgument` error when the slices differ in length or do
    /// not hold whole rows.
    pub fn copy_rows<T: bytemuck::Pod + Send + Sync>(
        &self,
        dst: &mut [T],
        src: &[T],
        row: usize,
    ) -> Result<()> {
        // No rows of 0 values but in an empty slice.
        if dst.len() != src.len() || !dst.len().is_multiple_of(row) {
            return Err(Error::invalid(
                "src",
                format!(
                    "expected {} values in rows of {row} (dst's), got {}",
                    dst.len(),
                    src.len()
                ),
            ));
        }
        let (dst, src): (&mut [u8], &[u8]) =
            (bytemuck::cast_slice_mut(dst), bytemuck::cast_slice(src));
        if dst.len() <= BLOCK_BYTES {
            dst.copy_from_slice(src);
        } else {
            let tasks = dst
                .par_chunks_mut(BLOCK_BYTES)
                .zip(src.par_chunks(BLOCK_BYTES));
            self.run_with(|| tasks.for_each(|(d, s)| stream_copy(d, s)));
        }
        Ok(())
    }
}

/// `dst.copy_from_slice(src)` with streaming stores for the 16-byte-aligned part of `dst`
/// on x86-64 (SSE2, which every x86-64 processor has).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn stream_copy(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    const LINE: usize = 64;
    let head = dst.as_ptr().align_offset(16).min(dst.len());
    let (dst_head, dst) = dst.split_at_mut(head);
    let (src_head, src) = src.split_at(head);
    dst_head.copy_from_slice(src_head);
    let whole = dst.len() - dst.len() % LINE;
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    let mut at = 0;
    while at < whole {
        // SAFETY: `at + LINE <= whole <= dst.len() == src.len()`, so every load and store is
        // in bounds; `d` is 16-byte aligned (split above) and `at` a multiple of 64, so each
        // streaming store is to an aligned address; loads may be unaligned; SSE2 is part of
        // x86-64.
        unsafe {
            for lane in 0..LINE / 16 {
                let offset = at + 16 * lane;
                let v = _mm_loadu_si128(s.add(offset).cast::<__m128i>());
                _mm_stream_si128(d.add(offset).cast::<__m128i>(), v);
            }
        }
        at += LINE;
    }
    // SAFETY: a store fence has no operands; it orders the streaming stores above before
    // any later store (another thread, or the caller, sees the block copied).
    unsafe { _mm_sfence() };
    dst[whole..].copy_from_slice(&src[whole..]);
}

#[cfg(not(target_arch = "x86_64"))]
fn stream_copy(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_copied_whole_with_or_without_a_pool() {
        let pool = HostPool::new(2).unwrap();
        let (rows, src_row, len) = (3001, 7, 5);
        let src: Vec<u32> = (0..(rows * src_row) as u32).collect();
        let bytes: &[u8] = bytemuck::cast_slice(&src);
        for pool in [None, Some(&pool)] {
            let out: Vec<u32> = new_rows(pool, (bytes, src_row * 4), rows, len).unwrap();
            let want: Vec<u32> = src
                .chunks(src_row)
                .flat_map(|r| r[..len].to_vec())
                .collect();
            assert_eq!(out, want);
            let mut back = vec![9u32; rows * 8];
            copy_rows(pool, (&mut back, 8), (&out, len), len, |row| {
                row[len..].fill(0)
            });
            for (b, o) in back.chunks(8).zip(out.chunks(len)) {
                assert_eq!(&b[..len], o);
                assert_eq!(&b[len..], &[0, 0, 0]);
            }
        }
        assert!(new_rows::<u32>(None, (bytes, src_row * 4), rows + 1, len).is_none());
        assert!(new_rows::<u32>(None, (bytes, src_row * 4), rows, src_row + 1).is_none());
        // Rows of float64 values out of 4-byte words at any offset: the bytes are copied.
        let odd = &bytes[4..4 + 3 * 12];
        let wide: Vec<f64> = new_rows(Some(&pool), (odd, 12), 3, 1).unwrap();
        for (r, v) in wide.iter().enumerate() {
            assert_eq!(v.to_ne_bytes()[..], odd[r * 12..r * 12 + 8]);
        }
    }

    #[test]
    fn a_pool_copies_whole_rows_and_refuses_partial_ones() {
        let pool = HostPool::new(2).unwrap();
        // Rows enough for several tasks of the pool, and a partial last task.
        let src: Vec<u32> = (0..(3 << 16) + 24).collect();
        let mut dst = vec![0u32; src.len()];
        pool.copy_rows(&mut dst, &src, 8).unwrap();
        assert_eq!(dst, src);
        let mut empty: Vec<u32> = Vec::new();
        pool.copy_rows(&mut empty, &[], 0).unwrap();
        assert!(pool.copy_rows(&mut dst, &src[1..], 8).is_err());
        assert!(pool.copy_rows(&mut dst[..12], &src[..12], 8).is_err());
        assert!(pool.copy_rows(&mut dst[..8], &src[..8], 0).is_err());
        // Past one task, streamed, into a destination off a 16-byte boundary and with a
        // partial last line.
        let src: Vec<u8> = (0..(BLOCK_BYTES * 2 + 4099))
            .map(|k| (k * 31 % 251) as u8)
            .collect();
        let mut dst = vec![0u8; src.len() + 3];
        pool.copy_rows(&mut dst[3..], &src, 1).unwrap();
        assert_eq!(&dst[3..], &src[..]);
        assert_eq!(&dst[..3], &[0, 0, 0]);
    }
}
