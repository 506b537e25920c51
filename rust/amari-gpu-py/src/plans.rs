//! Records that cross to Python. Plans and capabilities are built as the package's frozen
//! dataclasses (`amari_gpu.planning.Plan`, `DeviceWorkload`, `Capabilities`), each the one
//! description of its record in Python (the stub names them as results); per-device
//! statistics are a plain dict (the stub's `StatsDict`).

use amari_gpu::capabilities::Capabilities;
use amari_gpu::context::DeviceStats;
use amari_gpu::Plan;
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::fields::fields;

/// A record of the Python package: `class` of `module` called with `fields` as keywords
/// (the module is loaded by then: the package imports `_native`, not the other way round).
pub fn record<'py>(
    py: Python<'py>,
    module: &str,
    class: &str,
    fields: PyResult<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    py.import(module)?.getattr(class)?.call((), Some(&fields?))
}

/// A plan as `amari_gpu.planning.Plan`; `assignments` a tuple of `DeviceWorkload`s.
pub fn plan_record<'py>(py: Python<'py>, plan: &Plan) -> PyResult<Bound<'py, PyAny>> {
    const PLANNING: &str = "amari_gpu.planning";
    let assignments = plan
        .assignments
        .iter()
        .map(|a| {
            let fields = fields!(py, a; start, stop, items, first_chunk, chunks, estimated_seconds;
                "device_id" => a.device);
            record(py, PLANNING, "DeviceWorkload", fields)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let fields = fields!(py, plan; items, chunk_items, n_chunks, estimated_makespan_s, lower_bound_s, efficiency, fast_path;
        "strategy" => plan.strategy.name(),
        "requested_strategy" => plan.requested.name(),
        "assignments" => PyTuple::new(py, assignments)?,
        "left_out" => PyTuple::new(py, &plan.left_out)?);
    record(py, PLANNING, "Plan", fields)
}

/// The last plan record a context made, reused while its calls follow the same plan (a
/// record is a frozen dataclass: building one is most of a small call's native time).
#[derive(Default)]
pub struct LastPlan(Mutex<Option<(Plan, Py<PyAny>)>>);

impl LastPlan {
    /// `plan` as a record: the last one when equal, else a new one (kept).
    pub fn record<'py>(&self, py: Python<'py>, plan: &Plan) -> PyResult<Bound<'py, PyAny>> {
        {
            let last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((kept, record)) = last.as_ref() {
                if kept == plan {
                    return Ok(record.bind(py).clone());
                }
            }
        }
        // Built with the lock released: building runs Python code, which may hand the GIL
        // to another thread of the same context that then waits here for the lock while
        // this one waits for the GIL back (a deadlock seen in the threaded tests).
        let record = plan_record(py, plan)?;
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((plan.clone(), record.clone().unbind()));
        Ok(record)
    }
}

/// Capabilities as `amari_gpu.planning.Capabilities`.
pub fn capabilities_record<'py>(
    py: Python<'py>,
    device: usize,
    c: &Capabilities,
) -> PyResult<Bound<'py, PyAny>> {
    let fields = fields!(py, c;
        memory_bandwidth_gb_s, kernel_bandwidth_gb_s, transfer_gb_s, h2d_gb_s, d2h_gb_s,
        launch_latency_s, throughput, peak_gflops, dtype_rates, timestamp_cost_s, max_buffer_bytes,
        max_storage_binding_bytes, memory_budget_bytes, device_type, backend, from_cache,
        shares_hardware_with, group_speedup;
        "device_id" => device);
    record(py, "amari_gpu.planning", "Capabilities", fields)
}

/// Per-device statistics as a dict.
pub fn stats_dict<'py>(py: Python<'py>, s: &DeviceStats) -> PyResult<Bound<'py, PyDict>> {
    let counters = &s.counters;
    fields!(py, s; memory_in_use_bytes, resident_bytes, user_pipelines, healthy, reason;
        "device_id" => s.device,
        "bytes_moved" => counters.bytes_up + counters.bytes_down,
        "bytes_up" => counters.bytes_up,
        "bytes_down" => counters.bytes_down,
        "items_done" => counters.items,
        "chunks_done" => counters.chunks,
        "failed_chunks" => counters.failed_chunks,
        "busy_s" => counters.busy_s)
}
