//! Chrome Trace Event Format export: complete ("X") events with durations on tracks where
//! they nest, and metadata naming the tracks. Opens in Perfetto and chrome://tracing.
//!
//! The first track, "calls", holds one slice per user call, named as it was called
//! (`shortest_paths(1000×1000)`), and under it a slice per kernel call it made, spanning
//! that kernel call's steps: a user call's slice spans all of them, so they nest in it.
//!
//! Perfetto drops an "X" slice that overlaps another on its track without nesting in it.
//! Steps that overlap on purpose therefore get tracks of their own: per device one for its
//! queue (kernels, GPU or host clock), one for its worker thread (uploads, waits,
//! readbacks: sequential on that thread) and one for re-runs of a failed device's chunks
//! (two in flight, so two may overlap); the host's own steps (planning, halo exchange, the
//! final gather) get one more. A step that still overlaps its track's slices without
//! nesting (GPU timestamps aligned a little late, calls made from several threads at once)
//! goes to the first extra lane of that track where it nests: nothing is dropped and
//! nothing is moved in time.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::calls::UserCall;
use super::summary::{kernel_spans, summarize_calls};
use super::timeline::{CallRecord, Event, Kind};

const PID: u64 = 1;

/// What a track holds, in display order under its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    /// User calls and the kernel calls they made.
    Calls,
    /// Host-wide steps (device `None`): planning, halo exchange, gathering a grid.
    Host,
    /// A device's kernels.
    Queue,
    /// A device's worker thread: uploads, waits, readbacks.
    Worker,
    /// Chunks a device re-ran for a failed one.
    Retries,
}

fn role(event: &Event) -> Role {
    match (event.device, event.kind) {
        (None, _) => Role::Host,
        (Some(_), Kind::Kernel) => Role::Queue,
        (Some(_), Kind::Retry) => Role::Retries,
        (Some(_), _) => Role::Worker,
    }
}

/// A track: device (host first), role, lane (0, or more when slices had to move aside).
type Track = (Option<usize>, Role, usize);

/// A slice to place: its track's device and role, and its span in whole nanoseconds.
type Placed = ((Option<usize>, Role), (i64, i64));

/// Start and end in whole nanoseconds, the resolution the trace is written at, so that the
/// nesting decided here is the nesting the file holds.
fn span_ns(event: &Event) -> (i64, i64) {
    let start = (event.start_s * 1e9).round() as i64;
    let end = ((event.start_s + event.duration_s.max(0.0)) * 1e9).round() as i64;
    (start, end.max(start))
}

/// Lanes of one track: each keeps the ends of the slices still open at the last start,
/// innermost last. A slice fits a lane if every open slice there contains it.
#[derive(Default)]
struct Lanes(Vec<Vec<i64>>);

impl Lanes {
    fn place(&mut self, start: i64, end: i64) -> usize {
        for (lane, open) in self.0.iter_mut().enumerate() {
            while open.last().is_some_and(|&e| e <= start) {
                open.pop();
            }
            if open.last().is_none_or(|&e| e >= end) {
                open.push(end);
                return lane;
            }
        }
        self.0.push(vec![end]);
        self.0.len() - 1
    }
}

/// The track of every slice (by index), given its track's key and its span in
/// nanoseconds, with slices on each track nesting or disjoint.
fn place(slices: &[Placed]) -> Vec<Track> {
    let mut order: Vec<usize> = (0..slices.len()).collect();
    // Outer slices before the ones they contain: by start, then longest first.
    order.sort_by_key(|&i| {
        let (start, end) = slices[i].1;
        (start, std::cmp::Reverse(end))
    });
    let mut lanes: BTreeMap<(Option<usize>, Role), Lanes> = BTreeMap::new();
    let mut out = vec![(None, Role::Host, 0); slices.len()];
    for i in order {
        let (key, (start, end)) = slices[i];
        out[i] = (
            key.0,
            key.1,
            lanes.entry(key).or_default().place(start, end),
        );
    }
    out
}

/// The track of every event (by index), with slices on each track nesting or disjoint.
#[cfg(test)]
fn tracks(events: &[Event]) -> Vec<Track> {
    let slices: Vec<_> = events
        .iter()
        .map(|e| ((e.device, role(e)), span_ns(e)))
        .collect();
    place(&slices)
}

/// Nanoseconds of `seconds`, as [`span_ns`] rounds them.
fn ns(seconds: f64) -> i64 {
    (seconds * 1e9).round() as i64
}

/// The slices of the calls track: each user call, then each kernel call that has steps.
fn call_slices(events: &[Event], calls: &[CallRecord], users: &[UserCall]) -> Vec<Slice> {
    let mut user_of = vec![None; calls.len()];
    let mut slices = Vec::new();
    for (u, call) in summarize_calls(events, calls, users).iter().enumerate() {
        for &k in &call.call.kernel_calls {
            if let Some(slot) = user_of.get_mut(k as usize) {
                *slot = Some(u);
            }
        }
        slices.push(Slice {
            name: call.call.name(),
            span: (ns(call.start_s), ns(call.end_s).max(ns(call.start_s))),
            args: json!({
                "user_call": u,
                "kernel_calls": call.call.kernel_calls.len(),
                "device_s": call.device_s,
            }),
        });
    }
    for (k, span) in kernel_spans(events, calls.len()).into_iter().enumerate() {
        if let Some((start, end)) = span {
            slices.push(Slice {
                name: calls[k].kernel.clone(),
                span: (ns(start), ns(end).max(ns(start))),
                args: json!({
                    "call": k,
                    "user_call": user_of[k],
                    "items": calls[k].items,
                    "strategy": calls[k].strategy,
                }),
            });
        }
    }
    slices
}

/// A named slice of the calls track.
struct Slice {
    name: String,
    span: (i64, i64),
    args: Value,
}

fn track_name(track: Track, names: &dyn Fn(usize) -> String) -> String {
    let base = match track {
        (_, Role::Calls, _) => "calls — user calls, kernel calls under them".to_string(),
        (None, _, _) => "host — plan, exchange".to_string(),
        (Some(d), Role::Queue, _) => format!("device {d} queue — {}", names(d)),
        (Some(d), Role::Worker | Role::Host, _) => format!("device {d} worker — {}", names(d)),
        (Some(d), Role::Retries, _) => format!("device {d} retries — {}", names(d)),
    };
    match track.2 {
        0 => base,
        lane => format!("{base} (lane {})", lane + 1),
    }
}

/// Microseconds, as the format counts, from whole nanoseconds.
fn micros(ns: i64) -> f64 {
    ns as f64 / 1e3
}

/// The trace as JSON; `names` describes a device (adapter and backend) for track names.
///
/// Steps are named by their kind (`kernel`, `upload`, …) so Perfetto groups them; the
/// chunk, call, bytes, items and clock are in `args`. Tracks (threads of one process,
/// `amari_gpu`) are ordered: calls, host, then per device its queue, worker and retries.
pub fn chrome_trace(
    events: &[Event],
    calls: &[CallRecord],
    users: &[UserCall],
    names: &dyn Fn(usize) -> String,
) -> Value {
    let slices = call_slices(events, calls, users);
    let spans: Vec<_> = (slices.iter())
        .map(|s| ((None, Role::Calls), s.span))
        .chain(events.iter().map(|e| ((e.device, role(e)), span_ns(e))))
        .collect();
    let placed = place(&spans);
    let mut used: Vec<Track> = placed.clone();
    used.sort();
    used.dedup();
    let tid_of: BTreeMap<Track, u64> = used
        .iter()
        .enumerate()
        .map(|(tid, &t)| (t, tid as u64))
        .collect();
    let mut trace = Vec::with_capacity(spans.len() + 2 * used.len() + 1);
    for (s, track) in slices.iter().zip(&placed) {
        trace.push(json!({
            "name": s.name,
            "cat": "call",
            "ph": "X",
            "pid": PID,
            "tid": tid_of[track],
            "ts": micros(s.span.0),
            "dur": micros(s.span.1 - s.span.0),
            "args": s.args,
        }));
    }
    for (e, track) in events.iter().zip(&placed[slices.len()..]) {
        let (start, end) = span_ns(e);
        trace.push(json!({
            "name": e.kind.name(),
            "cat": e.kind.name(),
            "ph": "X",
            "pid": PID,
            "tid": tid_of[track],
            "ts": micros(start),
            "dur": micros(end - start),
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
    trace.push(json!({"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "amari_gpu"}}));
    for (track, tid) in &tid_of {
        trace.push(json!({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": track_name(*track, names)}}));
        trace.push(json!({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}}));
    }
    json!({"traceEvents": trace, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Clock;

    fn ev(device: Option<usize>, kind: Kind, start_s: f64, duration_s: f64) -> Event {
        Event {
            device,
            kind,
            chunk: Some(0),
            call: 0,
            start_s,
            duration_s,
            bytes: 0,
            items: 1,
            clock: Clock::Gpu,
        }
    }

    /// Every track's slices nest or are disjoint, read back from the JSON as Perfetto would.
    fn nests(trace: &Value) -> bool {
        let mut by_tid: BTreeMap<u64, Vec<(i64, i64)>> = BTreeMap::new();
        for e in trace["traceEvents"].as_array().unwrap() {
            if e["ph"] == "X" {
                let ts = (e["ts"].as_f64().unwrap() * 1e3).round() as i64;
                let dur = (e["dur"].as_f64().unwrap() * 1e3).round() as i64;
                by_tid
                    .entry(e["tid"].as_u64().unwrap())
                    .or_default()
                    .push((ts, ts + dur));
            }
        }
        by_tid.values().all(|spans| {
            spans.iter().all(|a| {
                spans.iter().all(|b| {
                    a.1 <= b.0
                        || b.1 <= a.0
                        || (a.0 <= b.0 && b.1 <= a.1)
                        || (b.0 <= a.0 && a.1 <= b.1)
                })
            })
        })
    }

    #[test]
    fn overlapping_kernels_and_retries_move_to_lanes_where_they_nest() {
        let events = vec![
            ev(Some(0), Kind::Kernel, 0.0, 1.0),
            ev(Some(0), Kind::Kernel, 0.5, 1.0), // overlaps the first: a second lane
            ev(Some(0), Kind::Kernel, 1.6, 0.2), // fits the first lane again
            ev(Some(0), Kind::Upload, 0.0, 0.1),
            ev(Some(0), Kind::Wait, 0.1, 0.8),
            ev(Some(0), Kind::Retry, 0.0, 1.0),
            ev(Some(0), Kind::Retry, 0.2, 1.0),
            ev(None, Kind::Plan, 0.0, 0.05),
        ];
        let placed = tracks(&events);
        assert_eq!(placed[0], (Some(0), Role::Queue, 0));
        assert_eq!(placed[1], (Some(0), Role::Queue, 1));
        assert_eq!(placed[2], (Some(0), Role::Queue, 0));
        assert_eq!(placed[3], (Some(0), Role::Worker, 0));
        assert_eq!(placed[4], (Some(0), Role::Worker, 0));
        assert_eq!(placed[6], (Some(0), Role::Retries, 1));
        let trace = chrome_trace(&events, &[], &[], &|_| "lavapipe (vulkan)".into());
        assert!(nests(&trace));
        let names: Vec<String> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "host — plan, exchange",
                "device 0 queue — lavapipe (vulkan)",
                "device 0 queue — lavapipe (vulkan) (lane 2)",
                "device 0 worker — lavapipe (vulkan)",
                "device 0 retries — lavapipe (vulkan)",
                "device 0 retries — lavapipe (vulkan) (lane 2)",
            ]
        );
        let first = &trace["traceEvents"][0];
        assert_eq!(first["name"], "kernel");
        assert_eq!(first["args"]["chunk"], 0);
    }

    #[test]
    fn nested_slices_share_a_lane() {
        let events = vec![
            ev(Some(1), Kind::Kernel, 0.0, 1.0),
            ev(Some(1), Kind::Kernel, 0.2, 0.3),
            ev(Some(1), Kind::Kernel, 1.0, 0.5),
        ];
        assert!(tracks(&events).iter().all(|t| t.2 == 0));
    }

    /// A user call's slice heads the calls track and spans every step of its kernel calls
    /// (a step before its recorded start widens it), whose slices nest under it.
    #[test]
    fn user_calls_head_the_calls_track_with_their_kernel_calls_nested() {
        let mut second = ev(Some(0), Kind::Kernel, 0.4, 0.2);
        second.call = 1;
        let events = vec![
            ev(None, Kind::Plan, 0.05, 0.01),
            ev(Some(0), Kind::Kernel, 0.1, 0.2),
            second,
        ];
        let record = CallRecord::named("tropical/tiled");
        let users = [UserCall {
            method: "shortest_paths".into(),
            args: "4×4".into(),
            start_s: 0.06,
            end_s: Some(0.5),
            kernel_calls: vec![0, 1],
        }];
        let calls = [record.clone(), record];
        let trace = chrome_trace(&events, &calls, &users, &|_| "lavapipe (vulkan)".into());
        assert!(nests(&trace));
        let list = trace["traceEvents"].as_array().unwrap();
        let calls_tid = list
            .iter()
            .find(|e| {
                e["name"] == "thread_name"
                    && e["args"]["name"].as_str().unwrap().starts_with("calls")
            })
            .map(|e| e["tid"].clone())
            .unwrap();
        let on_calls: Vec<(&str, f64, f64)> = list
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == calls_tid)
            .map(|e| {
                let ts = e["ts"].as_f64().unwrap();
                (
                    e["name"].as_str().unwrap(),
                    ts,
                    ts + e["dur"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            on_calls,
            [
                ("shortest_paths(4×4)", 50_000.0, 600_000.0),
                ("tropical/tiled", 50_000.0, 300_000.0),
                ("tropical/tiled", 400_000.0, 600_000.0),
            ]
        );
        assert_eq!(calls_tid, 0, "the calls track comes first");
    }
}
