//! A large copy of rows between numpy arrays on the machine's threads, for Python code that
//! moves bytes it did not compute (a cluster's driver writing each node's rows of a call's
//! result, read-only in Ray's object store, into the call's output, or a call's operands into
//! the shared memory a node on its machine reads): numpy's assignment copies on one thread,
//! while one core's copy leaves the memory bandwidth of the others unused. The rows are
//! copied by the host pool's copy (`HostPool::copy_rows`: long blocks, streamed past the
//! caches), without the GIL.

use std::sync::OnceLock;

use amari_gpu::host::{cpu::hardware_threads, HostPool};
use amari_gpu::Error;
use numpy::{PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::writable;
use crate::errors::to_pyerr;

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
        Some(pool) => pool.copy_rows(dst, src, 1),
        None => {
            dst.copy_from_slice(src);
            Ok(())
        }
    });
    copied.map_err(|e| to_pyerr(py, e))
}
