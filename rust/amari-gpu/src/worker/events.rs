//! The profile events of a completed chunk (GPU timestamps are aligned with the host clock
//! by the profiler).

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

impl Recording {
    /// Records the steps of a completed chunk.
    pub(super) fn chunk(&self, dev: &GpuDevice, m: &Meta, done: &Finished, previous_done: Instant) {
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
            record(kind, p.at(start), p.between(start, end), bytes, Clock::Host);
        };
        if done.staged {
            host(Kind::Upload, m.taken, m.begun.submitted, m.begun.bytes_up);
        }
        match (done.ticks, dev.timestamp_period_ns) {
            (Some(ticks), Some(period)) => {
                let (start_s, duration_s) = p.gpu_kernel(dev.id, done.wait_end, ticks, period);
                record(Kind::Kernel, start_s, duration_s, 0, Clock::Gpu);
            }
            // The host device times its kernels itself, start and end: the chunks of a
            // batch run side by side on its threads, and bounding each by the previous
            // chunk's completion drew them one after another, most of them empty.
            _ if dev.as_host().is_some() => {
                host(Kind::Kernel, done.wait_start, done.wait_end, 0);
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
