//! `host_add_max_limit()`: the host device's measured add/max issue rate, for the benches
//! that report a host kernel's fraction of it.

use std::collections::HashMap;

use pyo3::prelude::*;

use crate::detach::run_detached;

/// The add/max issue rate of the host at its SIMD level over `threads` threads (default:
/// every hardware thread): `{"pairs_per_second": float, "simd": str, "threads": int}`.
#[pyfunction]
#[pyo3(signature = (threads=None))]
pub fn host_add_max_limit(
    py: Python<'_>,
    threads: Option<usize>,
) -> PyResult<HashMap<&'static str, Py<PyAny>>> {
    let threads = threads.unwrap_or_else(amari_gpu::host::cpu::hardware_threads);
    let limit = run_detached(py, move || amari_gpu::host::limits::add_max_limit(threads))?;
    Ok(HashMap::from([
        (
            "pairs_per_second",
            limit
                .pairs_per_second
                .into_pyobject(py)?
                .into_any()
                .unbind(),
        ),
        (
            "simd",
            limit.level.name().into_pyobject(py)?.into_any().unbind(),
        ),
        (
            "threads",
            limit.threads.into_pyobject(py)?.into_any().unbind(),
        ),
    ]))
}
