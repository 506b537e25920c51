//! A large copy of rows between numpy arrays on the machine's threads, for Python code that
//! moves bytes it did not compute (a cluster's driver writing each node's rows of a call's
//! result, read-only in Ray's object store, into the call's output, or a call's operands into
//! the shared memory a node on its machine reads): numpy's assignment copies on one thread,
//! while one core's copy leaves the memory bandwidth of the others unused. Both arrays are
//! C-contiguous, so their rows are one run of bytes, copied in blocks of [`BLOCK_BYTES`]
//! that the machine's threads take as they come free (a thread another process holds delays
//! only its own block), without the GIL: copying a result row by row (32 bytes for a
//! Cl(3,0) multivector) makes millions of tiny copies where a few long ones do the same for
//! 13 to 20% less CPU time. A large copy's blocks are written with streaming stores on
//! x86-64: the destination is not read first (an ordinary store reads each line it writes),
//! which takes another fifth off its CPU time (docs/benchmarks.md, cluster section); what
//! is copied this large is past the caches anyway.

use std::sync::Mutex;

use amari_gpu::host::cpu::hardware_threads;
use amari_gpu::Error;
use numpy::{PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::writable;
use crate::errors::to_pyerr;

/// Bytes each thread copies at once: large enough that a block is one long copy, small
/// enough that a 64 MiB result is sixteen blocks, which the threads share as they come free.
const BLOCK_BYTES: usize = 4 << 20;

/// Copies `src` into `dst` (of one length) in blocks of [`BLOCK_BYTES`] on the machine's
/// threads: the calling one and one more per other hardware thread, made for the copy (a
/// thread the OS refuses leaves its blocks to the others).
fn copy_blocks(dst: &mut [u8], src: &[u8]) {
    let blocks = Mutex::new(dst.chunks_mut(BLOCK_BYTES).zip(src.chunks(BLOCK_BYTES)));
    let drain = || loop {
        // The lock is held only to take the next block.
        let next = blocks.lock().map(|mut b| b.next()).unwrap_or(None);
        match next {
            Some((d, s)) => stream_copy(d, s),
            None => break,
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..hardware_threads() {
            // Refused: the others take its blocks.
            let _ = std::thread::Builder::new()
                .name("amari-copy".into())
                .spawn_scoped(scope, drain);
        }
        drain();
    });
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

/// Copies `src` into `dst`: C-contiguous uint8 arrays of one shape (rows of bytes: an
/// array's rows viewed as bytes), `dst` writeable and sharing no memory with `src`; the rows
/// split across the machine's threads. `ShapeError` when the shapes differ,
/// `InvalidArgumentError` when either is strided, `dst` read-only or overlapping `src`.
#[pyfunction]
pub fn copy_rows(
    py: Python<'_>,
    dst: Bound<'_, PyArray2<u8>>,
    src: PyReadonlyArray2<'_, u8>,
) -> PyResult<()> {
    // Borrowed before the checks: a read-only `dst`, or one overlapping `src`, is refused
    // (rust-numpy's borrow of it fails) with its argument named.
    let mut dst = writable(py, "dst", &dst)?;
    if dst.shape() != src.shape() {
        let shape = |s: &[usize]| format!("({}, {})", s[0], s[1]);
        return Err(to_pyerr(
            py,
            Error::Shape {
                argument: "src".into(),
                expected: format!("{} (dst's)", shape(dst.shape())),
                actual: shape(src.shape()),
            },
        ));
    }
    let strided = |name: &str| {
        to_pyerr(
            py,
            Error::invalid(name, "expected a C-contiguous array, got a strided one"),
        )
    };
    let src = src.as_slice().map_err(|_| strided("src"))?;
    let dst = dst.as_slice_mut().map_err(|_| strided("dst"))?;
    py.detach(|| {
        if dst.len() > BLOCK_BYTES {
            copy_blocks(dst, src);
        } else {
            dst.copy_from_slice(src);
        }
    });
    Ok(())
}
