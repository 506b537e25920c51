//! Profiler events of a domain-decomposition run: per device and round its ghost upload,
//! kernels (GPU timestamps where profiled rounds are stamped) and border readback; on the
//! host the halo exchange and each new layout.

use std::time::Instant;

use super::round::DeviceRound;
use crate::device::GpuDevice;
use crate::profile::{Clock, Event, Kind, Profiler};
use crate::worker::GpuClock;

/// Where a run's events go, if a profile is active.
pub(super) struct Recorder<'a> {
    pub(super) profiler: Option<&'a Profiler>,
    pub(super) call: u64,
}

impl Recorder<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn host(
        &self,
        device: Option<usize>,
        kind: Kind,
        round: Option<u64>,
        start: Instant,
        end: Instant,
        bytes: u64,
        items: u64,
    ) {
        if let Some(p) = self.profiler {
            p.host(device, kind, round, self.call, start, end, bytes, items);
        }
    }

    pub(super) fn instant(&self, device: Option<usize>, kind: Kind) {
        let now = Instant::now();
        self.host(device, kind, None, now, now, 0, 0);
    }

    pub(super) fn round(&self, dev: &GpuDevice, round: u64, r: &DeviceRound, clock: &mut GpuClock) {
        let Some(p) = self.profiler else { return };
        let id = Some(dev.id);
        self.host(
            id,
            Kind::Upload,
            Some(round),
            r.started,
            r.submitted,
            r.bytes_up,
            0,
        );
        let (start_s, duration_s, clock_name) = match (r.ticks, dev.timestamp_period_ns) {
            (Some(ticks), Some(period)) => {
                let (s, d) = clock.kernel(p, r.finished, ticks, period);
                (s, d, Clock::Gpu)
            }
            _ => (
                p.at(r.submitted),
                (r.finished - r.submitted).as_secs_f64(),
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
        self.host(
            id,
            Kind::Readback,
            Some(round),
            r.finished,
            r.read,
            r.bytes_down,
            0,
        );
    }
}
