//! New large float outputs in reused memory. A new numpy array is fresh memory from the OS:
//! the first write to each page faults and the kernel zeroes it, which for a streaming kernel
//! costs several times the kernel itself, and varies with the machine's load. A large output
//! is instead a block of memory mapped here (2 MiB aligned and advised onto huge pages, so
//! its first write faults 512 times less often, in the threads that write it), handed to
//! numpy with an owner object that gives it back to a bounded pool when numpy frees the
//! array, for the next output to reuse without faulting again. Its words are not zeroed on
//! reuse: every call that writes a new output writes all of it (`arrays::output`'s callers),
//! and a failed call's new array is never returned. Closing a context frees what the pool
//! keeps; arrays alive then keep their blocks, which are freed (not kept) when they die.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use numpy::ndarray::{ArrayView, Dimension, IxDyn};
use numpy::{Element, PyArray, PyArrayDescrMethods, PyArrayDyn};
use pyo3::prelude::*;

use crate::arrays::zeros;

/// Outputs smaller than this are numpy's own (few pages to fault, numpy caches small blocks).
const MIN_POOLED_BYTES: usize = 1 << 20;
/// Most bytes of released blocks kept for reuse; past it, released blocks are freed.
const MAX_KEPT_BYTES: usize = 512 << 20;
/// Blocks are mapped on this boundary and in multiples of it: a huge page of x86-64 and
/// aarch64 Linux (and any SIMD store's alignment).
const BLOCK_BYTES: usize = 2 << 20;

/// Released blocks, most recent last.
static KEPT: Mutex<Vec<Block>> = Mutex::new(Vec::new());
/// How many times the pool was released: a block handed out before the last release is
/// freed when its array dies, not kept.
static RELEASES: AtomicUsize = AtomicUsize::new(0);

/// Zeroed memory mapped from the OS: `len` bytes (a multiple of [`BLOCK_BYTES`]) at `ptr`
/// (aligned to it), unmapped when dropped.
struct Block {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a block is plain memory that only its owner reads or writes; moving the owner
// between threads moves nothing the OS ties to a thread.
#[allow(unsafe_code)]
unsafe impl Send for Block {}

impl Block {
    /// A new block of at least `bytes` bytes, or `None` when the OS refuses it (or has no
    /// anonymous mappings: numpy then allocates).
    #[cfg(unix)]
    fn map(bytes: usize) -> Option<Block> {
        let len = bytes
            .checked_next_multiple_of(BLOCK_BYTES)?
            .max(BLOCK_BYTES);
        // One block more than asked, so that an aligned start lies inside; the rest is
        // given back.
        let span = len.checked_add(BLOCK_BYTES)?;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a new private anonymous mapping at an address the OS chooses touches no
        // existing memory.
        #[allow(unsafe_code)]
        let raw = unsafe { libc::mmap(std::ptr::null_mut(), span, prot, flags, -1, 0) };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let raw = raw.cast::<u8>();
        let head = raw.align_offset(BLOCK_BYTES).min(BLOCK_BYTES);
        let start = raw.wrapping_add(head);
        let tail = span - head - len;
        // SAFETY: both ranges lie inside the mapping just made (head + len + tail = span),
        // outside the block kept, and are page-aligned (mmap returns page-aligned memory,
        // `start` and `start + len` are 2 MiB aligned); nothing refers to them.
        #[allow(unsafe_code)]
        unsafe {
            if head > 0 {
                libc::munmap(raw.cast(), head);
            }
            if tail > 0 {
                libc::munmap(start.wrapping_add(len).cast(), tail);
            }
        }
        // Huge pages where the OS grants them (advice only: the result is ignored).
        #[cfg(target_os = "linux")]
        // SAFETY: the range is the block, page-aligned; the advice changes no contents.
        #[allow(unsafe_code)]
        unsafe {
            libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE);
        }
        Some(Block {
            ptr: NonNull::new(start)?,
            len,
        })
    }

    /// No anonymous mappings here: numpy allocates every output.
    #[cfg(not(unix))]
    fn map(_bytes: usize) -> Option<Block> {
        None
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: the block is a mapping of `len` bytes at `ptr` made by `Block::map`, which
        // nothing refers to once its owner drops it.
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The kept blocks (a poisoned lock only means a thread panicked while holding it; the list
/// itself is always whole).
fn kept() -> std::sync::MutexGuard<'static, Vec<Block>> {
    KEPT.lock().unwrap_or_else(|p| p.into_inner())
}

/// The owner of a pooled array's memory (the numpy array's base object): gives the block
/// back to the pool when numpy frees the array.
#[pyclass(frozen, module = "amari_gpu._native")]
pub struct PooledOutput {
    block: Mutex<Option<Block>>,
    /// [`RELEASES`] when the block was handed out.
    releases: usize,
}

impl Drop for PooledOutput {
    fn drop(&mut self) {
        let block = self
            .block
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(block) = block else { return };
        let mut kept = kept();
        // Read under the lock `release_kept` counts under: no block lands after a release.
        if self.releases != RELEASES.load(Ordering::Acquire) {
            return;
        }
        let mut total: usize = kept.iter().map(|b| b.len).sum::<usize>() + block.len;
        kept.push(block);
        // Oldest first out, until the kept bytes are within the bound.
        while total > MAX_KEPT_BYTES && !kept.is_empty() {
            total -= kept.remove(0).len;
        }
    }
}

/// A kept block of at least `bytes` bytes and at most twice that (so a small output does not
/// pin a large block), or a new one (`None` when memory is short).
fn block(bytes: usize) -> Option<Block> {
    let mut kept = kept();
    let want = bytes.max(BLOCK_BYTES);
    let fits = |b: &Block| b.len >= bytes && b.len / 2 <= want;
    if let Some(at) = kept.iter().rposition(fits) {
        return Some(kept.remove(at));
    }
    drop(kept);
    Block::map(bytes)
}

/// Frees every kept block (a context closing: the memory goes back to the OS). Blocks of
/// arrays still alive stay theirs, and come back to the pool when those die.
pub fn release_kept() {
    let mut kept = kept();
    RELEASES.fetch_add(1, Ordering::AcqRel);
    let freed = std::mem::take(&mut *kept);
    drop(kept);
    drop(freed);
}

/// A new float array of shape `dim` in a pooled block, or `None` when it is small, not a
/// float array or memory is short (numpy allocates those, and reports the shortage). Its
/// words are whatever the block held: the caller writes all of them.
pub fn pooled<'py, T: Element, D: Dimension>(
    py: Python<'py>,
    dim: &D,
) -> PyResult<Option<Bound<'py, PyArray<T, D>>>> {
    let elem = std::mem::size_of::<T>();
    let is_float = numpy::dtype::<T>(py).kind() == b'f';
    let Some(bytes) = dim.size_checked().and_then(|n| n.checked_mul(elem)) else {
        return Ok(None);
    };
    if !is_float || bytes < MIN_POOLED_BYTES || std::mem::align_of::<T>() > BLOCK_BYTES {
        return Ok(None);
    }
    let Some(block) = block(bytes) else {
        return Ok(None);
    };
    // The block's memory stays where it is when the block moves into `owner`.
    let start = block.ptr.as_ptr().cast::<T>();
    let owner = PooledOutput {
        block: Mutex::new(Some(block)),
        releases: RELEASES.load(Ordering::Acquire),
    };
    let owner = Bound::new(py, owner)?;
    // SAFETY: `start` is aligned for `T` (2 MiB aligned, and `T`'s alignment divides it) and
    // points at `bytes` = dim.size() · size_of::<T>() initialised bytes of the owner's block
    // (zeroed by the OS when mapped, else an earlier output's words); every bit pattern is a
    // valid float. The view's strides are the C-contiguous ones of `dim`.
    #[allow(unsafe_code)]
    let view = unsafe { ArrayView::from_shape_ptr(dim.clone(), start.cast_const()) };
    // SAFETY: `owner` becomes the array's base object, so it outlives the array; its block is
    // only taken back in its `drop`, so the memory `view` points at stays mapped for as long
    // as the array.
    #[allow(unsafe_code)]
    let array = unsafe { PyArray::borrow_from_array(&view, owner.into_any()) };
    Ok(Some(array))
}

/// A new float32 array of `shape` that the caller fills whole (a cluster's driver writes every
/// node's rows of a call's result into it): in reused memory when large, as a kernel's new
/// output is, else a zeroed numpy array; `OutOfMemoryError` when it cannot be had.
#[pyfunction]
pub fn pooled_output<'py>(
    py: Python<'py>,
    shape: Vec<usize>,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let dim = IxDyn(&shape);
    match pooled::<f32, IxDyn>(py, &dim)? {
        Some(array) => Ok(array),
        None => zeros::<f32, IxDyn>(py, "shape", dim),
    }
}

/// Bytes of released outputs the pool keeps for reuse (at most 512 MiB; none after a
/// context closes until new outputs are released).
#[pyfunction]
pub fn pooled_output_bytes() -> usize {
    kept().iter().map(|b| b.len).sum()
}
