//! Conversions of plans, capabilities and statistics into plain dicts (the Python package
//! builds its dataclasses from them with `Class(**d)`; the stubs' TypedDicts name the keys).

use amari_gpu::capabilities::Capabilities;
use amari_gpu::context::DeviceStats;
use amari_gpu::Plan;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::fields::fields;

/// A plan as a dict; `assignments` is a list of dicts.
pub fn plan_dict<'py>(py: Python<'py>, plan: &Plan) -> PyResult<Bound<'py, PyDict>> {
    let assignments = plan
        .assignments
        .iter()
        .map(|a| {
            fields!(py, a; start, stop, items, first_chunk, chunks, estimated_seconds;
                "device_id" => a.device)
        })
        .collect::<PyResult<Vec<_>>>()?;
    fields!(py, plan; items, chunk_items, n_chunks, estimated_makespan_s, lower_bound_s, efficiency;
        "strategy" => plan.strategy.name(),
        "requested_strategy" => plan.requested.name(),
        "assignments" => assignments)
}

/// Capabilities as a dict with the public field names.
pub fn capabilities_dict<'py>(
    py: Python<'py>,
    device: usize,
    c: &Capabilities,
) -> PyResult<Bound<'py, PyDict>> {
    fields!(py, c;
        memory_bandwidth_gb_s, kernel_bandwidth_gb_s, transfer_gb_s, h2d_gb_s, d2h_gb_s,
        launch_latency_s, throughput, peak_gflops, timestamp_cost_s, max_buffer_bytes,
        max_storage_binding_bytes, memory_budget_bytes, device_type, backend, from_cache,
        shares_hardware_with, group_speedup;
        "device_id" => device)
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
