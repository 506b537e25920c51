//! The profile events of a completed chunk, and the alignment of GPU timestamps with the
//! host clock they need.

use std::sync::Arc;
use std::time::Instant;

use crate::device::GpuDevice;
use crate::profile::{Clock, Event, Kind, Profiler};
use crate::runner::{Begun, Finished};

/// The active profile of a call, and the call's index in it.
#[derive(Clone)]
pub struct Recording {
    /// Where events go.
    pub profiler: Arc<Profiler>,
    /// Index of the call in the profile.
    pub call: u64,
    /// By device id: whether its kernels are timed with GPU timestamp queries.
    pub gpu_timed: Vec<bool>,
}

/// What the worker keeps about a chunk beyond what its device holds.
#[derive(Clone, Copy)]
pub(super) struct Meta {
    pub(super) chunk: usize,
    pub(super) items: usize,
    /// Taken from the scheduler as an orphan of a failed device.
    pub(super) orphan: bool,
    pub(super) taken: Instant,
    pub(super) begun: Begun,
}

/// Aligns GPU timestamps with the host clock: the offset is the smallest observed gap between
/// a kernel's GPU end and the host seeing it done, the tightest alignment the host can know.
#[derive(Default)]
pub(crate) struct GpuClock {
    offset_s: Option<f64>,
}

impl GpuClock {
    /// The kernel's start and duration on the profile's clock, given when the host saw it
    /// done (`seen`).
    pub(crate) fn kernel(
        &mut self,
        profiler: &Profiler,
        seen: Instant,
        ticks: (u64, u64),
        period_ns: f64,
    ) -> (f64, f64) {
        let begin_s = ticks.0 as f64 * period_ns * 1e-9;
        let end_s = ticks.1.max(ticks.0) as f64 * period_ns * 1e-9;
        let seen_s = profiler.at(seen);
        let offset = self
            .offset_s
            .map_or(seen_s - end_s, |o| o.min(seen_s - end_s));
        self.offset_s = Some(offset);
        (begin_s + offset, end_s - begin_s)
    }
}

impl Recording {
    /// Records the steps of a completed chunk.
    pub(super) fn chunk(
        &self,
        dev: &GpuDevice,
        m: &Meta,
        done: &Finished,
        previous_done: Instant,
        clock: &mut GpuClock,
    ) {
        let r = self;
        let p = &r.profiler;
        // Every step of the chunk: its kind, start and duration on the profile's clock,
        // bytes moved and the clock that measured it.
        let record = |kind, start_s, duration_s: f64, bytes, clock| {
            p.push(Event {
                device: Some(dev.id),
                kind,
                chunk: Some(m.chunk as u64),
                call: r.call,
                start_s,
                duration_s: duration_s.max(0.0),
                bytes,
                items: m.items as u64,
                clock,
            });
        };
        let host = |kind, start: Instant, end: Instant, bytes| {
            record(
                kind,
                p.at(start),
                (end - start).as_secs_f64(),
                bytes,
                Clock::Host,
            );
        };
        if done.staged {
            host(Kind::Upload, m.taken, m.begun.submitted, m.begun.bytes_up);
        }
        match (done.ticks, dev.timestamp_period_ns) {
            (Some(ticks), Some(period)) => {
                let (start_s, duration_s) = clock.kernel(p, done.wait_end, ticks, period);
                record(Kind::Kernel, start_s, duration_s, 0, Clock::Gpu);
            }
            // Without timestamps the kernel is bounded by its submit (or the previous
            // chunk's completion, whichever is later) and the host seeing it done.
            _ => host(
                Kind::Kernel,
                m.begun.submitted.max(previous_done),
                done.wait_end,
                0,
            ),
        }
        if done.staged {
            host(Kind::Wait, done.wait_start, done.wait_end, 0);
            host(
                Kind::Readback,
                done.wait_end,
                done.copied,
                m.begun.bytes_down,
            );
        }
        if m.orphan {
            host(Kind::Retry, m.taken, done.copied, 0);
        }
    }
}
