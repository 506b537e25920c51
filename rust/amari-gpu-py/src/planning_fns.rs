//! The core's planner and profile writers as pure functions, for callers that hold no
//! context: a cluster's driver plans a call over its nodes (each one device, described by a
//! `DeviceModel` built from what the node measured), cuts the call into the core's chunk
//! grid, and summarises and traces the timelines its nodes recorded.

use std::collections::BTreeMap;

use amari_gpu::profile::{
    chrome_trace_merged, summarize, CallRecord, Clock, Event, Kind, TraceProcess, UserCall,
};
use amari_gpu::{DeviceModel, Strategy, Workload};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::context::WorkloadFields;
use crate::errors::to_pyerr;
use crate::plans::plan_record;
use crate::profile::summary_dict;

/// A device model read from a dict with one key per field of the core's `DeviceModel`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ModelFields {
    device: usize,
    group: usize,
    launch_latency_s: f64,
    h2d_bytes_per_s: f64,
    d2h_bytes_per_s: f64,
    flops_per_s: f64,
    correction: f64,
    uncertainty: f64,
    memory_budget_bytes: Option<u64>,
    max_binding_bytes: u64,
    group_speedup: f64,
    group_members: usize,
}

impl From<ModelFields> for DeviceModel {
    fn from(m: ModelFields) -> Self {
        DeviceModel {
            device: m.device,
            group: m.group,
            launch_latency_s: m.launch_latency_s,
            h2d_bytes_per_s: m.h2d_bytes_per_s,
            d2h_bytes_per_s: m.d2h_bytes_per_s,
            flops_per_s: m.flops_per_s,
            correction: m.correction,
            uncertainty: m.uncertainty,
            memory_budget_bytes: m.memory_budget_bytes,
            max_binding_bytes: m.max_binding_bytes,
            group_speedup: m.group_speedup,
            group_members: m.group_members,
        }
    }
}

/// The plan the core's partitioner makes for `workload` cut into chunks of `chunk_items`
/// items over `models` (one per device, `device` its id in the plan) with `strategy`.
#[pyfunction]
fn plan_models<'py>(
    py: Python<'py>,
    workload: WorkloadFields,
    chunk_items: u64,
    models: Vec<ModelFields>,
    strategy: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let strategy = Strategy::parse(strategy).map_err(|e| to_pyerr(py, e))?;
    let models: Vec<DeviceModel> = models.into_iter().map(DeviceModel::from).collect();
    let plan =
        amari_gpu::partition::plan(&Workload::from(workload), chunk_items, &models, strategy)
            .map_err(|e| to_pyerr(py, e))?;
    plan_record(py, &plan)
}

/// Items per chunk of the core's chunk grid for a problem of `items` items moving
/// `bytes_per_item` bytes, the widest binding holding `widest_bytes_per_item` per item (a
/// function of the problem only).
#[pyfunction]
fn chunk_items_for(items: u64, bytes_per_item: f64, widest_bytes_per_item: f64) -> u64 {
    amari_gpu::chunk_items_for(items, bytes_per_item, widest_bytes_per_item)
}

/// A recorded step, as a profile's `events()` lists it.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct EventFields {
    device: Option<usize>,
    kind: String,
    chunk: Option<u64>,
    call: u64,
    start_s: f64,
    duration_s: f64,
    bytes: u64,
    items: u64,
    clock: String,
}

impl EventFields {
    fn event(self) -> amari_gpu::Result<Event> {
        Ok(Event {
            device: self.device,
            kind: Kind::parse("events: kind", &self.kind)?,
            chunk: self.chunk,
            call: self.call,
            start_s: self.start_s,
            duration_s: self.duration_s,
            bytes: self.bytes,
            items: self.items,
            clock: Clock::parse("events: clock", &self.clock)?,
        })
    }
}

/// A kernel call, as a profile's `kernel_calls()` lists it.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct KernelCallFields {
    kernel: String,
    items: u64,
    flops_per_item: f64,
    bytes_per_item: f64,
    strategy: String,
    lower_bound_s: f64,
    estimated_makespan_s: f64,
}

impl From<KernelCallFields> for CallRecord {
    fn from(c: KernelCallFields) -> Self {
        CallRecord {
            kernel: c.kernel,
            items: c.items,
            flops_per_item: c.flops_per_item,
            bytes_per_item: c.bytes_per_item,
            strategy: c.strategy,
            lower_bound_s: c.lower_bound_s,
            estimated_makespan_s: c.estimated_makespan_s,
        }
    }
}

/// A user call: its method and arguments, span, and the indices of its kernel calls.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct UserCallFields {
    method: String,
    args: String,
    start_s: f64,
    end_s: Option<f64>,
    kernel_calls: Vec<u64>,
}

impl From<UserCallFields> for UserCall {
    fn from(u: UserCallFields) -> Self {
        UserCall {
            method: u.method,
            args: u.args,
            start_s: u.start_s,
            end_s: u.end_s,
            kernel_calls: u.kernel_calls,
        }
    }
}

/// One process of a merged trace.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ProcessFields {
    pid: u64,
    label: String,
    events: Vec<EventFields>,
    kernel_calls: Vec<KernelCallFields>,
    calls: Vec<UserCallFields>,
    names: BTreeMap<usize, String>,
}

/// Events, kernel calls and user calls as the core's records.
type Timeline = (Vec<Event>, Vec<CallRecord>, Vec<UserCall>);

fn timeline(
    py: Python<'_>,
    events: Vec<EventFields>,
    kernel_calls: Vec<KernelCallFields>,
    calls: Vec<UserCallFields>,
) -> PyResult<Timeline> {
    let events = (events.into_iter())
        .map(EventFields::event)
        .collect::<amari_gpu::Result<Vec<_>>>()
        .map_err(|e| to_pyerr(py, e))?;
    let kernel_calls = kernel_calls.into_iter().map(CallRecord::from).collect();
    Ok((
        events,
        kernel_calls,
        calls.into_iter().map(UserCall::from).collect(),
    ))
}

/// The core's summary of a timeline recorded elsewhere (events on one clock, devices by
/// id): as a profile's `summary()`.
#[pyfunction]
fn profile_summary<'py>(
    py: Python<'py>,
    events: Vec<EventFields>,
    kernel_calls: Vec<KernelCallFields>,
    calls: Vec<UserCallFields>,
) -> PyResult<Bound<'py, PyDict>> {
    let (events, kernel_calls, calls) = timeline(py, events, kernel_calls, calls)?;
    summary_dict(py, &summarize(&events, &kernel_calls, &calls))
}

/// One Chrome trace (JSON) of several processes' timelines on one clock: each under its
/// pid and label, with the core's tracks and overlap lanes for its own timeline.
#[pyfunction]
fn chrome_trace_of(py: Python<'_>, processes: Vec<ProcessFields>) -> PyResult<String> {
    let processes = (processes.into_iter())
        .map(|p| {
            let (events, calls, users) = timeline(py, p.events, p.kernel_calls, p.calls)?;
            Ok(TraceProcess {
                pid: p.pid,
                label: p.label,
                events,
                calls,
                users,
                names: p.names,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(chrome_trace_merged(&processes).to_string())
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan_models, m)?)?;
    m.add_function(wrap_pyfunction!(chunk_items_for, m)?)?;
    m.add_function(wrap_pyfunction!(profile_summary, m)?)?;
    m.add_function(wrap_pyfunction!(chrome_trace_of, m)?)?;
    Ok(())
}
