//! Profiles as Python sees them: the events, the calls, the summary and the Chrome trace of
//! an active or finished profile, converted to plain Python values.

use std::sync::Arc;

use amari_gpu::profile::{chrome_trace, summarize, Profiler, Summary};
use amari_gpu::MultiGpuContext;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::context::PyContext;
use crate::errors::to_pyerr;

/// A recorded (or recording) profile of a context's calls.
#[pyclass(module = "amari_gpu._native", name = "Profile", frozen)]
pub struct PyProfile {
    profiler: Arc<Profiler>,
    ctx: Arc<MultiGpuContext>,
}

fn summary_dict<'py>(py: Python<'py>, s: &Summary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("calls", s.calls)?;
    d.set_item("makespan_s", s.makespan_s)?;
    d.set_item("lower_bound_s", s.lower_bound_s)?;
    d.set_item("efficiency", s.efficiency)?;
    d.set_item("imbalance", s.imbalance)?;
    d.set_item("overhead_fraction", s.overhead_fraction)?;
    d.set_item("bottleneck", s.bottleneck)?;
    d.set_item("figures", s.figures.clone())?;
    let devices = PyDict::new(py);
    for dev in &s.devices {
        let e = PyDict::new(py);
        e.set_item("busy_s", dev.busy_s)?;
        e.set_item("utilization", dev.utilization)?;
        e.set_item("kernel_s", dev.kernel_s)?;
        e.set_item("transfer_s", dev.transfer_s)?;
        e.set_item("wait_s", dev.wait_s)?;
        e.set_item("items", dev.items)?;
        e.set_item("items_per_s", dev.items_per_s)?;
        e.set_item("bytes", dev.bytes)?;
        e.set_item("bytes_per_s", dev.bytes_per_s)?;
        e.set_item("chunks", dev.chunks)?;
        e.set_item("retries", dev.retries)?;
        devices.set_item(dev.device, e)?;
    }
    d.set_item("devices", devices)?;
    Ok(d)
}

#[pymethods]
impl PyProfile {
    /// Every event so far, ordered by start time.
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.profiler
            .events()
            .iter()
            .map(|e| {
                let d = PyDict::new(py);
                d.set_item("device", e.device)?;
                d.set_item("kind", e.kind.name())?;
                d.set_item("chunk", e.chunk)?;
                d.set_item("call", e.call)?;
                d.set_item("start_s", e.start_s)?;
                d.set_item("duration_s", e.duration_s)?;
                d.set_item("bytes", e.bytes)?;
                d.set_item("items", e.items)?;
                d.set_item("clock", e.clock.name())?;
                Ok(d)
            })
            .collect()
    }

    /// Every call so far: kernel, items, strategy, the plan's lower bound and estimate.
    fn calls<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.profiler
            .calls()
            .iter()
            .map(|c| {
                let d = PyDict::new(py);
                d.set_item("kernel", &c.kernel)?;
                d.set_item("items", c.items)?;
                d.set_item("strategy", &c.strategy)?;
                d.set_item("lower_bound_s", c.lower_bound_s)?;
                d.set_item("estimated_makespan_s", c.estimated_makespan_s)?;
                Ok(d)
            })
            .collect()
    }

    /// The summary of the events so far.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        summary_dict(
            py,
            &summarize(&self.profiler.events(), &self.profiler.calls()),
        )
    }

    /// The Chrome trace (Trace Event Format) as a JSON string.
    fn chrome_trace(&self) -> String {
        let devices = self.ctx.devices();
        let names = |d: usize| {
            devices.get(d).map_or_else(String::new, |dev| {
                format!("{} ({})", dev.adapter.name, dev.adapter.backend)
            })
        };
        chrome_trace(&self.profiler.events(), &names).to_string()
    }
}

/// Starts a profile on `ctx`.
#[pyfunction]
fn profile_start(py: Python<'_>, ctx: &PyContext) -> PyResult<PyProfile> {
    let profiler = ctx.inner.start_profile().map_err(|e| to_pyerr(py, e))?;
    Ok(PyProfile {
        profiler,
        ctx: Arc::clone(&ctx.inner),
    })
}

/// Stops the active profile of `ctx` (nothing happens if none is active).
#[pyfunction]
fn profile_stop(ctx: &PyContext) {
    ctx.inner.stop_profile();
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProfile>()?;
    m.add_function(wrap_pyfunction!(profile_start, m)?)?;
    m.add_function(wrap_pyfunction!(profile_stop, m)?)?;
    Ok(())
}
