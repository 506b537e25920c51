//! A large copy of rows between numpy arrays on the machine's threads, for Python code that
//! places a result it did not compute (a cluster's driver writing each node's rows of a
//! call's result, read-only in Ray's object store, into the call's output): numpy's
//! assignment copies on one thread, while one core's copy leaves the memory bandwidth of the
//! others unused. The bytes are copied by the host pool's row copy, without the GIL, in
//! blocks of [`BLOCK_BYTES`]: both arrays are C-contiguous, so their rows are one run of
//! bytes, and copying a result row by row (32 bytes for a Cl(3,0) multivector) makes
//! millions of tiny copies where a few long ones do the same for 13 to 20% less CPU time
//! (docs/benchmarks.md, cluster section).

use std::sync::OnceLock;

use amari_gpu::host::{cpu::hardware_threads, HostPool};
use amari_gpu::Error;
use numpy::{PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::writable;
use crate::errors::to_pyerr;

/// Bytes each task of the pool copies at once (what is left past the last whole block is
/// copied on the calling thread): large enough that a task is one long copy, small enough
/// that a 64 MiB result is sixteen tasks, which the pool's threads share as they come free
/// (a thread another process holds delays only its own block).
const BLOCK_BYTES: usize = 4 << 20;

/// The process's copy threads, one per hardware thread, made on the first copy (`None` when
/// the OS refuses threads: the copy then runs on the calling thread).
fn pool() -> Option<&'static HostPool> {
    static POOL: OnceLock<Option<HostPool>> = OnceLock::new();
    POOL.get_or_init(|| HostPool::new(hardware_threads()).ok())
        .as_ref()
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
    let copied = py.detach(|| match pool() {
        Some(pool) if dst.len() > BLOCK_BYTES => {
            // The whole blocks on the pool, the shorter rest here.
            let whole = dst.len() - dst.len() % BLOCK_BYTES;
            let (dst_blocks, dst_rest) = dst.split_at_mut(whole);
            let (src_blocks, src_rest) = src.split_at(whole);
            dst_rest.copy_from_slice(src_rest);
            pool.copy_rows(dst_blocks, src_blocks, BLOCK_BYTES)
        }
        _ => {
            dst.copy_from_slice(src);
            Ok(())
        }
    });
    copied.map_err(|e| to_pyerr(py, e))
}
