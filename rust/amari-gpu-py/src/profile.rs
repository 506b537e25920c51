//! Profiles as Python sees them: the events, the user calls and the kernel calls they made,
//! the summary and the Chrome trace of an active or finished profile, converted to plain
//! Python values; and the opening and closing of a user call.

use std::collections::BTreeMap;
use std::sync::Arc;

use amari_gpu::profile::{chrome_trace, summarize, summarize_calls, CallRecord, Profiler, Summary};
use amari_gpu::MultiGpuContext;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::context::PyContext;
use crate::errors::to_pyerr;
use crate::fields::fields;

/// A recorded (or recording) profile of a context's calls.
#[pyclass(module = "amari_gpu._native", name = "Profile", frozen)]
pub struct PyProfile {
    profiler: Arc<Profiler>,
    ctx: Arc<MultiGpuContext>,
}

pub(crate) fn summary_dict<'py>(py: Python<'py>, s: &Summary) -> PyResult<Bound<'py, PyDict>> {
    let devices = PyDict::new(py);
    for dev in &s.devices {
        let entry = fields!(py, dev; busy_s, utilization, kernel_s, transfer_s, wait_s, items,
            items_per_s, bytes, bytes_per_s, chunks, retries)?;
        devices.set_item(dev.device, entry)?;
    }
    fields!(py, s; calls, kernel_calls, makespan_s, predicted_lower_bound_s, efficiency, imbalance, overhead_fraction,
        bottleneck, figures;
        "devices" => devices)
}

fn kernel_call_dict<'py>(
    py: Python<'py>,
    index: u64,
    c: &CallRecord,
) -> PyResult<Bound<'py, PyDict>> {
    fields!(py, c; kernel, items, flops_per_item, bytes_per_item, strategy, lower_bound_s,
        estimated_makespan_s; "call" => index)
}

impl PyProfile {
    fn device_name(&self, d: usize) -> String {
        self.ctx.devices().get(d).map_or_else(String::new, |dev| {
            format!("{} ({})", dev.adapter.name, dev.adapter.backend)
        })
    }
}

#[pymethods]
impl PyProfile {
    /// Every event so far, ordered by start time.
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.profiler
            .events()
            .iter()
            .map(|e| {
                fields!(py, e; device, chunk, call, start_s, duration_s, bytes, items;
                    "kind" => e.kind.name(),
                    "clock" => e.clock.name())
            })
            .collect()
    }

    /// Every user call so far (see `CallDict`), in the order they began.
    fn calls<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let kernel_calls = self.profiler.calls();
        let users = self.profiler.user_calls();
        summarize_calls(&self.profiler.events(), &kernel_calls, &users)
            .iter()
            .map(|c| {
                let made = (c.call.kernel_calls.iter())
                    .filter_map(|&k| Some(kernel_call_dict(py, k, kernel_calls.get(k as usize)?)))
                    .collect::<PyResult<Vec<_>>>()?;
                let plan = fields!(py, c; lower_bound_s, estimated_makespan_s;
                    "strategy" => c.strategies.join(", "))?;
                fields!(py, c; start_s, end_s, device_s;
                    "name" => c.call.name(),
                    "method" => &c.call.method,
                    "args" => &c.call.args,
                    "kernel_calls" => made,
                    "plan" => plan)
            })
            .collect()
    }

    /// Every kernel call so far: kernel, items, strategy, the plan's lower bound and
    /// estimate, and its index (`call` in events).
    fn kernel_calls<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        (0u64..)
            .zip(self.profiler.calls().iter())
            .map(|(k, c)| kernel_call_dict(py, k, c))
            .collect()
    }

    /// Opens a user call of `method` on `args` on the calling thread; its index, or None
    /// when the thread is already in one (a call inside another belongs to the outer one).
    fn begin_call(&self, method: &str, args: &str) -> Option<u64> {
        self.profiler.begin_call(method, args)
    }

    /// Closes user call `index` (opened on this thread).
    fn end_call(&self, index: u64) {
        self.profiler.end_call(index);
    }

    /// The summary of the events so far.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = &self.profiler;
        summary_dict(py, &summarize(&p.events(), &p.calls(), &p.user_calls()))
    }

    /// The Chrome trace (Trace Event Format) as a JSON string.
    fn chrome_trace(&self) -> String {
        let p = &self.profiler;
        let names = |d| self.device_name(d);
        chrome_trace(&p.events(), &p.calls(), &p.user_calls(), &names).to_string()
    }

    /// Each device of the context, by id, as "<adapter name> (<backend>)".
    fn device_names(&self) -> BTreeMap<usize, String> {
        (0..self.ctx.devices().len())
            .map(|d| (d, self.device_name(d)))
            .collect()
    }
}

/// Starts a profile on `ctx`.
#[pyfunction]
fn profile_start(py: Python<'_>, ctx: &PyContext) -> PyResult<PyProfile> {
    let inner = ctx.context(py)?;
    let profiler = inner.start_profile().map_err(|e| to_pyerr(py, e))?;
    Ok(PyProfile {
        profiler,
        ctx: inner,
    })
}

/// Stops the active profile of `ctx` (nothing happens if none is active).
#[pyfunction]
fn profile_stop(py: Python<'_>, ctx: &PyContext) {
    // Nothing to stop on a closed context.
    if let Ok(inner) = ctx.context(py) {
        inner.stop_profile();
    }
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProfile>()?;
    m.add_function(wrap_pyfunction!(profile_start, m)?)?;
    m.add_function(wrap_pyfunction!(profile_stop, m)?)?;
    Ok(())
}
