//! `adapters()`: every adapter as the package's `AdapterInfo` (its one description in
//! Python); `default_selection()`: which of them a default context uses, and why;
//! `backend_unavailable_reason()`: why a backend has no adapter here.

use amari_gpu::AdapterInfo;
use pyo3::prelude::*;

use crate::fields::fields;
use crate::plans::record;

/// An adapter description as `amari_gpu._adapters.AdapterInfo`.
pub fn adapter_record<'py>(py: Python<'py>, info: &AdapterInfo) -> PyResult<Bound<'py, PyAny>> {
    let fields = fields!(py, info; index, name, vendor, vendor_id, device_id, backend,
        device_type, driver, driver_info, pci_bus_id, limits, features, same_device_as);
    record(py, "amari_gpu._adapters", "AdapterInfo", fields)
}

/// Every adapter of every native backend, preferred backends first.
#[pyfunction]
pub fn adapters(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyAny>>> {
    let infos = py.detach(amari_gpu::adapters);
    infos.iter().map(|info| adapter_record(py, info)).collect()
}

/// For every adapter, in `adapters()` order: whether the default selection
/// (`MultiGpuContext()`) uses it, and why (or why not).
#[pyfunction]
pub fn default_selection(py: Python<'_>) -> PyResult<Vec<(bool, String)>> {
    py.detach(|| amari_gpu::context::explain_selection(&amari_gpu::ContextOptions::default()))
        .map_err(|e| crate::errors::to_pyerr(py, e))
}

/// Why `backend` has no adapter on this machine (the core's words: a platform-only backend
/// says so, else which driver is missing); empty for the host device's backend.
#[pyfunction]
pub fn backend_unavailable_reason(backend: &str) -> String {
    amari_gpu::adapter::backend_unavailable_reason(backend)
}
