//! A kernel run on one device with plain wgpu calls — no planner, no chunking, no pool, no
//! worker threads: the baseline that benchmarks compare the engine against.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::executor::binding;
use crate::kernel::Kernel;

fn lost(dev: &GpuDevice, what: impl std::fmt::Display) -> Error {
    Error::DeviceLost {
        device: dev.id,
        reason: format!("raw run: {what}"),
    }
}

fn storage(dev: &GpuDevice, words: usize, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    dev.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("amari-gpu raw"),
        size: (words.max(1) * 4) as u64,
        usage,
        mapped_at_creation: false,
    })
}

/// Uploads `inputs`, dispatches `kernel` once over all `items`, reads the output back.
/// Returns the output and the wall-clock seconds from first upload to readback.
pub fn run_once(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[&[f32]],
    items: usize,
) -> Result<(Vec<f32>, f64)> {
    let pipeline = dev.pipeline(kernel)?;
    let (grid, row_threads) = kernel
        .grid(
            items as u32,
            dev.limits.max_compute_workgroups_per_dimension,
        )
        .ok_or_else(|| Error::invalid("items", format!("{items} items do not fit one dispatch")))?;
    let start = Instant::now();
    let header = kernel.uniform(items as u32, row_threads);
    let uniform = storage(
        dev,
        header.len(),
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    );
    dev.queue
        .write_buffer(&uniform, 0, bytemuck::cast_slice(&header));
    let mut buffers = vec![uniform];
    for data in inputs {
        let buffer = storage(
            dev,
            data.len(),
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        dev.queue
            .write_buffer(&buffer, 0, bytemuck::cast_slice(data));
        buffers.push(buffer);
    }
    let words = kernel.output_words(items);
    let output = storage(
        dev,
        words,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    );
    let staging = storage(
        dev,
        words,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    buffers.push(output);
    let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| binding(i as u32, b, b.size()))
        .collect();
    let bind_group = dev.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("amari-gpu raw"),
        layout: &pipeline.layout,
        entries: &entries,
    });
    let mut encoder = dev
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }
    let output = buffers.last().expect("output buffer");
    encoder.copy_buffer_to_buffer(output, 0, &staging, 0, output.size());
    let submission = dev.queue.submit(Some(encoder.finish()));
    let (sender, receiver) = mpsc::channel();
    staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = sender.send(r);
    });
    dev.device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(submission),
            timeout: Some(Duration::from_secs(600)),
        })
        .map_err(|e| lost(dev, e))?;
    receiver
        .recv()
        .map_err(|e| lost(dev, e))?
        .map_err(|e| lost(dev, e))?;
    let result = {
        let view = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| lost(dev, e))?;
        let all: &[f32] = bytemuck::cast_slice(&view);
        all[..words].to_vec()
    };
    staging.unmap();
    Ok((result, start.elapsed().as_secs_f64()))
}
