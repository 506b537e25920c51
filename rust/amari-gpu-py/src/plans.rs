//! Conversions of plans, capabilities and statistics into plain dicts (the Python package
//! wraps them in dataclasses).

use amari_gpu::capabilities::Capabilities;
use amari_gpu::context::DeviceStats;
use amari_gpu::Plan;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A plan as a dict; `assignments` is a list of dicts.
pub fn plan_dict<'py>(py: Python<'py>, plan: &Plan) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("strategy", plan.strategy.name())?;
    d.set_item("requested_strategy", plan.requested.name())?;
    d.set_item("items", plan.items)?;
    d.set_item("chunk_items", plan.chunk_items)?;
    d.set_item("n_chunks", plan.n_chunks)?;
    d.set_item("estimated_makespan_s", plan.estimated_makespan_s)?;
    d.set_item("lower_bound_s", plan.lower_bound_s)?;
    d.set_item("efficiency", plan.efficiency)?;
    let assignments = plan
        .assignments
        .iter()
        .map(|a| {
            let w = PyDict::new(py);
            w.set_item("device_id", a.device)?;
            w.set_item("start", a.start)?;
            w.set_item("stop", a.stop)?;
            w.set_item("items", a.items)?;
            w.set_item("first_chunk", a.first_chunk)?;
            w.set_item("chunks", a.chunks)?;
            w.set_item("estimated_seconds", a.estimated_seconds)?;
            Ok(w)
        })
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("assignments", assignments)?;
    Ok(d)
}

/// Capabilities as a dict with the public field names.
pub fn capabilities_dict<'py>(
    py: Python<'py>,
    device: usize,
    c: &Capabilities,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("device_id", device)?;
    d.set_item("memory_bandwidth_gb_s", c.memory_bandwidth_gb_s)?;
    d.set_item("kernel_bandwidth_gb_s", c.kernel_bandwidth_gb_s)?;
    d.set_item("transfer_gb_s", c.transfer_gb_s)?;
    d.set_item("h2d_gb_s", c.h2d_gb_s)?;
    d.set_item("d2h_gb_s", c.d2h_gb_s)?;
    d.set_item("launch_latency_s", c.launch_latency_s)?;
    d.set_item("throughput", c.throughput.clone())?;
    d.set_item("peak_gflops", c.peak_gflops)?;
    d.set_item("timestamp_cost_s", c.timestamp_cost_s)?;
    d.set_item("max_buffer_bytes", c.max_buffer_bytes)?;
    d.set_item("max_storage_binding_bytes", c.max_storage_binding_bytes)?;
    d.set_item("memory_budget_bytes", c.memory_budget_bytes)?;
    d.set_item("device_type", &c.device_type)?;
    d.set_item("backend", &c.backend)?;
    d.set_item("from_cache", c.from_cache)?;
    d.set_item("shares_hardware_with", c.shares_hardware_with.clone())?;
    d.set_item("group_speedup", c.group_speedup)?;
    Ok(d)
}

/// Per-device statistics as a dict.
pub fn stats_dict<'py>(py: Python<'py>, s: &DeviceStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("device_id", s.device)?;
    d.set_item("bytes_moved", s.counters.bytes_up + s.counters.bytes_down)?;
    d.set_item("bytes_up", s.counters.bytes_up)?;
    d.set_item("bytes_down", s.counters.bytes_down)?;
    d.set_item("items_done", s.counters.items)?;
    d.set_item("chunks_done", s.counters.chunks)?;
    d.set_item("failed_chunks", s.counters.failed_chunks)?;
    d.set_item("busy_s", s.counters.busy_s)?;
    d.set_item("memory_in_use_bytes", s.memory_in_use_bytes)?;
    d.set_item("healthy", s.healthy)?;
    d.set_item("reason", s.reason.clone())?;
    Ok(d)
}
