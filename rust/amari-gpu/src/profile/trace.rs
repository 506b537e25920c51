//! Chrome Trace Event Format export: complete ("X") events with durations, one track per
//! device queue (kernels) and one per host worker (uploads, readbacks, waits, retries), and
//! metadata naming them. Opens in Perfetto and chrome://tracing.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::timeline::{Event, Kind};

const PID: u64 = 1;
const HOST_TID: u64 = 0;

/// Track of an event: kernels on the device's queue track, host steps on its worker track.
fn track(event: &Event) -> u64 {
    match (event.device, event.kind) {
        (None, _) => HOST_TID,
        (Some(d), Kind::Kernel) => 2 * d as u64 + 1,
        (Some(d), _) => 2 * d as u64 + 2,
    }
}

fn track_name(tid: u64, names: &dyn Fn(usize) -> String) -> String {
    if tid == HOST_TID {
        return "host (planning, halo exchange)".to_string();
    }
    let device = ((tid - 1) / 2) as usize;
    if tid % 2 == 1 {
        format!("device {device} queue — {}", names(device))
    } else {
        format!("device {device} host worker")
    }
}

/// The trace as JSON; `names` describes a device (adapter and backend) for track names.
pub fn chrome_trace(events: &[Event], names: &dyn Fn(usize) -> String) -> Value {
    let mut trace = Vec::with_capacity(events.len() + 8);
    let mut tracks = BTreeSet::new();
    for e in events {
        let tid = track(e);
        tracks.insert(tid);
        let name = match e.chunk {
            Some(c) => format!("{} {c}", e.kind.name()),
            None => e.kind.name().to_string(),
        };
        trace.push(json!({
            "name": name,
            "cat": e.kind.name(),
            "ph": "X",
            "pid": PID,
            "tid": tid,
            "ts": e.start_s * 1e6,
            "dur": e.duration_s * 1e6,
            "args": {
                "device": e.device,
                "chunk": e.chunk,
                "call": e.call,
                "bytes": e.bytes,
                "items": e.items,
                "clock": e.clock.name(),
            },
        }));
    }
    trace.push(json!({"name": "process_name", "ph": "M", "pid": PID, "tid": HOST_TID, "args": {"name": "amari_gpu"}}));
    for tid in tracks {
        trace.push(json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": track_name(tid, names)}}));
        trace.push(json!({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}}));
    }
    json!({"traceEvents": trace, "displayTimeUnit": "ms"})
}
