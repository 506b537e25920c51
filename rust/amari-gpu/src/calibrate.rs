//! Micro-benchmarks run on a device to measure what it can do: launch latency, host→device
//! and device→host transfer, on-device copy bandwidth, and items/s of each kernel family's
//! reference kernel. Every figure is a median of a few timed repetitions on the device
//! itself; nothing is looked up from the vendor.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::executor::{run_chunk, ChunkJob};
use crate::families::families;

/// Bytes moved per transfer measurement: large enough that latency is a small part.
const TRANSFER_BYTES: u64 = 16 << 20;
/// Timed repetitions per figure (the median is kept).
const REPEATS: usize = 3;

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

fn wait(dev: &GpuDevice, submission: wgpu::SubmissionIndex) -> Result<()> {
    dev.device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(submission),
            timeout: Some(Duration::from_secs(60)),
        })
        .map(|_| ())
        .map_err(|e| Error::DeviceLost {
            device: dev.id,
            reason: format!("calibration: {e}"),
        })
}

fn buffer(dev: &GpuDevice, bytes: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    dev.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("amari-gpu calibration"),
        size: bytes,
        usage,
        mapped_at_creation: false,
    })
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
    let source = buffer(
        dev,
        TRANSFER_BYTES,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    );
    let staging = buffer(
        dev,
        TRANSFER_BYTES,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    let mut host = vec![0u8; TRANSFER_BYTES as usize];
    let seconds = timed(REPEATS, || {
        let mut encoder = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(&source, 0, &staging, 0, TRANSFER_BYTES);
        let submission = dev.queue.submit(Some(encoder.finish()));
        let (sender, receiver) = mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = sender.send(r);
        });
        wait(dev, submission)?;
        receiver
            .recv()
            .map_err(|e| Error::DeviceLost {
                device: dev.id,
                reason: format!("calibration readback: {e}"),
            })?
            .map_err(|e| Error::DeviceLost {
                device: dev.id,
                reason: format!("calibration readback: {e}"),
            })?;
        host.copy_from_slice(&staging.slice(..).get_mapped_range().map_err(|e| {
            Error::DeviceLost {
                device: dev.id,
                reason: format!("calibration readback: {e}"),
            }
        })?);
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

/// A kernel's buffers and bind group, filled once, so that timing sees only the dispatch.
struct Resident {
    bind_group: wgpu::BindGroup,
    pipeline: std::sync::Arc<crate::device::Compiled>,
    grid: [u32; 3],
    _buffers: Vec<wgpu::Buffer>,
}

impl Resident {
    fn new(
        dev: &GpuDevice,
        kernel: &crate::kernel::Kernel,
        pipeline: &std::sync::Arc<crate::device::Compiled>,
        items: usize,
    ) -> Result<Self> {
        let (grid, row_threads) = kernel
            .grid(
                items as u32,
                dev.limits.max_compute_workgroups_per_dimension,
            )
            .ok_or_else(|| {
                Error::invalid(
                    "calibration_items",
                    format!("{items} items do not fit one dispatch"),
                )
            })?;
        let header = kernel.uniform(items as u32, row_threads);
        let uniform = buffer(
            dev,
            (header.len() * 4) as u64,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        );
        dev.queue
            .write_buffer(&uniform, 0, bytemuck::cast_slice(&header));
        let mut buffers = vec![uniform];
        let sizes = (0..kernel.inputs.len())
            .map(|i| kernel.input_len(i, items))
            .chain(std::iter::once(kernel.output_words(items)));
        for words in sizes {
            let storage = buffer(
                dev,
                (words.max(1) * 4) as u64,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            );
            // Inputs hold ones rather than zeros so no driver can shortcut the arithmetic.
            dev.queue.write_buffer(
                &storage,
                0,
                bytemuck::cast_slice(&vec![1.0f32; words.max(1)]),
            );
            buffers.push(storage);
        }
        let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| crate::executor::binding(i as u32, b, b.size()))
            .collect();
        let bind_group = dev.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("amari-gpu calibration"),
            layout: &pipeline.layout,
            entries: &entries,
        });
        Ok(Resident {
            bind_group,
            pipeline: std::sync::Arc::clone(pipeline),
            grid,
            _buffers: buffers,
        })
    }

    fn run(&self, dev: &GpuDevice) -> Result<()> {
        let mut encoder = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(self.grid[0], self.grid[1], self.grid[2]);
        }
        wait(dev, dev.queue.submit(Some(encoder.finish())))
    }
}

/// Items/s of each family's reference kernel with its data already on the device.
fn measure_families(dev: &GpuDevice) -> Result<BTreeMap<String, f64>> {
    let mut rates = BTreeMap::new();
    for family in families() {
        let kernel = (family.reference)();
        let pipeline = dev.pipeline(&kernel)?;
        let items = family.calibration_items;
        let resident = Resident::new(dev, &kernel, &pipeline, items)?;
        let seconds = timed(REPEATS, || resident.run(dev))?;
        rates.insert(family.name.to_string(), items as f64 / seconds);
    }
    Ok(rates)
}

/// Flops per second of the FMA-chain kernel on resident data.
fn measure_peak(dev: &GpuDevice) -> Result<f64> {
    let kernel = crate::kernel::Kernel {
        inputs: vec![crate::kernel::Input::PerItem(4)],
        output: crate::kernel::Output::PerItem(4),
        ..crate::kernel::Kernel::map("peak", "calibration", crate::shaders::PEAK)
    };
    let pipeline = dev.pipeline(&kernel)?;
    let threads = 1 << 14;
    let resident = Resident::new(dev, &kernel, &pipeline, threads)?;
    let seconds = timed(REPEATS, || resident.run(dev))?;
    Ok(threads as f64 * crate::shaders::PEAK_FLOPS_PER_THREAD / seconds)
}

/// Bytes read plus written per second by the streaming-copy kernel on resident data.
fn measure_kernel_copy(dev: &GpuDevice) -> Result<f64> {
    let kernel = crate::kernel::Kernel {
        inputs: vec![crate::kernel::Input::PerItem(4)],
        output: crate::kernel::Output::PerItem(4),
        ..crate::kernel::Kernel::map("copy", "calibration", crate::shaders::COPY)
    };
    let pipeline = dev.pipeline(&kernel)?;
    let threads = (TRANSFER_BYTES / 16) as usize;
    let resident = Resident::new(dev, &kernel, &pipeline, threads)?;
    let seconds = timed(REPEATS, || resident.run(dev))?;
    Ok(2.0 * TRANSFER_BYTES as f64 / seconds)
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
