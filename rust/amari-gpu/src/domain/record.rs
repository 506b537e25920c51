//! Profiler events of a domain-decomposition run: per device and round its ghost upload,
//! kernels (GPU timestamps where profiled rounds are stamped) and border readback; on the
//! host the halo exchange and each new layout.

use std::time::Instant;

use super::round::DeviceRound;
use crate::device::GpuDevice;
use crate::profile::{Clock, Event, HostStep, Kind, Profiler};

/// Where a run's events go, if a profile is active.
pub(super) struct Recorder<'a> {
    pub(super) profiler: Option<&'a Profiler>,
    pub(super) call: u64,
}

impl Recorder<'_> {
    /// A step of this run's call; bytes and items 0 until set.
    pub(super) fn step(&self, device: Option<usize>, kind: Kind, round: Option<u64>) -> HostStep {
        HostStep {
            device,
            kind,
            chunk: round,
            call: self.call,
            bytes: 0,
            items: 0,
        }
    }

    /// Records `step`, timed on the host from `start` to `end`.
    pub(super) fn host(&self, step: HostStep, start: Instant, end: Instant) {
        if let Some(p) = self.profiler {
            p.host(step, start, end);
        }
    }

    pub(super) fn instant(&self, device: Option<usize>, kind: Kind) {
        let now = Instant::now();
        self.host(self.step(device, kind, None), now, now);
    }

    pub(super) fn round(&self, dev: &GpuDevice, round: u64, r: &DeviceRound) {
        let Some(p) = self.profiler else { return };
        let id = Some(dev.id);
        let upload = HostStep {
            bytes: r.bytes_up,
            ..self.step(id, Kind::Upload, Some(round))
        };
        self.host(upload, r.started, r.submitted);
        let (start_s, duration_s, clock_name) = match (r.ticks, dev.timestamp_period_ns) {
            (Some(ticks), Some(period)) => {
                let (s, d) = p.gpu_kernel(dev.id, r.finished, ticks, period);
                (s, d, Clock::Gpu)
            }
            _ => (
                p.at(r.submitted),
                p.between(r.submitted, r.finished),
                Clock::Host,
            ),
        };
        p.push(Event {
            device: id,
            kind: Kind::Kernel,
            chunk: Some(round),
            call: self.call,
            start_s,
            duration_s,
            bytes: 0,
            items: r.work,
            clock: clock_name,
        });
        let readback = HostStep {
            bytes: r.bytes_down,
            ..self.step(id, Kind::Readback, Some(round))
        };
        self.host(readback, r.finished, r.read);
    }
}
