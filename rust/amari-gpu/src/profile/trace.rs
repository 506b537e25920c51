//! Chrome Trace Event Format export: complete ("X") events with durations on tracks where
//! they nest, and metadata naming the tracks. Opens in Perfetto and chrome://tracing.
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

use super::timeline::{Event, Kind};

const PID: u64 = 1;

/// What a track holds, in display order under its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
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

/// The track of every event (by index), with slices on each track nesting or disjoint.
fn tracks(events: &[Event]) -> Vec<Track> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    // Outer slices before the ones they contain: by start, then longest first.
    order.sort_by_key(|&i| {
        let (start, end) = span_ns(&events[i]);
        (start, std::cmp::Reverse(end))
    });
    let mut lanes: BTreeMap<(Option<usize>, Role), Lanes> = BTreeMap::new();
    let mut out = vec![(None, Role::Host, 0); events.len()];
    for i in order {
        let key = (events[i].device, role(&events[i]));
        let (start, end) = span_ns(&events[i]);
        out[i] = (
            key.0,
            key.1,
            lanes.entry(key).or_default().place(start, end),
        );
    }
    out
}

fn track_name(track: Track, names: &dyn Fn(usize) -> String) -> String {
    let base = match track {
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
/// Events are named by their kind (`kernel`, `upload`, …) so Perfetto groups them; the
/// chunk, call, bytes, items and clock are in `args`. Tracks (threads of one process,
/// `amari_gpu`) are ordered host first, then per device its queue, worker and retries.
pub fn chrome_trace(events: &[Event], names: &dyn Fn(usize) -> String) -> Value {
    let placed = tracks(events);
    let mut used: Vec<Track> = placed.clone();
    used.sort();
    used.dedup();
    let tid_of: BTreeMap<Track, u64> = used
        .iter()
        .enumerate()
        .map(|(tid, &t)| (t, tid as u64))
        .collect();
    let mut trace = Vec::with_capacity(events.len() + 2 * used.len() + 1);
    for (e, track) in events.iter().zip(&placed) {
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
        let trace = chrome_trace(&events, &|_| "lavapipe (vulkan)".into());
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
}
