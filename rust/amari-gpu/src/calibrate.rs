//! Micro-benchmarks run on a device to measure what it can do: launch latency, host→device
//! and device→host transfer, on-device copy bandwidth, and items/s of each kernel family's
//! reference kernel. Every figure is a median of a few timed repetitions on the device
//! itself; nothing is looked up from the vendor.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::calibration::families::families;
use crate::device::GpuDevice;
use crate::error::Result;
use crate::executor::{run_chunk, ChunkJob};
use crate::family::Family;
use crate::gpu_io::{self, Limit};
use crate::raw::Resident;

/// Bytes moved per transfer measurement: large enough that latency is a small part.
const TRANSFER_BYTES: u64 = 16 << 20;
/// Timed repetitions per figure (the median is kept).
const REPEATS: usize = 3;
/// Seconds a timed kernel dispatch is sized to take: long enough that launch cost and
/// timer noise are small parts of it, short enough that calibration stays quick on a
/// software adapter. Sizes are found by measuring, not assumed per device.
const TARGET_DISPATCH_S: f64 = 0.025;
/// The most a kernel's calibration size grows past its smallest size.
const MAX_GROWTH: usize = 1 << 6;

/// What calibration measured on one adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Seconds for the smallest complete chunk (upload, dispatch, readback).
    pub launch_latency_s: f64,
    /// Host-to-device bytes per second.
    pub h2d_bytes_per_s: f64,
    /// Device-to-host bytes per second.
    pub d2h_bytes_per_s: f64,
    /// On-device copy: bytes read plus bytes written per second.
    pub copy_bytes_per_s: f64,
    /// Items per second of each family's reference kernel on resident data.
    pub family_items_per_s: BTreeMap<String, f64>,
    /// Arithmetic peak: flops per second of a chain of fused multiply-adds.
    #[serde(default)]
    pub peak_flops_per_s: f64,
    /// Streaming copy by a kernel (one vec4 in, one out per thread): bytes read plus
    /// written per second.
    #[serde(default)]
    pub kernel_copy_bytes_per_s: f64,
    /// Extra seconds a chunk takes when its kernel is timed with GPU timestamp queries (0
    /// without the feature; negative in caches written before it was measured).
    #[serde(default = "unmeasured")]
    pub timestamp_cost_s: f64,
    /// Seconds since the Unix epoch when measured.
    pub measured_unix_s: u64,
    /// Seconds the calibration took.
    pub calibration_s: f64,
}

fn unmeasured() -> f64 {
    -1.0
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// How long one calibration step may take before the device counts as lost.
const STEP_LIMIT: Duration = Duration::from_secs(60);

fn wait(dev: &GpuDevice, submission: wgpu::SubmissionIndex) -> Result<()> {
    gpu_io::wait(dev, Some(submission), Limit::Fixed(STEP_LIMIT))
}

fn buffer(dev: &GpuDevice, bytes: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    gpu_io::buffer(dev, "amari-gpu calibration", bytes, usage)
}

fn timed(repeats: usize, mut step: impl FnMut() -> Result<()>) -> Result<f64> {
    step()?; // warm-up: first use allocates and compiles
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = Instant::now();
        step()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(median(samples))
}

fn measure_h2d(dev: &GpuDevice) -> Result<f64> {
    let target = buffer(
        dev,
        TRANSFER_BYTES,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    );
    let data = vec![1u8; TRANSFER_BYTES as usize];
    let seconds = timed(REPEATS, || {
        dev.queue.write_buffer(&target, 0, &data);
        wait(dev, dev.queue.submit(None))
    })?;
    Ok(TRANSFER_BYTES as f64 / seconds)
}

fn measure_d2h(dev: &GpuDevice) -> Result<f64> {
    let (source, staging) = gpu_io::readback_buffers(dev, "amari-gpu calibration", TRANSFER_BYTES);
    let mut host = vec![0u8; TRANSFER_BYTES as usize];
    let seconds = timed(REPEATS, || {
        let mut encoder = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(&source, 0, &staging, 0, TRANSFER_BYTES);
        let submission = dev.queue.submit(Some(encoder.finish()));
        let mapped = gpu_io::map_for_reading(&staging, TRANSFER_BYTES);
        gpu_io::wait_mapped(dev, submission, &mapped, Limit::Fixed(STEP_LIMIT))?;
        host.copy_from_slice(
            &staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| gpu_io::lost(dev.id, format!("calibration readback: {e}")))?,
        );
        staging.unmap();
        Ok(())
    })?;
    Ok(TRANSFER_BYTES as f64 / seconds)
}

fn measure_copy(dev: &GpuDevice) -> Result<f64> {
    let bytes = 2 * TRANSFER_BYTES;
    let source = buffer(dev, bytes, wgpu::BufferUsages::COPY_SRC);
    let target = buffer(dev, bytes, wgpu::BufferUsages::COPY_DST);
    let seconds = timed(REPEATS, || {
        let mut encoder = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(&source, 0, &target, 0, bytes);
        wait(dev, dev.queue.submit(Some(encoder.finish())))
    })?;
    Ok(2.0 * bytes as f64 / seconds)
}

/// Seconds of one complete smallest chunk of the first family's reference kernel.
fn measure_latency(dev: &GpuDevice) -> Result<f64> {
    let kernel = (families()[0].reference)();
    let pipeline = dev.pipeline(&kernel)?;
    let items = 64;
    let inputs = kernel.filled_inputs(items, 0.5);
    let views: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut output = vec![0.0; kernel.output_words(items)];
    let mut samples = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        let job = ChunkJob {
            range: 0..items,
            output: &mut output,
        };
        run_chunk(dev, &kernel, &pipeline, &views, job, None, false)?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(median(samples))
}

/// Items per second of `kernel` on resident data, at a size found by measuring: from
/// `smallest` items the size grows until one dispatch takes about [`TARGET_DISPATCH_S`],
/// up to [`MAX_GROWTH`] times `smallest` and what one binding and one dispatch can hold.
/// Then the median of [`REPEATS`] dispatches at that size.
fn items_per_s(dev: &GpuDevice, kernel: &crate::kernel::Kernel, smallest: usize) -> Result<f64> {
    let pipeline = dev.pipeline(kernel)?;
    let largest = largest_size(dev, kernel, smallest);
    let mut items = smallest.min(largest);
    loop {
        let resident = Resident::new(dev, kernel, &pipeline, items)?;
        resident.run(dev)?; // warm-up: first use of new buffers
        let start = Instant::now();
        resident.run(dev)?;
        let seconds = start.elapsed().as_secs_f64();
        match next_size(items, seconds, largest) {
            Some(bigger) => items = bigger,
            None => {
                let mut samples = vec![seconds];
                for _ in 1..REPEATS {
                    let start = Instant::now();
                    resident.run(dev)?;
                    samples.push(start.elapsed().as_secs_f64());
                }
                return Ok(items as f64 / median(samples));
            }
        }
    }
}

/// The size to time next after `items` took `seconds`, or `None` when that size is the one
/// to measure: it took at least half the target, or it is the largest allowed.
fn next_size(items: usize, seconds: f64, largest: usize) -> Option<usize> {
    if seconds >= TARGET_DISPATCH_S / 2.0 || items >= largest {
        return None;
    }
    // Grow to what the time says would hit the target (more than twofold, as the time is
    // under half of it), at most sixteenfold: a dispatch far below the target is mostly
    // launch cost, so its time says little about larger sizes.
    let grow = (TARGET_DISPATCH_S / seconds.max(1e-9)).min(16.0);
    Some(((items as f64 * grow).round() as usize).min(largest))
}

/// The largest size `items_per_s` may use for `kernel`: every buffer within one binding,
/// the dispatch within the device's grid limits.
fn largest_size(dev: &GpuDevice, kernel: &crate::kernel::Kernel, smallest: usize) -> usize {
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

/// Items/s of each family's reference kernel with its data already on the device.
fn measure_families(dev: &GpuDevice) -> Result<BTreeMap<String, f64>> {
    let mut rates = BTreeMap::new();
    for family in families() {
        let rate = items_per_s(dev, &(family.reference)(), family.calibration_min_items)?;
        rates.insert(family.name.to_string(), rate);
    }
    Ok(rates)
}

/// Flops per second of the FMA-chain kernel on resident data.
fn measure_peak(dev: &GpuDevice) -> Result<f64> {
    let kernel = crate::kernel::Kernel {
        inputs: vec![crate::kernel::Input::PerItem(4)],
        output: crate::kernel::Output::PerItem(4),
        ..crate::kernel::Kernel::map("peak", Family::Probe, crate::shaders::PEAK)
    };
    let threads_per_s = items_per_s(dev, &kernel, 1 << 12)?;
    Ok(threads_per_s * crate::shaders::PEAK_FLOPS_PER_THREAD)
}

/// Bytes read plus written per second by the streaming-copy kernel on resident data.
fn measure_kernel_copy(dev: &GpuDevice) -> Result<f64> {
    let kernel = crate::kernel::Kernel {
        inputs: vec![crate::kernel::Input::PerItem(4)],
        output: crate::kernel::Output::PerItem(4),
        ..crate::kernel::Kernel::map("copy", Family::Probe, crate::shaders::COPY)
    };
    // Each thread reads one vec4 and writes one: 32 bytes moved.
    let threads_per_s = items_per_s(dev, &kernel, 1 << 16)?;
    Ok(32.0 * threads_per_s)
}

/// Whether cached measurements have every figure this version measures.
pub fn is_complete(m: &Measurements) -> bool {
    m.peak_flops_per_s > 0.0
        && m.kernel_copy_bytes_per_s > 0.0
        && m.timestamp_cost_s >= 0.0
        && families()
            .iter()
            .all(|f| m.family_items_per_s.contains_key(f.name))
}

/// What timing a chunk's kernel with GPU timestamp queries adds to the chunk: some drivers
/// (lavapipe among them) synchronise around every timestamp, which profiling must not hide.
fn measure_timestamp_cost(dev: &GpuDevice) -> Result<f64> {
    if dev.timestamp_period_ns.is_none() {
        return Ok(0.0);
    }
    let kernel = (families()[0].reference)();
    let pipeline = dev.pipeline(&kernel)?;
    let items = 1 << 14;
    let inputs = kernel.filled_inputs(items, 0.5);
    let views: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut output = vec![0.0; kernel.output_words(items)];
    let (mut plain, mut timed) = (Vec::new(), Vec::new());
    for round in 0..16 {
        for stamped in [false, true] {
            let start = Instant::now();
            let job = ChunkJob {
                range: 0..items,
                output: &mut output,
            };
            run_chunk(dev, &kernel, &pipeline, &views, job, None, stamped)?;
            // The first round warms both paths up.
            if round > 0 {
                let samples = if stamped { &mut timed } else { &mut plain };
                samples.push(start.elapsed().as_secs_f64());
            }
        }
    }
    Ok((median(timed) - median(plain)).max(0.0))
}

/// Runs every micro-benchmark on `dev`.
pub fn measure(dev: &GpuDevice) -> Result<Measurements> {
    let start = Instant::now();
    let launch_latency_s = measure_latency(dev)?;
    let h2d_bytes_per_s = measure_h2d(dev)?;
    let d2h_bytes_per_s = measure_d2h(dev)?;
    let copy_bytes_per_s = measure_copy(dev)?;
    let family_items_per_s = measure_families(dev)?;
    let peak_flops_per_s = measure_peak(dev)?;
    let kernel_copy_bytes_per_s = measure_kernel_copy(dev)?;
    let timestamp_cost_s = measure_timestamp_cost(dev)?;
    Ok(Measurements {
        launch_latency_s,
        h2d_bytes_per_s,
        d2h_bytes_per_s,
        copy_bytes_per_s,
        family_items_per_s,
        peak_flops_per_s,
        kernel_copy_bytes_per_s,
        timestamp_cost_s,
        measured_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        calibration_s: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_grow_from_the_time_taken_within_bounds() {
        let target = TARGET_DISPATCH_S;
        // Far below the target: grows at most sixteenfold.
        assert_eq!(next_size(1000, target / 1000.0, 1 << 30), Some(16_000));
        // Below half the target: grows to what would take the target.
        assert_eq!(next_size(1000, target * 0.49, 1 << 30), Some(2041));
        assert_eq!(next_size(1000, target * 0.4, 1 << 30), Some(2500));
        // Never past the largest size; a zero time does not divide by zero.
        assert_eq!(next_size(1000, 0.0, 5000), Some(5000));
        // Long enough, or as large as allowed: measure this size.
        assert_eq!(next_size(1000, target / 2.0, 1 << 30), None);
        assert_eq!(next_size(5000, 0.0, 5000), None);
    }
}
