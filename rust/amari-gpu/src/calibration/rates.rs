//! Kernel rates of a device on resident data: items per second of each family's reference
//! kernel, the FMA-chain arithmetic peak and the streaming-copy bandwidth. Each kernel is
//! timed at a size found on the device (grown until one dispatch takes about
//! [`TARGET_DISPATCH_S`]), so a slow software adapter calibrates quickly and a fast GPU is
//! not timed on a dispatch too small to fill it. The roofline's limits reuse these kernels
//! timed as [`Timing::Limit`] says: on the clock of the device's profiled kernels.

use std::time::Instant;

use super::measure::{median, REPEATS};
use crate::device::GpuDevice;
use crate::error::Result;
use crate::family::Family;
use crate::raw::{Clock, Resident};
use crate::shaders::PEAK_STEPS_PER_THREAD;

/// Seconds a timed kernel dispatch is sized to take: long enough that launch cost and
/// timer noise are small parts of it, short enough that calibration stays quick on a
/// software adapter. Sizes are found by measuring, not assumed per device.
const TARGET_DISPATCH_S: f64 = 0.025;
/// The most a kernel's calibration size grows past its smallest size.
const MAX_GROWTH: usize = 1 << 6;

/// How a rate's dispatches are timed and summarised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timing {
    /// Calibration's: the host clock around submission and wait (what a call pays for a
    /// dispatch), the median of [`REPEATS`].
    Calibration,
    /// The roofline limits': the clock that times the engine's profiled kernels on the
    /// device (GPU timestamps where it records them, else the host clock with the waits),
    /// the fastest of [`LIMIT_RUNS`]: a limit is what the device can do, and a busy machine
    /// only ever slows a run down.
    Limit,
}

/// Seconds a limit's dispatch is sized to take: several milliseconds, so that what a
/// dispatch costs besides its work stays a few percent of it, yet short beside a scheduler's
/// time slices on a busy machine, where a dispatch of tens of milliseconds is always cut
/// into by other processes while a kernel of a fraction of a millisecond often runs whole:
/// the limit would come out low against the kernels it bounds.
const LIMIT_DISPATCH_S: f64 = 0.005;
/// Timed dispatches at the size found whose fastest is a limit.
const LIMIT_RUNS: usize = 9;

/// Bytes of each array a limit's streaming kernel moves at the least: past a CPU's last
/// cache (as the host's memcpy), so that the stream limit is memory's, not a cache's,
/// whatever size the time alone would choose.
const LIMIT_STREAM_BYTES: usize = 64 << 20;

impl Timing {
    /// Seconds one timed dispatch is sized to take.
    fn target_s(self) -> f64 {
        match self {
            Timing::Calibration => TARGET_DISPATCH_S,
            Timing::Limit => LIMIT_DISPATCH_S,
        }
    }

    /// The smallest size of a streaming kernel of `bytes_per_item` bytes of each array an
    /// item, from `smallest`, calibration's.
    fn stream_smallest(self, smallest: usize, bytes_per_item: usize) -> usize {
        match self {
            Timing::Calibration => smallest,
            Timing::Limit => smallest.max(LIMIT_STREAM_BYTES / bytes_per_item),
        }
    }
}

/// Items per second of `kernel` on resident data, at a size found by measuring: from
/// `smallest` items the size grows until one dispatch takes about `timing`'s target
/// ([`TARGET_DISPATCH_S`], [`LIMIT_DISPATCH_S`]), up to [`MAX_GROWTH`] times `smallest` and
/// what one binding and one dispatch can hold. Then the dispatches at that size as `timing`
/// says, and the clock they were timed on.
pub(super) fn items_per_s(
    dev: &GpuDevice,
    kernel: &crate::kernel::Kernel,
    smallest: usize,
    timing: Timing,
) -> Result<(f64, Clock)> {
    let pipeline = dev.pipeline(kernel)?;
    let largest = largest_size(dev, kernel, smallest);
    let time = |resident: &Resident| match timing {
        Timing::Limit => resident.run_timed(dev),
        Timing::Calibration => {
            let start = Instant::now();
            resident.run(dev)?;
            Ok((start.elapsed().as_secs_f64(), Clock::Host))
        }
    };
    let mut items = smallest.min(largest);
    loop {
        let resident = Resident::new(dev, kernel, &pipeline, items)?;
        resident.run(dev)?; // warm-up: first use of new buffers
        let (seconds, clock) = time(&resident)?;
        match next_size(items, seconds, largest, timing.target_s()) {
            Some(bigger) => items = bigger,
            None => {
                let mut samples = vec![seconds];
                let runs = match timing {
                    Timing::Calibration => REPEATS,
                    Timing::Limit => LIMIT_RUNS,
                };
                for _ in 1..runs {
                    samples.push(time(&resident)?.0);
                }
                let seconds = match timing {
                    Timing::Calibration => median(samples),
                    Timing::Limit => samples.into_iter().fold(f64::INFINITY, f64::min),
                };
                return Ok((items as f64 / seconds.max(1e-12), clock));
            }
        }
    }
}

/// The size to time next after `items` took `seconds`, or `None` when that size is the one
/// to measure: it took at least half of `target` seconds, or it is the largest allowed.
pub(super) fn next_size(items: usize, seconds: f64, largest: usize, target: f64) -> Option<usize> {
    if seconds >= target / 2.0 || items >= largest {
        return None;
    }
    // Grow to what the time says would hit the target (more than twofold, as the time is
    // under half of it), at most sixteenfold: a dispatch far below the target is mostly
    // launch cost, so its time says little about larger sizes.
    let grow = (target / seconds.max(1e-9)).min(16.0);
    Some(((items as f64 * grow).round() as usize).min(largest))
}

/// The largest size `items_per_s` may use for `kernel`: every buffer within one binding,
/// the dispatch within the device's grid limits.
pub(super) fn largest_size(
    dev: &GpuDevice,
    kernel: &crate::kernel::Kernel,
    smallest: usize,
) -> usize {
    let fits = |items: usize| {
        let words = (0..kernel.inputs.len())
            .map(|i| kernel.input_len(i, items))
            .chain(std::iter::once(kernel.output_words(items)));
        u32::try_from(items).is_ok_and(|n| {
            kernel
                .grid(n, dev.limits.max_compute_workgroups_per_dimension)
                .is_some()
        }) && words
            .into_iter()
            .all(|w| (w as u64) * 4 <= dev.max_binding_bytes())
    };
    let mut items = smallest * MAX_GROWTH;
    while items > smallest && !fits(items) {
        items /= 2;
    }
    items
}

/// Flops per second of the FMA-chain kernel on resident data.
pub(super) fn measure_peak(dev: &GpuDevice, timing: Timing) -> Result<(f64, Clock)> {
    let flops_per_step = crate::shaders::PEAK_FLOPS_PER_THREAD / PEAK_STEPS_PER_THREAD;
    loop_ops_per_s(dev, "peak", crate::shaders::PEAK, flops_per_step, timing)
}

/// Operations per second of a loop of `shaders/peak.wgsl` (kernel `id`, its `source` one of
/// the `shaders::PEAK*` variants, `ops_per_step` operations in each step) on resident data.
pub(super) fn loop_ops_per_s(
    dev: &GpuDevice,
    id: &str,
    source: &'static str,
    ops_per_step: f64,
    timing: Timing,
) -> Result<(f64, Clock)> {
    let kernel = crate::kernel::Kernel {
        inputs: vec![crate::kernel::Input::PerItem(4)],
        output: crate::kernel::Output::PerItem(4),
        ..crate::kernel::Kernel::map(id, Family::Probe, source)
    };
    let (threads_per_s, clock) = items_per_s(dev, &kernel, 1 << 12, timing)?;
    Ok((threads_per_s * PEAK_STEPS_PER_THREAD * ops_per_step, clock))
}

/// Bytes read plus written per second by the streaming-copy kernel on resident data.
pub(super) fn measure_kernel_copy(dev: &GpuDevice, timing: Timing) -> Result<(f64, Clock)> {
    let kernel = crate::kernel::Kernel {
        inputs: vec![crate::kernel::Input::PerItem(4)],
        output: crate::kernel::Output::PerItem(4),
        ..crate::kernel::Kernel::map("copy", Family::Probe, crate::shaders::COPY)
    };
    // Each thread reads one vec4 and writes one: 32 bytes moved.
    let smallest = timing.stream_smallest(1 << 16, 16);
    let (threads_per_s, clock) = items_per_s(dev, &kernel, smallest, timing)?;
    Ok((32.0 * threads_per_s, clock))
}

/// Bytes read plus written per second by the streaming-triad kernel on resident data (each
/// thread eight vec4 of each of its three arrays).
pub(super) fn measure_triad(dev: &GpuDevice, timing: Timing) -> Result<(f64, Clock)> {
    let kernel = crate::kernel::Kernel {
        inputs: vec![crate::kernel::Input::PerItem(32); 2],
        output: crate::kernel::Output::PerItem(32),
        ..crate::kernel::Kernel::map("triad", Family::Probe, crate::shaders::TRIAD)
    };
    let smallest = timing.stream_smallest(1 << 13, 8 * 16);
    let (threads_per_s, clock) = items_per_s(dev, &kernel, smallest, timing)?;
    Ok((
        crate::shaders::TRIAD_BYTES_PER_THREAD * threads_per_s,
        clock,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_grow_from_the_time_taken_within_bounds() {
        let target = TARGET_DISPATCH_S;
        // Far below the target: grows at most sixteenfold.
        assert_eq!(
            next_size(1000, target / 1000.0, 1 << 30, target),
            Some(16_000)
        );
        // Below half the target: grows to what would take the target.
        assert_eq!(next_size(1000, target * 0.49, 1 << 30, target), Some(2041));
        assert_eq!(next_size(1000, target * 0.4, 1 << 30, target), Some(2500));
        // Never past the largest size; a zero time does not divide by zero.
        assert_eq!(next_size(1000, 0.0, 5000, target), Some(5000));
        // Long enough, or as large as allowed: measure this size.
        assert_eq!(next_size(1000, target / 2.0, 1 << 30, target), None);
        assert_eq!(next_size(5000, 0.0, 5000, target), None);
    }

    #[test]
    fn limits_are_short_dispatches_of_streams_past_the_caches() {
        // A limit's dispatch is milliseconds, shorter than calibration's.
        assert!(Timing::Limit.target_s() < Timing::Calibration.target_s());
        assert!(Timing::Limit.target_s() >= 0.002);
        // Calibration keeps its sizes; a limit's stream moves at least 64 MiB an array.
        assert_eq!(Timing::Calibration.stream_smallest(1 << 16, 16), 1 << 16);
        assert_eq!(Timing::Limit.stream_smallest(1 << 16, 16), 1 << 22);
        assert_eq!(Timing::Limit.stream_smallest(1 << 13, 128), 1 << 19);
    }
}
