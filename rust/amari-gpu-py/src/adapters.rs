//! `adapters()`: every adapter as a plain dict (the Python package wraps it in `AdapterInfo`);
//! `default_selection()`: which of them a default context uses, and why.

use amari_gpu::AdapterInfo;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// An adapter description as a dict with the public field names.
pub fn adapter_dict<'py>(py: Python<'py>, info: &AdapterInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("index", info.index)?;
    d.set_item("name", &info.name)?;
    d.set_item("vendor", &info.vendor)?;
    d.set_item("vendor_id", info.vendor_id)?;
    d.set_item("device_id", info.device_id)?;
    d.set_item("backend", &info.backend)?;
    d.set_item("device_type", &info.device_type)?;
    d.set_item("driver", &info.driver)?;
    d.set_item("driver_info", &info.driver_info)?;
    d.set_item("pci_bus_id", &info.pci_bus_id)?;
    d.set_item("limits", info.limits.clone())?;
    d.set_item("features", info.features.clone())?;
    d.set_item("same_device_as", info.same_device_as)?;
    Ok(d)
}

/// Every adapter of every native backend, preferred backends first.
#[pyfunction]
pub fn adapters(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let infos = py.detach(amari_gpu::adapters);
    infos.iter().map(|info| adapter_dict(py, info)).collect()
}

/// For every adapter, in `adapters()` order: whether the default selection
/// (`MultiGpuContext()`) uses it, and why (or why not).
#[pyfunction]
pub fn default_selection(py: Python<'_>) -> PyResult<Vec<(bool, String)>> {
    py.detach(|| amari_gpu::context::explain_selection(&amari_gpu::ContextOptions::default()))
        .map_err(|e| crate::errors::to_pyerr(py, e))
}
