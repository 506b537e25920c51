//! The core's `log` records, forwarded to Python's `logging` by pyo3-log: a record of the
//! core module `amari_gpu::calibration::context` goes to the Python logger
//! `amari_gpu.calibration.context`, a child of `amari_gpu`. Records of other crates (wgpu,
//! naga) are not forwarded.
//!
//! pyo3-log caches each Python logger's effective level the first time a record of that
//! module is seen, so that a disabled level costs no GIL. `amari_gpu._logging` empties that
//! cache (through `reset_log_levels`) whenever Python's `logging` empties its own level
//! cache, i.e. on every level change, so logging configured after the first call is seen.

use std::sync::OnceLock;

use log::LevelFilter;
use pyo3::prelude::*;
use pyo3_log::{Caching, Logger, ResetHandle};

static RESET: OnceLock<ResetHandle> = OnceLock::new();

/// Installs the bridge once per process (a second import in the same process keeps the
/// first; a logger installed by someone else is left in place).
pub fn install(py: Python<'_>) -> PyResult<()> {
    if RESET.get().is_some() {
        return Ok(());
    }
    let logger = Logger::new(py, Caching::LoggersAndLevels)?
        .filter(LevelFilter::Off)
        .filter_target("amari_gpu".to_owned(), LevelFilter::Debug);
    if let Ok(handle) = logger.install() {
        let _ = RESET.set(handle);
    }
    Ok(())
}

/// Forgets the cached levels of the `amari_gpu` loggers: called on every level change made
/// through Python's `logging`.
#[pyfunction]
fn reset_log_levels() {
    if let Some(handle) = RESET.get() {
        handle.reset();
    }
}

/// Installs the bridge and adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install(m.py())?;
    m.add_function(wrap_pyfunction!(reset_log_levels, m)?)?;
    Ok(())
}
