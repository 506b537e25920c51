//! The one way core work is run from Python: with the GIL released, core errors turned into
//! Python exceptions, and a pending Ctrl-C raised once the devices are done.

use pyo3::prelude::*;

use crate::errors::to_pyerr;

/// Runs `work` without the GIL and maps its outcome.
pub fn run_detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> amari_gpu::Result<T> + Send,
{
    let outcome = py.detach(work);
    py.check_signals()?;
    outcome.map_err(|e| to_pyerr(py, e))
}
