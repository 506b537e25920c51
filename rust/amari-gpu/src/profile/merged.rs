//! Timelines recorded elsewhere, brought together: the names of steps and clocks read back
//! (a recorded event crosses a process boundary as plain values), and one Chrome trace of
//! several processes (a cluster's driver and its nodes), each written by [`chrome_trace`]
//! with its own tracks and overlap lanes, then given its process id and label.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::calls::UserCall;
use super::timeline::{CallRecord, Clock, Event, Kind};
use super::trace::chrome_trace;
use crate::error::{Error, Result};

const KINDS: [Kind; 7] = [
    Kind::Plan,
    Kind::Upload,
    Kind::Kernel,
    Kind::Readback,
    Kind::Wait,
    Kind::Retry,
    Kind::Exchange,
];

impl Kind {
    /// The kind named `name` (as [`Kind::name`] writes it); `argument` names where it came
    /// from in the error.
    pub fn parse(argument: &str, name: &str) -> Result<Kind> {
        KINDS.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            let names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
            Error::invalid(argument, format!("expected one of {names:?}, got {name:?}"))
        })
    }
}

impl Clock {
    /// The clock named `name` (as [`Clock::name`] writes it); `argument` names where it
    /// came from in the error.
    pub fn parse(argument: &str, name: &str) -> Result<Clock> {
        [Clock::Host, Clock::Gpu]
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                Error::invalid(
                    argument,
                    format!("expected \"host\" or \"gpu\", got {name:?}"),
                )
            })
    }
}

/// One process of a merged trace: its id and label, its timeline (times on one clock
/// shared by every process of the trace), and its devices' names by id.
#[derive(Debug, Clone, Default)]
pub struct TraceProcess {
    /// The process id in the trace.
    pub pid: u64,
    /// The process's name in the trace, e.g. `node 0: 10.0.0.2`.
    pub label: String,
    /// Its steps.
    pub events: Vec<Event>,
    /// Its kernel calls (`call` of its events indexes them).
    pub calls: Vec<CallRecord>,
    /// The user calls made on it (their slices head its "calls" track).
    pub users: Vec<UserCall>,
    /// Its devices' names, by device id (an id not named shows as `?`).
    pub names: BTreeMap<usize, String>,
}

/// One Chrome trace of `processes`: each under its pid and label, with the tracks
/// [`chrome_trace`] gives its own timeline.
pub fn chrome_trace_merged(processes: &[TraceProcess]) -> Value {
    let mut merged = Vec::new();
    for p in processes {
        let names = |d: usize| p.names.get(&d).cloned().unwrap_or_else(|| "?".into());
        let trace = chrome_trace(&p.events, &p.calls, &p.users, &names);
        let Value::Object(mut trace) = trace else {
            continue;
        };
        let Some(Value::Array(events)) = trace.remove("traceEvents") else {
            continue;
        };
        for mut e in events {
            e["pid"] = json!(p.pid);
            if e["name"] == "process_name" {
                e["args"]["name"] = json!(p.label);
            }
            merged.push(e);
        }
    }
    json!({"traceEvents": merged, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(device: usize, start_s: f64) -> Event {
        Event {
            device: Some(device),
            kind: Kind::Kernel,
            chunk: Some(0),
            call: 0,
            start_s,
            duration_s: 1.0,
            bytes: 0,
            items: 4,
            clock: Clock::Host,
        }
    }

    #[test]
    fn names_read_back_as_written() {
        for k in KINDS {
            assert_eq!(Kind::parse("kind", k.name()).unwrap(), k);
        }
        assert_eq!(Clock::parse("clock", "gpu").unwrap(), Clock::Gpu);
        let e = Kind::parse("events[3].kind", "kernels").unwrap_err();
        assert!(e.to_string().contains("events[3].kind"), "{e}");
        assert!(Clock::parse("clock", "wall").is_err());
    }

    #[test]
    fn each_process_keeps_its_tracks_and_lanes_under_its_own_pid() {
        let node = TraceProcess {
            pid: 1,
            label: "node 0: 127.0.0.1".into(),
            // Two overlapping kernels on one device: a second lane, as in one context.
            events: vec![kernel(0, 0.0), kernel(0, 0.5)],
            names: BTreeMap::from([(0, "lavapipe (vulkan)".to_string())]),
            ..TraceProcess::default()
        };
        let driver = TraceProcess {
            label: "driver".into(),
            users: vec![UserCall {
                method: "geometric_product".into(),
                args: "4×8".into(),
                start_s: 0.0,
                end_s: Some(2.0),
                kernel_calls: vec![],
            }],
            ..TraceProcess::default()
        };
        let trace = chrome_trace_merged(&[driver, node]);
        let list = trace["traceEvents"].as_array().unwrap();
        let label = |pid: u64| {
            list.iter()
                .find(|e| e["name"] == "process_name" && e["pid"] == pid)
                .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        };
        assert_eq!(label(0).as_deref(), Some("driver"));
        assert_eq!(label(1).as_deref(), Some("node 0: 127.0.0.1"));
        let threads: Vec<(u64, &str)> = list
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            threads,
            [
                (0, "calls — user calls, kernel calls under them"),
                (1, "device 0 queue — lavapipe (vulkan)"),
                (1, "device 0 queue — lavapipe (vulkan) (lane 2)"),
            ]
        );
        let call = list.iter().find(|e| e["cat"] == "call").unwrap();
        assert_eq!(
            (call["pid"].as_u64(), call["name"].as_str()),
            (Some(0), Some("geometric_product(4×8)"))
        );
    }
}
