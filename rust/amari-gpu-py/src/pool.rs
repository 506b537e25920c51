//! New large float outputs in reused memory. A new numpy array is fresh memory from the OS:
//! the first write to each page faults and the kernel zeroes it, which for a streaming kernel
//! costs several times the kernel itself, and varies with the machine's load. A large output
//! is instead a buffer kept from an earlier output that numpy has released (its pages already
//! the process's), handed to numpy with an owner object that gives it back when numpy frees
//! the array. Its words are not zeroed: every call that writes a new output writes all of it
//! (`arrays::output`'s callers), and a failed call's new array is never returned.

use std::alloc::Layout;
use std::sync::Mutex;

use numpy::ndarray::{ArrayView, Dimension, IxDyn};
use numpy::{Element, PyArray, PyArrayDescrMethods, PyArrayDyn};
use pyo3::prelude::*;

use crate::arrays::zeros;

/// Outputs smaller than this are numpy's own (few pages to fault, numpy caches small blocks).
const MIN_POOLED_BYTES: usize = 1 << 20;
/// Most bytes of released buffers kept for reuse; past it, released buffers are freed.
const MAX_KEPT_BYTES: usize = 512 << 20;
/// Array data starts on a 64-byte boundary (a cache line, and any SIMD store's alignment).
const ALIGN_BYTES: usize = 64;

/// Released buffers, most recent last.
static KEPT: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());

/// The owner of a pooled array's memory (the numpy array's base object): gives the buffer
/// back to the pool when numpy frees the array.
#[pyclass(frozen, module = "amari_gpu._native")]
pub struct PooledOutput {
    words: Vec<u64>,
}

impl Drop for PooledOutput {
    fn drop(&mut self) {
        let words = std::mem::take(&mut self.words);
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        let mut total: usize = kept.iter().map(|b| b.len() * 8).sum();
        total += words.len() * 8;
        kept.push(words);
        // Oldest first out, until the kept bytes are within the bound.
        while total > MAX_KEPT_BYTES && !kept.is_empty() {
            total -= kept.remove(0).len() * 8;
        }
    }
}

/// A kept buffer of at least `words` words and at most twice that (so a small output does
/// not pin a large buffer), or a new zeroed one (`None` when memory is short).
fn buffer(words: usize) -> Option<Vec<u64>> {
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    let fits = |b: &Vec<u64>| b.len() >= words && b.len() / 2 <= words;
    if let Some(at) = kept.iter().rposition(fits) {
        return Some(kept.remove(at));
    }
    drop(kept);
    let layout = Layout::array::<u64>(words).ok().filter(|l| l.size() > 0)?;
    // SAFETY: `layout` has a non-zero size (checked above).
    #[allow(unsafe_code)]
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>();
    if ptr.is_null() {
        return None;
    }
    // Huge pages where the OS grants them: 512 times fewer faults on the first write and
    // fewer TLB misses for every streaming pass (advice only: the result is ignored).
    #[cfg(target_os = "linux")]
    // SAFETY: the range is the allocation just made, `layout.size()` bytes from `ptr`;
    // madvise with MADV_HUGEPAGE changes no memory contents.
    #[allow(unsafe_code)]
    unsafe {
        libc::madvise(ptr.cast(), layout.size(), libc::MADV_HUGEPAGE);
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `words` u64s, all of
    // them zero-initialised, so it is a valid Vec of that length and capacity.
    #[allow(unsafe_code)]
    Some(unsafe { Vec::from_raw_parts(ptr, words, words) })
}

/// A new float array of shape `dim` in a pooled buffer, or `None` when it is small, not a
/// float array or memory is short (numpy allocates those, and reports the shortage). Its
/// words are whatever the buffer held: the caller writes all of them.
pub fn pooled<'py, T: Element, D: Dimension>(
    py: Python<'py>,
    dim: &D,
) -> PyResult<Option<Bound<'py, PyArray<T, D>>>> {
    let elem = std::mem::size_of::<T>();
    let is_float = numpy::dtype::<T>(py).kind() == b'f';
    let Some(bytes) = dim.size_checked().and_then(|n| n.checked_mul(elem)) else {
        return Ok(None);
    };
    if !is_float || bytes < MIN_POOLED_BYTES || std::mem::align_of::<T>() > ALIGN_BYTES {
        return Ok(None);
    }
    let Some(mut words) = buffer(bytes.div_ceil(8) + ALIGN_BYTES / 8) else {
        return Ok(None);
    };
    let skip = words.as_ptr().cast::<u8>().align_offset(ALIGN_BYTES);
    // The buffer holds `bytes` plus 64 bytes and `skip` < 64: the array's bytes lie in it. The
    // pointer is to the heap buffer, which stays where it is when the Vec moves into `owner`.
    let start = words
        .as_mut_ptr()
        .cast::<u8>()
        .wrapping_add(skip)
        .cast::<T>();
    let owner = Bound::new(py, PooledOutput { words })?;
    // SAFETY: `start` is aligned for `T` (64-byte aligned, and `T`'s alignment divides 64) and
    // points at `bytes` = dim.size() · size_of::<T>() initialised bytes of the owner's buffer
    // (zeroed when made, else an earlier output's words); every bit pattern is a valid float.
    // The view's strides are the C-contiguous ones of `dim`.
    #[allow(unsafe_code)]
    let view = unsafe { ArrayView::from_shape_ptr(dim.clone(), start.cast_const()) };
    // SAFETY: `owner` becomes the array's base object, so it outlives the array; its buffer
    // is never resized or moved while it is alive (only taken back in `drop`), so the memory
    // `view` points at stays valid for as long as the array.
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
