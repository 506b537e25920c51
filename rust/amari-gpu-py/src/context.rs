//! The native context class: opens devices, plans workloads and runs kernels on borrowed
//! numpy arrays with the GIL released.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use amari_gpu::{ContextOptions, Family, MultiGpuContext, Strategy, Workload};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::adapters::adapter_record;
use crate::detach::{run_detached, ShortCalls};
use crate::errors::to_pyerr;
use crate::fields::fields;
use crate::plans::{capabilities_record, plan_record, record, stats_dict, LastPlan};

/// The context's options, read from a dict with one key per field (the Python package
/// checks their types and builds it).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Options {
    backends: Option<Vec<String>>,
    device_types: Option<Vec<String>>,
    adapters: Option<Vec<usize>>,
    max_devices: Option<usize>,
    devices_per_adapter: usize,
    chunk_items: Option<usize>,
    sync_timeout_ms: Option<u64>,
    strategy: String,
    gpu_timestamps: Option<bool>,
    host_threads: Option<usize>,
}

/// A workload read from any object with the attributes of `amari_gpu.Workload`.
#[derive(FromPyObject)]
pub(crate) struct WorkloadFields {
    kernel: String,
    items: u64,
    bytes_in_per_item: f64,
    bytes_out_per_item: f64,
    flops_per_item: f64,
}

impl From<WorkloadFields> for Workload {
    fn from(w: WorkloadFields) -> Self {
        Workload {
            family: Family::of(&w.kernel),
            kernel: w.kernel,
            items: w.items,
            bytes_in_per_item: w.bytes_in_per_item,
            bytes_out_per_item: w.bytes_out_per_item,
            flops_per_item: w.flops_per_item,
            dtype: amari_gpu::Dtype::F32,
        }
    }
}

/// Checks a workload's fields with the core's rule (what the Python `Workload` runs when
/// it is constructed).
#[pyfunction]
pub(crate) fn check_workload(py: Python<'_>, workload: WorkloadFields) -> PyResult<()> {
    Workload::from(workload)
        .validate_fields()
        .map_err(|e| to_pyerr(py, e))
}

/// Devices opened on the selected adapters.
#[pyclass(module = "amari_gpu._native", name = "Context", frozen)]
pub struct PyContext {
    /// The open context; `None` once closed.
    inner: RwLock<Option<Arc<MultiGpuContext>>>,
    /// Default strategy of calls that name none; `set_strategy` changes it.
    strategy: Mutex<Strategy>,
    /// Which call sites and sizes took only the fast path last time (run on the calling
    /// thread next time).
    pub(crate) short: ShortCalls,
    /// The last plan record of its calls, reused while they follow the same plan.
    pub(crate) plans: LastPlan,
}

impl PyContext {
    /// The open context, or an `AmariGpuError` saying it is closed. Calls hold their own
    /// reference: a call running when the context is closed completes first.
    pub(crate) fn context(&self, py: Python<'_>) -> PyResult<Arc<MultiGpuContext>> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| to_pyerr(py, amari_gpu::Error::Closed))
    }

    /// The strategy named `name`, or the context's default when `None`.
    pub(crate) fn strategy_or_default(
        &self,
        py: Python<'_>,
        name: Option<&str>,
    ) -> PyResult<Option<Strategy>> {
        match name {
            Some(name) => Strategy::parse(name).map(Some).map_err(|e| to_pyerr(py, e)),
            None => Ok(Some(
                *self.strategy.lock().unwrap_or_else(PoisonError::into_inner),
            )),
        }
    }
}

#[pymethods]
impl PyContext {
    #[new]
    fn new(py: Python<'_>, options: Options) -> PyResult<Self> {
        let strategy = Strategy::parse(&options.strategy).map_err(|e| to_pyerr(py, e))?;
        let options = ContextOptions {
            backends: options.backends,
            device_types: options.device_types,
            adapters: options.adapters,
            max_devices: options.max_devices,
            devices_per_adapter: options.devices_per_adapter,
            chunk_items: options.chunk_items,
            sync_timeout_ms: options.sync_timeout_ms,
            strategy,
            gpu_timestamps: options.gpu_timestamps,
            host_threads: options.host_threads,
        };
        let inner = run_detached(py, move || MultiGpuContext::new(options))?;
        Ok(PyContext {
            inner: RwLock::new(Some(Arc::new(inner))),
            strategy: Mutex::new(strategy),
            short: ShortCalls::default(),
            plans: LastPlan::default(),
        })
    }

    /// Releases the devices: later calls raise `AmariGpuError` (the context is closed). A
    /// call running on another thread completes first (it holds the devices until it
    /// returns). Closing again does nothing.
    fn close(&self, py: Python<'_>) {
        let taken = self
            .inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(ctx) = taken {
            // Dropping the last reference waits for the devices' queues; without the GIL.
            py.detach(move || ctx.close());
        }
        // The memory kept for new outputs goes back to the OS with the context.
        crate::pool::release_kept();
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// The default strategy of calls that name none.
    #[getter]
    fn strategy(&self) -> &'static str {
        self.strategy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .name()
    }

    /// Changes the default strategy of later calls; on a closed context, raises as every
    /// call does.
    fn set_strategy(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.context(py)?;
        let strategy = Strategy::parse(name).map_err(|e| to_pyerr(py, e))?;
        *self.strategy.lock().unwrap_or_else(PoisonError::into_inner) = strategy;
        Ok(())
    }

    /// The open devices as the package's `amari_gpu.context.Device` (its one description in
    /// Python): `id`, `adapter` (an `AdapterInfo`), `gpu_timestamps`, `dtypes` (numpy's names
    /// of the dtypes it computes in), and this context (which answers the device's
    /// `capabilities`).
    fn devices<'py>(slf: &Bound<'py, Self>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let py = slf.py();
        slf.get()
            .context(py)?
            .devices()
            .iter()
            .map(|dev| {
                let fields = fields!(py, dev; id;
                    "adapter" => adapter_record(py, &dev.adapter)?,
                    "gpu_timestamps" => dev.timestamp_period_ns.is_some(),
                    "dtypes" => PyTuple::new(py, dev.dtypes.iter().map(|d| d.name()))?,
                    "_native" => slf);
                record(py, "amari_gpu.context", "Device", fields)
            })
            .collect()
    }

    /// What the selection chose when the context opened: `left_out` (one
    /// `amari_gpu.context.LeftOut` per adapter, or named backend without adapter, left out),
    /// `notes` (options that could not apply) and `summary` (the INFO line logged at open).
    fn selection<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let ctx = self.context(py)?;
        let chosen = ctx.selection();
        let left_out = chosen
            .left_out
            .iter()
            .map(|l| {
                let fields = fields!(py, l; adapter, name, backend, reason);
                record(py, "amari_gpu.context", "LeftOut", fields)
            })
            .collect::<PyResult<Vec<_>>>()?;
        let d = PyDict::new(py);
        d.set_item("left_out", left_out)?;
        d.set_item("notes", &chosen.notes)?;
        d.set_item("summary", &chosen.summary)?;
        Ok(d)
    }

    /// Measures (or loads) every device's capabilities.
    #[pyo3(signature = (force=false))]
    fn calibrate<'py>(&self, py: Python<'py>, force: bool) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let ctx = self.context(py)?;
        let caps = run_detached(py, move || ctx.calibrate(force))?;
        caps.iter()
            .enumerate()
            .map(|(id, c)| capabilities_record(py, id, c))
            .collect()
    }

    /// One device's capabilities (calibrating first if needed).
    fn capabilities<'py>(&self, py: Python<'py>, device_id: usize) -> PyResult<Bound<'py, PyAny>> {
        let ctx = self.context(py)?;
        let caps = run_detached(py, move || ctx.capabilities(device_id))?;
        capabilities_record(py, device_id, &caps)
    }

    /// The plan for a workload, without running it.
    #[pyo3(signature = (workload, strategy=None))]
    fn distribute_workload<'py>(
        &self,
        py: Python<'py>,
        workload: WorkloadFields,
        strategy: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let strategy = self.strategy_or_default(py, strategy)?;
        let workload = Workload::from(workload);
        let ctx = self.context(py)?;
        let plan = run_detached(py, move || ctx.distribute_workload(&workload, strategy))?;
        plan_record(py, &plan)
    }

    /// {device_id: {"healthy": bool, "reason": str | None}}.
    fn health<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, healthy, reason) in self.context(py)?.health() {
            let entry = PyDict::new(py);
            entry.set_item("healthy", healthy)?;
            entry.set_item("reason", reason)?;
            d.set_item(id, entry)?;
        }
        Ok(d)
    }

    /// Per-device counters, memory in use and health.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.context(py)?
            .stats()
            .iter()
            .map(|s| stats_dict(py, s))
            .collect()
    }

    /// Makes a device fail when it starts its next chunk after `after_chunks` more; with
    /// `hold`, its waits for its wgpu work stop ending instead, until `reset_health`.
    #[pyo3(signature = (device_id, after_chunks, hold=false))]
    fn inject_fault(
        &self,
        py: Python<'_>,
        device_id: usize,
        after_chunks: u64,
        hold: bool,
    ) -> PyResult<()> {
        let ctx = self.context(py)?;
        let done = if hold {
            ctx.inject_hold(device_id, after_chunks)
        } else {
            ctx.inject_fault(device_id, after_chunks)
        };
        done.map_err(|e| to_pyerr(py, e))
    }

    /// For tests of the grid rebalancer: judges a device's grid rounds as if it computed
    /// `cells_per_s` cells per second (`None` measures them again).
    fn inject_grid_rate(
        &self,
        py: Python<'_>,
        device_id: usize,
        cells_per_s: Option<f64>,
    ) -> PyResult<()> {
        self.context(py)?
            .inject_grid_rate(device_id, cells_per_s)
            .map_err(|e| to_pyerr(py, e))
    }

    /// Marks a device (or all) healthy again.
    #[pyo3(signature = (device_id=None))]
    fn reset_health(&self, py: Python<'_>, device_id: Option<usize>) -> PyResult<()> {
        self.context(py)?
            .reset_health(device_id)
            .map_err(|e| to_pyerr(py, e))
    }
}
