//! The native context class: opens devices, plans workloads and runs kernels on borrowed
//! numpy arrays with the GIL released.

use std::sync::Arc;

use amari_gpu::{ContextOptions, Family, MultiGpuContext, Strategy, Workload};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::adapters::adapter_dict;
use crate::arrays::parse_strategy;
use crate::detach::run_detached;
use crate::errors::to_pyerr;
use crate::plans::{capabilities_dict, plan_dict, stats_dict};

/// Devices opened on the selected adapters.
#[pyclass(module = "amari_gpu._native", name = "Context", frozen)]
pub struct PyContext {
    pub(crate) inner: Arc<MultiGpuContext>,
}

#[pymethods]
impl PyContext {
    #[new]
    #[pyo3(signature = (backends=None, device_types=None, adapters=None, max_devices=None, devices_per_adapter=1, chunk_items=None, sync_timeout_ms=None, strategy="auto", gpu_timestamps=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        backends: Option<Vec<String>>,
        device_types: Option<Vec<String>>,
        adapters: Option<Vec<usize>>,
        max_devices: Option<usize>,
        devices_per_adapter: usize,
        chunk_items: Option<usize>,
        sync_timeout_ms: Option<u64>,
        strategy: &str,
        gpu_timestamps: Option<bool>,
    ) -> PyResult<Self> {
        let strategy = Strategy::parse(strategy).map_err(|e| to_pyerr(py, e))?;
        let options = ContextOptions {
            backends,
            device_types,
            adapters,
            max_devices,
            devices_per_adapter,
            chunk_items,
            sync_timeout_ms,
            strategy,
            gpu_timestamps,
        };
        let inner = run_detached(py, move || MultiGpuContext::new(options))?;
        Ok(PyContext {
            inner: Arc::new(inner),
        })
    }

    /// The open devices as dicts: `id` and `adapter` (the adapter's description).
    fn devices<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .devices()
            .iter()
            .map(|dev| {
                let d = PyDict::new(py);
                d.set_item("id", dev.id)?;
                d.set_item("adapter", adapter_dict(py, &dev.adapter)?)?;
                d.set_item("gpu_timestamps", dev.timestamp_period_ns.is_some())?;
                Ok(d)
            })
            .collect()
    }

    /// Measures (or loads) every device's capabilities.
    #[pyo3(signature = (force=false))]
    fn calibrate<'py>(&self, py: Python<'py>, force: bool) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let ctx = Arc::clone(&self.inner);
        let caps = run_detached(py, move || ctx.calibrate(force))?;
        caps.iter()
            .enumerate()
            .map(|(id, c)| capabilities_dict(py, id, c))
            .collect()
    }

    /// One device's capabilities (calibrating first if needed).
    fn capabilities<'py>(&self, py: Python<'py>, device_id: usize) -> PyResult<Bound<'py, PyDict>> {
        let ctx = Arc::clone(&self.inner);
        let caps = run_detached(py, move || ctx.capabilities(device_id))?;
        capabilities_dict(py, device_id, &caps)
    }

    /// The plan for a workload, without running it.
    #[pyo3(signature = (kernel, items, bytes_in_per_item, bytes_out_per_item, flops_per_item, strategy=None))]
    #[allow(clippy::too_many_arguments)]
    fn distribute_workload<'py>(
        &self,
        py: Python<'py>,
        kernel: String,
        items: u64,
        bytes_in_per_item: f64,
        bytes_out_per_item: f64,
        flops_per_item: f64,
        strategy: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let strategy = parse_strategy(py, strategy)?;
        let workload = Workload {
            family: Family::of(&kernel),
            kernel,
            items,
            bytes_in_per_item,
            bytes_out_per_item,
            flops_per_item,
        };
        let ctx = Arc::clone(&self.inner);
        let plan = run_detached(py, move || ctx.distribute_workload(&workload, strategy))?;
        plan_dict(py, &plan)
    }

    /// {device_id: {"healthy": bool, "reason": str | None}}.
    fn health<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, healthy, reason) in self.inner.health() {
            let entry = PyDict::new(py);
            entry.set_item("healthy", healthy)?;
            entry.set_item("reason", reason)?;
            d.set_item(id, entry)?;
        }
        Ok(d)
    }

    /// Per-device counters, memory in use and health.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .stats()
            .iter()
            .map(|s| stats_dict(py, s))
            .collect()
    }

    /// Makes a device fail when it starts its next chunk after `after_chunks` more.
    fn inject_fault(&self, py: Python<'_>, device_id: usize, after_chunks: u64) -> PyResult<()> {
        self.inner
            .inject_fault(device_id, after_chunks)
            .map_err(|e| to_pyerr(py, e))
    }

    /// Marks a device (or all) healthy again.
    #[pyo3(signature = (device_id=None))]
    fn reset_health(&self, py: Python<'_>, device_id: Option<usize>) -> PyResult<()> {
        self.inner
            .reset_health(device_id)
            .map_err(|e| to_pyerr(py, e))
    }
}
