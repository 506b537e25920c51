//! What a profile says about a run: makespan against the lower bound the cost model
//! predicted for the plans (a prediction, not a guarantee: a run can beat it), imbalance
//! between devices, the share of time that was not kernel work, and the likely bottleneck
//! with the figures behind it.

use std::collections::BTreeMap;

use super::calls::UserCall;
use super::timeline::{CallRecord, Event, Kind};

/// One device's figures over a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSummary {
    /// Device id.
    pub device: usize,
    /// Seconds covered by its uploads, kernels and readbacks (overlaps counted once).
    pub busy_s: f64,
    /// `busy_s / makespan_s`.
    pub utilization: f64,
    /// Seconds covered by its kernels.
    pub kernel_s: f64,
    /// Seconds of its uploads and readbacks.
    pub transfer_s: f64,
    /// Seconds its worker waited for the device.
    pub wait_s: f64,
    /// Items its kernels covered.
    pub items: u64,
    /// `items / busy_s`.
    pub items_per_s: f64,
    /// Bytes uploaded and read back.
    pub bytes: u64,
    /// `bytes / busy_s`.
    pub bytes_per_s: f64,
    /// Chunks it completed.
    pub chunks: u64,
    /// Chunks it re-ran for a failed device.
    pub retries: u64,
}

/// The whole profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// User calls recorded (the API methods called; see [`UserCall`]).
    pub calls: usize,
    /// Kernel calls the engine made for them (a shortest-paths call makes one per round),
    /// and any made outside a user call.
    pub kernel_calls: usize,
    /// Sum over kernel calls of each one's span (first event start to last event end).
    pub makespan_s: f64,
    /// Sum over calls of the lower bound the calibrated model predicted for the call's
    /// plan. A prediction: the measured makespan can be below it when the devices ran
    /// faster than calibration measured.
    pub predicted_lower_bound_s: f64,
    /// `predicted_lower_bound_s / makespan_s`: 1 when the run matched the model's best
    /// case, below 1 when it fell short, above 1 when it beat the model (the model
    /// underrates the devices).
    pub efficiency: f64,
    /// Busiest device's busy time over the mean, minus one.
    pub imbalance: f64,
    /// Share of busy time spent outside kernels (transfers, launches, synchronisation).
    pub overhead_fraction: f64,
    /// "transfer-bound" | "compute-bound" | "imbalance" | "launch-overhead".
    pub bottleneck: &'static str,
    /// The figures the bottleneck was judged from.
    pub figures: BTreeMap<String, f64>,
    /// Per device, by id.
    pub devices: Vec<DeviceSummary>,
}

/// Length of the union of intervals.
fn covered(mut intervals: Vec<(f64, f64)>) -> f64 {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in intervals {
        match current {
            Some((s, e)) if start <= e => current = Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                current = Some((start, end));
            }
            None => current = Some((start, end)),
        }
    }
    total + current.map_or(0.0, |(s, e)| e - s)
}

fn device_summary(device: usize, events: &[&Event], makespan_s: f64) -> DeviceSummary {
    let span = |kinds: &[Kind]| -> Vec<(f64, f64)> {
        events
            .iter()
            .filter(|e| kinds.contains(&e.kind))
            .map(|e| (e.start_s, e.start_s + e.duration_s))
            .collect()
    };
    let sum = |kind: Kind| {
        events
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.duration_s)
            .sum::<f64>()
    };
    let busy_s = covered(span(&[Kind::Upload, Kind::Kernel, Kind::Readback]));
    let kernels = || events.iter().filter(|e| e.kind == Kind::Kernel);
    let items = kernels().map(|e| e.items).sum();
    let bytes = events
        .iter()
        .filter(|e| matches!(e.kind, Kind::Upload | Kind::Readback))
        .map(|e| e.bytes)
        .sum();
    let per_s = |x: f64| if busy_s > 0.0 { x / busy_s } else { 0.0 };
    DeviceSummary {
        device,
        busy_s,
        utilization: if makespan_s > 0.0 {
            busy_s / makespan_s
        } else {
            0.0
        },
        kernel_s: covered(span(&[Kind::Kernel])),
        transfer_s: sum(Kind::Upload) + sum(Kind::Readback),
        wait_s: sum(Kind::Wait),
        items,
        items_per_s: per_s(items as f64),
        bytes,
        bytes_per_s: per_s(bytes as f64),
        chunks: kernels().count() as u64,
        retries: events.iter().filter(|e| e.kind == Kind::Retry).count() as u64,
    }
}

/// Summarises a profile's events, kernel calls and user calls.
pub fn summarize(events: &[Event], calls: &[CallRecord], users: &[UserCall]) -> Summary {
    let mut spans: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for e in events {
        let span = spans
            .entry(e.call)
            .or_insert((f64::INFINITY, f64::NEG_INFINITY));
        span.0 = span.0.min(e.start_s);
        span.1 = span.1.max(e.start_s + e.duration_s);
    }
    let makespan_s: f64 = spans.values().map(|(s, e)| (e - s).max(0.0)).sum();
    let predicted_lower_bound_s: f64 = calls.iter().map(|c| c.lower_bound_s).sum();
    let mut by_device: BTreeMap<usize, Vec<&Event>> = BTreeMap::new();
    for e in events {
        if let Some(d) = e.device {
            by_device.entry(d).or_default().push(e);
        }
    }
    let devices: Vec<DeviceSummary> = by_device
        .iter()
        .map(|(&d, evs)| device_summary(d, evs, makespan_s))
        .collect();
    let busy: Vec<f64> = devices
        .iter()
        .map(|d| d.busy_s)
        .filter(|&b| b > 0.0)
        .collect();
    let mean_busy = if busy.is_empty() {
        0.0
    } else {
        busy.iter().sum::<f64>() / busy.len() as f64
    };
    let max_busy = busy.iter().copied().fold(0.0, f64::max);
    let imbalance = if mean_busy > 0.0 {
        max_busy / mean_busy - 1.0
    } else {
        0.0
    };
    let busy_total: f64 = devices.iter().map(|d| d.busy_s).sum();
    let kernel_total: f64 = devices.iter().map(|d| d.kernel_s).sum();
    let transfer_total: f64 = devices.iter().map(|d| d.transfer_s).sum();
    let share = |x: f64| {
        if busy_total > 0.0 {
            (x / busy_total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let kernel_share = share(kernel_total);
    let transfer_share = share(transfer_total);
    // Busy time that is neither a kernel nor a copy: submits, launches, synchronisation.
    let launch_share = (1.0 - kernel_share - transfer_share).max(0.0);
    let bottleneck = if imbalance > 0.25 {
        "imbalance"
    } else if transfer_share >= kernel_share && transfer_share >= launch_share {
        "transfer-bound"
    } else if launch_share >= kernel_share {
        "launch-overhead"
    } else {
        "compute-bound"
    };
    let figures = BTreeMap::from([
        ("kernel_share".to_string(), kernel_share),
        ("transfer_share".to_string(), transfer_share),
        ("launch_sync_share".to_string(), launch_share),
        ("imbalance".to_string(), imbalance),
        ("max_busy_s".to_string(), max_busy),
        ("mean_busy_s".to_string(), mean_busy),
    ]);
    Summary {
        calls: users.len(),
        kernel_calls: calls.len(),
        makespan_s,
        predicted_lower_bound_s,
        efficiency: if makespan_s > 0.0 {
            predicted_lower_bound_s / makespan_s
        } else {
            1.0
        },
        imbalance,
        overhead_fraction: 1.0 - kernel_share,
        bottleneck,
        figures,
        devices,
    }
}

/// A user call with the figures of the kernel calls it made.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSummary {
    /// The call as recorded.
    pub call: UserCall,
    /// Its span on the profile clock: from its start (or its first step, if earlier) to
    /// its end (or its last step, if later), so every step of its kernel calls lies within.
    pub start_s: f64,
    /// See `start_s`.
    pub end_s: f64,
    /// Seconds of kernel work its kernel calls put on the devices (summed over devices).
    pub device_s: f64,
    /// Sum of its kernel calls' predicted lower bounds.
    pub lower_bound_s: f64,
    /// Sum of its kernel calls' estimated makespans.
    pub estimated_makespan_s: f64,
    /// The strategies its kernel calls' plans came from, each once, in order.
    pub strategies: Vec<String>,
}

/// First start and last end of each kernel call's steps, by call index.
pub(crate) fn kernel_spans(events: &[Event], calls: usize) -> Vec<Option<(f64, f64)>> {
    let mut spans: Vec<Option<(f64, f64)>> = vec![None; calls];
    for e in events {
        let Some(span) = spans.get_mut(e.call as usize) else {
            continue;
        };
        let end = e.start_s + e.duration_s;
        *span = Some(span.map_or((e.start_s, end), |(s, t)| (s.min(e.start_s), t.max(end))));
    }
    spans
}

/// Every user call with its figures, in the order the calls began.
pub fn summarize_calls(
    events: &[Event],
    calls: &[CallRecord],
    users: &[UserCall],
) -> Vec<CallSummary> {
    let spans = kernel_spans(events, calls.len());
    let mut device_s = vec![0.0; calls.len()];
    for e in events.iter().filter(|e| e.kind == Kind::Kernel) {
        if let Some(s) = device_s.get_mut(e.call as usize) {
            *s += e.duration_s;
        }
    }
    users
        .iter()
        .map(|user| {
            let own = || {
                user.kernel_calls
                    .iter()
                    .filter_map(|&k| calls.get(k as usize))
            };
            let mut start_s = user.start_s;
            let mut end_s = user.end_s.unwrap_or(user.start_s);
            for &(s, e) in user
                .kernel_calls
                .iter()
                .filter_map(|&k| spans.get(k as usize)?.as_ref())
            {
                start_s = start_s.min(s);
                end_s = end_s.max(e);
            }
            let mut strategies: Vec<String> = Vec::new();
            for c in own() {
                if !strategies.contains(&c.strategy) {
                    strategies.push(c.strategy.clone());
                }
            }
            CallSummary {
                call: user.clone(),
                start_s,
                end_s,
                device_s: (user.kernel_calls.iter())
                    .filter_map(|&k| device_s.get(k as usize))
                    .sum(),
                lower_bound_s: own().map(|c| c.lower_bound_s).sum(),
                estimated_makespan_s: own().map(|c| c.estimated_makespan_s).sum(),
                strategies,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Clock;

    fn ev(device: usize, kind: Kind, start_s: f64, duration_s: f64) -> Event {
        Event {
            device: Some(device),
            kind,
            chunk: Some(0),
            call: 0,
            start_s,
            duration_s,
            bytes: 10,
            items: 5,
            clock: Clock::Host,
        }
    }

    #[test]
    fn unions_count_overlaps_once() {
        assert_eq!(covered(vec![(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)]), 3.0);
        assert_eq!(covered(vec![]), 0.0);
    }

    #[test]
    fn figures_follow_the_events() {
        let events = vec![
            ev(0, Kind::Upload, 0.0, 0.1),
            ev(0, Kind::Kernel, 0.1, 0.8),
            ev(0, Kind::Readback, 0.9, 0.1),
            ev(1, Kind::Upload, 0.0, 0.1),
            ev(1, Kind::Kernel, 0.1, 0.3),
            ev(1, Kind::Readback, 0.4, 0.1),
        ];
        let calls = vec![CallRecord {
            kernel: "k".into(),
            items: 10,
            flops_per_item: 1.0,
            bytes_per_item: 8.0,
            lower_bound_s: 0.5,
            estimated_makespan_s: 0.6,
            strategy: "balanced".into(),
        }];
        let s = summarize(&events, &calls, &[]);
        assert!((s.makespan_s - 1.0).abs() < 1e-12);
        assert!((s.efficiency - 0.5).abs() < 1e-12);
        assert!(
            (s.devices[0].busy_s - 1.0).abs() < 1e-12 && (s.devices[1].busy_s - 0.5).abs() < 1e-12
        );
        assert!((s.imbalance - (1.0 / 0.75 - 1.0)).abs() < 1e-12);
        assert_eq!(s.bottleneck, "imbalance");
        assert_eq!(s.devices[0].items, 5);
    }

    #[test]
    fn transfer_heavy_runs_are_transfer_bound() {
        let events = vec![
            ev(0, Kind::Upload, 0.0, 0.6),
            ev(0, Kind::Kernel, 0.6, 0.2),
            ev(0, Kind::Readback, 0.8, 0.2),
        ];
        let s = summarize(&events, &[], &[]);
        assert_eq!(s.bottleneck, "transfer-bound");
        assert!((s.overhead_fraction - 0.8).abs() < 1e-12);
    }

    /// A call's span covers its kernel calls' steps; its device time is their kernels'.
    #[test]
    fn a_summary_spans_its_kernel_calls_steps() {
        let step = |call: u64, kind: Kind, start_s: f64, duration_s: f64| Event {
            device: Some(0),
            kind,
            chunk: Some(0),
            call,
            start_s,
            duration_s,
            bytes: 0,
            items: 1,
            clock: Clock::Host,
        };
        let events = [
            step(0, Kind::Kernel, 1.0, 0.5),
            step(1, Kind::Upload, 0.5, 0.25),
            step(1, Kind::Kernel, 2.0, 0.75),
        ];
        let users = [UserCall {
            method: "m".into(),
            args: String::new(),
            start_s: 0.75,
            end_s: Some(2.5),
            kernel_calls: vec![0, 1],
        }];
        let s = &summarize_calls(
            &events,
            &[CallRecord::named("a"), CallRecord::named("b")],
            &users,
        )[0];
        assert_eq!((s.start_s, s.end_s), (0.5, 2.75));
        assert_eq!(s.device_s, 1.25);
        assert_eq!((s.lower_bound_s, s.estimated_makespan_s), (0.5, 1.0));
        assert_eq!(s.strategies, ["auto"]);
        let whole = summarize(
            &events,
            &[CallRecord::named("a"), CallRecord::named("b")],
            &users,
        );
        assert_eq!((whole.calls, whole.kernel_calls), (1, 2));
    }
}
