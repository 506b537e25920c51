//! Runs a map kernel over a chunk grid on several devices at once: one worker thread per
//! device, each uploading, dispatching and reading back its chunks, writing results
//! straight into the caller's output slice.

use std::ops::Range;
use std::sync::mpsc;
use std::time::Duration;

use crate::device::GpuDevice;
use crate::dispatch::grid_for;
use crate::error::{Error, Result};
use crate::kernel::{MapKernel, Params};

/// One chunk of work handed to a device: its item range and where its output goes.
pub struct ChunkJob<'a> {
    /// Items of the chunk within the whole problem.
    pub range: Range<usize>,
    /// The output words of exactly these items.
    pub output: &'a mut [f32],
}

/// Maps a wgpu error caught in a scope to the core error of device `device`.
fn scoped_error(device: usize, error: wgpu::Error) -> Error {
    match error {
        wgpu::Error::OutOfMemory { .. } => Error::OutOfMemory {
            device,
            reason: error.to_string(),
        },
        other => Error::DeviceLost {
            device,
            reason: other.to_string(),
        },
    }
}

/// A whole-buffer-prefix binding of exactly `bytes`.
pub(crate) fn binding(index: u32, buffer: &wgpu::Buffer, bytes: u64) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding: index,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset: 0,
            size: wgpu::BufferSize::new(bytes),
        }),
    }
}

/// Runs one chunk on one device, synchronously, writing `job.output`.
pub fn run_chunk(
    dev: &GpuDevice,
    kernel: &MapKernel,
    pipeline: &wgpu::ComputePipeline,
    inputs: &[&[f32]],
    job: ChunkJob<'_>,
    timeout: Option<Duration>,
) -> Result<()> {
    if let Some(reason) = dev.lost_reason() {
        return Err(Error::DeviceLost {
            device: dev.id,
            reason,
        });
    }
    let items = job.range.len();
    let grid = grid_for(
        items as u64,
        dev.limits.max_compute_workgroups_per_dimension,
    )
    .ok_or_else(|| {
        Error::invalid(
            "chunk_items",
            format!("{items} items do not fit one dispatch on device {}", dev.id),
        )
    })?;
    let out_bytes = (items * kernel.output_words * 4) as u64;

    let oom_scope = dev.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation_scope = dev.device.push_error_scope(wgpu::ErrorFilter::Validation);

    let params = dev.pool.take(
        &dev.device,
        std::mem::size_of::<Params>() as u64,
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    );
    let uniform = Params {
        n: items as u32,
        row_threads: grid.row_threads(),
        pad: [0; 2],
    };
    dev.queue
        .write_buffer(&params, 0, bytemuck::bytes_of(&uniform));

    let mut input_buffers = Vec::with_capacity(inputs.len());
    for (data, &words) in inputs.iter().zip(&kernel.input_words) {
        let slice = &data[job.range.start * words..job.range.end * words];
        let buffer = dev.pool.take(
            &dev.device,
            (slice.len() * 4) as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        dev.queue
            .write_buffer(&buffer, 0, bytemuck::cast_slice(slice));
        input_buffers.push((buffer, (slice.len() * 4) as u64));
    }
    let output = dev.pool.take(
        &dev.device,
        out_bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    );
    let staging = dev.pool.take(
        &dev.device,
        out_bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );

    let mut entries = vec![binding(0, &params, std::mem::size_of::<Params>() as u64)];
    for (i, (buffer, bytes)) in input_buffers.iter().enumerate() {
        entries.push(binding(i as u32 + 1, buffer, *bytes));
    }
    entries.push(binding(inputs.len() as u32 + 1, &output, out_bytes));
    let bind_group = dev.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(&kernel.id),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });

    let mut encoder = dev
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(&kernel.id),
        });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(&kernel.id),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(grid.x, grid.y, 1);
    }
    encoder.copy_buffer_to_buffer(&output, 0, &staging, 0, out_bytes);
    let submission = dev.queue.submit(Some(encoder.finish()));

    let (sender, receiver) = mpsc::channel();
    staging
        .slice(..out_bytes)
        .map_async(wgpu::MapMode::Read, move |result| {
            // The receiver only goes away if this thread already gave up on the chunk.
            let _ = sender.send(result);
        });

    if let Some(error) = pollster::block_on(validation_scope.pop()) {
        return Err(scoped_error(dev.id, error));
    }
    if let Some(error) = pollster::block_on(oom_scope.pop()) {
        return Err(scoped_error(dev.id, error));
    }

    dev.device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(submission),
            timeout,
        })
        .map_err(|e| Error::DeviceLost {
            device: dev.id,
            reason: match e {
                wgpu::PollError::Timeout => format!(
                    "no answer within sync_timeout_ms={}",
                    timeout.map_or(0, |t| t.as_millis())
                ),
                other => other.to_string(),
            },
        })?;
    let mapped = receiver.recv_timeout(timeout.unwrap_or(Duration::from_secs(3600)));
    match mapped {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            return Err(Error::DeviceLost {
                device: dev.id,
                reason: format!("readback failed: {e}"),
            })
        }
        Err(_) => {
            return Err(Error::DeviceLost {
                device: dev.id,
                reason: dev
                    .lost_reason()
                    .unwrap_or_else(|| "readback never completed".to_string()),
            })
        }
    }
    {
        let view =
            staging
                .slice(..out_bytes)
                .get_mapped_range()
                .map_err(|e| Error::DeviceLost {
                    device: dev.id,
                    reason: format!("readback mapping failed: {e}"),
                })?;
        job.output.copy_from_slice(bytemuck::cast_slice(&view));
    }
    staging.unmap();
    if let Some(reason) = dev.lost_reason() {
        return Err(Error::DeviceLost {
            device: dev.id,
            reason,
        });
    }
    Ok(())
}

/// Runs `jobs[d]` on `devices[d]`, all devices at once, one thread each. Returns the first
/// error any device hit (the others finish their chunks).
pub fn run_on_devices(
    devices: &[&GpuDevice],
    kernel: &MapKernel,
    inputs: &[&[f32]],
    jobs: Vec<Vec<ChunkJob<'_>>>,
    timeout: Option<Duration>,
) -> Result<()> {
    let pipelines = devices
        .iter()
        .map(|dev| dev.pipeline(kernel))
        .collect::<Result<Vec<_>>>()?;
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = devices
            .iter()
            .zip(pipelines.iter())
            .zip(jobs)
            .map(|((dev, pipeline), device_jobs)| {
                scope.spawn(move || {
                    for job in device_jobs {
                        run_chunk(dev, kernel, pipeline, inputs, job, timeout)?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::DeviceLost {
                        device: usize::MAX,
                        reason: "worker thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    results.into_iter().collect()
}
