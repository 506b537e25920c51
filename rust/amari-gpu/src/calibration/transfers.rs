//! Transfer and latency figures of a device: host→device and device→host bytes per second,
//! on-device buffer copies, the smallest complete chunk, and what a GPU timestamp adds to a
//! chunk. Each is the median of a few timed repetitions on the device itself.

use std::time::Instant;

use super::families::families;
use super::measure::{buffer, median, timed, wait, REPEATS, STEP_LIMIT};
use crate::device::GpuDevice;
use crate::error::Result;
use crate::gpu_io::{self, Limit};
use crate::runner::executor::{run_chunk, ChunkJob};

/// Bytes moved per transfer measurement: large enough that latency is a small part.
const TRANSFER_BYTES: u64 = 16 << 20;

pub(super) fn measure_h2d(dev: &GpuDevice) -> Result<f64> {
    let target = buffer(
        dev,
        TRANSFER_BYTES,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    );
    let data = vec![1u8; TRANSFER_BYTES as usize];
    let seconds = timed(REPEATS, || {
        dev.gpu().queue.write_buffer(&target, 0, &data);
        wait(dev, dev.gpu().submit(None))
    })?;
    Ok(TRANSFER_BYTES as f64 / seconds)
}

pub(super) fn measure_d2h(dev: &GpuDevice) -> Result<f64> {
    let (source, staging) = gpu_io::readback_buffers(dev, "amari-gpu calibration", TRANSFER_BYTES);
    let mut host = vec![0u8; TRANSFER_BYTES as usize];
    let seconds = timed(REPEATS, || {
        let mut encoder = dev
            .gpu()
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(&source, 0, &staging, 0, TRANSFER_BYTES);
        let submission = dev.gpu().submit(Some(encoder.finish()));
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

pub(super) fn measure_copy(dev: &GpuDevice) -> Result<f64> {
    let bytes = 2 * TRANSFER_BYTES;
    let source = buffer(dev, bytes, wgpu::BufferUsages::COPY_SRC);
    let target = buffer(dev, bytes, wgpu::BufferUsages::COPY_DST);
    let seconds = timed(REPEATS, || {
        let mut encoder = dev
            .gpu()
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_buffer_to_buffer(&source, 0, &target, 0, bytes);
        wait(dev, dev.gpu().submit(Some(encoder.finish())))
    })?;
    Ok(2.0 * bytes as f64 / seconds)
}

/// Seconds of one complete smallest chunk of the first family's reference kernel.
pub(super) fn measure_latency(dev: &GpuDevice) -> Result<f64> {
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

/// What timing a chunk's kernel with GPU timestamp queries adds to the chunk: some drivers
/// (lavapipe among them) synchronise around every timestamp, which profiling must not hide.
pub(super) fn measure_timestamp_cost(dev: &GpuDevice) -> Result<f64> {
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
