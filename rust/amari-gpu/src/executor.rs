//! Runs a map kernel over the chunk grid on several devices at once: one worker thread per
//! device; each keeps two chunks in flight, so the upload of chunk k+1 and the readback of
//! chunk k-1 overlap the dispatch of chunk k. Results are written straight into the
//! caller's output. A device that fails hands its unfinished chunks to the others.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel};
use crate::pool::Pooled;
use crate::scheduler::Scheduler;

/// Chunks a worker keeps submitted ahead of the one it waits for.
const IN_FLIGHT: usize = 2;

/// One chunk of work: its item range and where its output goes.
pub struct ChunkJob<'a> {
    /// Items of the chunk within the whole problem.
    pub range: Range<usize>,
    /// The output words of exactly these items.
    pub output: &'a mut [f32],
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

fn lost(device: usize, reason: impl Into<String>) -> Error {
    Error::DeviceLost {
        device,
        reason: reason.into(),
    }
}

/// A submitted chunk whose readback has been requested.
pub struct InFlight {
    range: Range<usize>,
    out_bytes: u64,
    submission: wgpu::SubmissionIndex,
    mapped: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    staging: Pooled,
    buffers: Vec<Pooled>,
    /// When the chunk was submitted.
    pub submitted: Instant,
    /// Bytes uploaded for it.
    pub bytes_up: u64,
}

impl InFlight {
    /// Items of the chunk.
    pub fn range(&self) -> &Range<usize> {
        &self.range
    }

    /// Destroys the chunk's buffers: after a failure they may still be in use.
    pub fn discard(self) {
        self.staging.discard();
        for buffer in self.buffers {
            buffer.discard();
        }
    }
}

/// Inputs bound whole, uploaded once per device and call and kept by the worker.
pub type Resident = Vec<Option<(Pooled, u64)>>;

/// Uploads a chunk's inputs, dispatches the kernel and requests the readback. `resident`
/// holds the worker's copies of the whole-bound inputs (filled on first use).
pub fn submit(
    dev: &GpuDevice,
    kernel: &Kernel,
    pipeline: &wgpu::ComputePipeline,
    inputs: &[&[f32]],
    range: Range<usize>,
    resident: &mut Resident,
) -> Result<InFlight> {
    if let Some(reason) = dev.lost_reason() {
        return Err(lost(dev.id, reason));
    }
    let items = range.len();
    let (grid, row_threads) = kernel
        .grid(
            items as u32,
            dev.limits.max_compute_workgroups_per_dimension,
        )
        .ok_or_else(|| {
            Error::invalid(
                "chunk_items",
                format!("{items} items do not fit one dispatch on device {}", dev.id),
            )
        })?;
    let out_bytes = (kernel.output_words(items).max(1) * 4) as u64;
    let oom_scope = dev.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation_scope = dev.device.push_error_scope(wgpu::ErrorFilter::Validation);

    let header = kernel.uniform(items as u32, row_threads);
    let params_bytes = (header.len() * 4) as u64;
    let params = dev.pool.take(
        &dev.device,
        params_bytes,
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    );
    dev.queue
        .write_buffer(&params, 0, bytemuck::cast_slice(&header));
    let mut buffers = vec![params];
    let mut sizes = vec![params_bytes];
    // Index into `buffers` of every binding after the uniform, or None for a resident one.
    let mut slots: Vec<Option<usize>> = Vec::with_capacity(inputs.len());
    let mut bytes_up = 0;
    resident.resize_with(inputs.len(), || None);
    for (i, (data, spec)) in inputs.iter().zip(&kernel.inputs).enumerate() {
        let slice = match *spec {
            Input::PerItem(words) => &data[range.start * words..range.end * words],
            Input::Whole(_) => {
                if resident[i].is_none() {
                    let bytes = (data.len().max(1) * 4) as u64;
                    let buffer = dev.pool.take(
                        &dev.device,
                        bytes,
                        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                    );
                    dev.queue
                        .write_buffer(&buffer, 0, bytemuck::cast_slice(data));
                    bytes_up += (data.len() * 4) as u64;
                    resident[i] = Some((buffer, bytes));
                }
                slots.push(None);
                continue;
            }
        };
        let bytes = (slice.len() * 4) as u64;
        let buffer = dev.pool.take(
            &dev.device,
            bytes,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        dev.queue
            .write_buffer(&buffer, 0, bytemuck::cast_slice(slice));
        slots.push(Some(buffers.len()));
        buffers.push(buffer);
        sizes.push(bytes);
        bytes_up += bytes;
    }
    let output_index = buffers.len();
    buffers.push(dev.pool.take(
        &dev.device,
        out_bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    ));
    sizes.push(out_bytes);
    let staging = dev.pool.take(
        &dev.device,
        out_bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );

    let mut entries = vec![binding(0, &buffers[0], sizes[0])];
    for (i, slot) in slots.iter().enumerate() {
        let entry = match slot {
            Some(index) => binding(i as u32 + 1, &buffers[*index], sizes[*index]),
            None => {
                let (buffer, bytes) = resident[i].as_ref().expect("uploaded above");
                binding(i as u32 + 1, buffer, *bytes)
            }
        };
        entries.push(entry);
    }
    entries.push(binding(
        inputs.len() as u32 + 1,
        &buffers[output_index],
        out_bytes,
    ));
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
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }
    encoder.copy_buffer_to_buffer(&buffers[output_index], 0, &staging, 0, out_bytes);
    let submission = dev.queue.submit(Some(encoder.finish()));
    let (sender, mapped) = mpsc::channel();
    staging
        .slice(..out_bytes)
        .map_async(wgpu::MapMode::Read, move |result| {
            // The receiver is gone only if the worker already gave up on this chunk.
            let _ = sender.send(result);
        });
    // Native wgpu reports errors at the call, so the scopes can be closed right away.
    if let Some(error) = pollster::block_on(validation_scope.pop()) {
        return Err(scoped_error(dev.id, error));
    }
    if let Some(error) = pollster::block_on(oom_scope.pop()) {
        return Err(scoped_error(dev.id, error));
    }
    Ok(InFlight {
        range,
        out_bytes,
        submission,
        mapped,
        staging,
        buffers,
        submitted: Instant::now(),
        bytes_up,
    })
}

/// Waits for a submitted chunk and copies its result into `output`. On error the chunk's
/// buffers are discarded and `output` is untouched.
pub fn finish(
    dev: &GpuDevice,
    chunk: InFlight,
    output: &mut [f32],
    timeout: Option<Duration>,
) -> Result<()> {
    let waited = dev.device.poll(wgpu::PollType::Wait {
        submission_index: Some(chunk.submission.clone()),
        timeout,
    });
    let outcome = match waited {
        Err(wgpu::PollError::Timeout) => Err(lost(
            dev.id,
            format!(
                "no answer within sync_timeout_ms={}",
                timeout.map_or(0, |t| t.as_millis())
            ),
        )),
        Err(other) => Err(lost(dev.id, other.to_string())),
        Ok(_) => match chunk
            .mapped
            .recv_timeout(timeout.unwrap_or(Duration::from_secs(3600)))
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(lost(dev.id, format!("readback failed: {e}"))),
            Err(_) => Err(lost(
                dev.id,
                dev.lost_reason()
                    .unwrap_or_else(|| "readback never completed".into()),
            )),
        },
    };
    if let Err(error) = outcome {
        chunk.discard();
        return Err(error);
    }
    {
        let view = chunk
            .staging
            .slice(..chunk.out_bytes)
            .get_mapped_range()
            .map_err(|e| lost(dev.id, format!("readback mapping failed: {e}")))?;
        let words: &[f32] = bytemuck::cast_slice(&view);
        output.copy_from_slice(&words[..output.len()]);
    }
    chunk.staging.unmap();
    if let Some(reason) = dev.lost_reason() {
        return Err(lost(dev.id, reason));
    }
    Ok(())
}

/// Runs one chunk synchronously (calibration uses it to time a complete chunk).
pub fn run_chunk(
    dev: &GpuDevice,
    kernel: &Kernel,
    pipeline: &wgpu::ComputePipeline,
    inputs: &[&[f32]],
    job: ChunkJob<'_>,
    timeout: Option<Duration>,
) -> Result<()> {
    let mut resident = Resident::new();
    let chunk = submit(dev, kernel, pipeline, inputs, job.range, &mut resident)?;
    finish(dev, chunk, job.output, timeout)
}

/// What a worker reports about one completed chunk, for the model's history.
#[derive(Debug, Clone, Copy)]
pub struct Completed {
    /// Chunk index in the grid.
    pub chunk: usize,
    /// Items in it.
    pub items: usize,
    /// Seconds of device service: from when the device could start it to its completion.
    pub seconds: f64,
}

/// The outcome of one worker.
#[derive(Debug, Default)]
pub struct WorkerReport {
    /// Chunks it completed.
    pub completed: Vec<Completed>,
    /// Seconds from its first submit to its last completion.
    pub busy_s: f64,
    /// Why it stopped early, if it failed.
    pub failure: Option<Error>,
}

/// Everything the workers of one call share.
pub struct Run<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// Inputs, whole problem.
    pub inputs: &'a [&'a [f32]],
    /// Item range of every chunk of the grid.
    pub ranges: &'a [Range<usize>],
    /// Output slice of every chunk, taken by whoever completes it.
    pub outputs: Vec<Mutex<Option<&'a mut [f32]>>>,
    /// Who does what next.
    pub scheduler: Scheduler,
    /// Per-chunk wait limit.
    pub timeout: Option<Duration>,
    /// Whether the work counts in the devices' counters and fault countdowns (calibration
    /// runs do not).
    pub counted: bool,
}

impl Run<'_> {
    /// Works through chunks on `dev` (worker `slot`) until none is left or the device fails.
    pub fn work(&self, slot: usize, dev: &GpuDevice) -> WorkerReport {
        let mut report = WorkerReport::default();
        let started = Instant::now();
        let mut in_flight: VecDeque<(usize, InFlight)> = VecDeque::new();
        let mut held: Option<usize> = None;
        let mut resident = Resident::new();
        let mut last_done = started;
        let outcome = (|| -> Result<()> {
            let pipeline = dev.pipeline(self.kernel)?;
            loop {
                while in_flight.len() < IN_FLIGHT {
                    let next = if in_flight.is_empty() {
                        self.scheduler.next(slot)
                    } else {
                        self.scheduler.try_next(slot)
                    };
                    let Some(chunk) = next else { break };
                    held = Some(chunk);
                    if let Some(reason) = dev.health.injected_fault_due().filter(|_| self.counted) {
                        return Err(lost(dev.id, reason));
                    }
                    let submitted = submit(
                        dev,
                        self.kernel,
                        &pipeline,
                        self.inputs,
                        self.ranges[chunk].clone(),
                        &mut resident,
                    )?;
                    in_flight.push_back((chunk, submitted));
                    held = None;
                }
                let Some((chunk, flight)) = in_flight.pop_front() else {
                    return Ok(());
                };
                let (items, bytes_up, out_bytes, submitted) = (
                    flight.range().len(),
                    flight.bytes_up,
                    flight.out_bytes,
                    flight.submitted,
                );
                held = Some(chunk);
                let mut slot_guard = self.outputs[chunk].lock().expect("output lock");
                let output = slot_guard
                    .as_deref_mut()
                    .expect("each chunk completes once");
                finish(dev, flight, output, self.timeout)?;
                *slot_guard = None;
                drop(slot_guard);
                held = None;
                let now = Instant::now();
                let service_start = if submitted > last_done {
                    submitted
                } else {
                    last_done
                };
                report.completed.push(Completed {
                    chunk,
                    items,
                    seconds: (now - service_start).as_secs_f64(),
                });
                last_done = now;
                if self.counted {
                    dev.counters.chunk_done(items as u64, bytes_up, out_bytes);
                    dev.health.chunk_completed();
                }
                self.scheduler.done();
            }
        })();
        report.busy_s = if report.completed.is_empty() {
            0.0
        } else {
            (last_done - started).as_secs_f64()
        };
        match outcome {
            Ok(()) => self.scheduler.exit(),
            Err(error) => {
                let mut unfinished: Vec<usize> = held.into_iter().collect();
                for (buffer, _) in resident.drain(..).flatten() {
                    buffer.discard();
                }
                for (chunk, flight) in in_flight.drain(..) {
                    unfinished.push(chunk);
                    flight.discard();
                }
                if self.counted {
                    dev.counters.chunks_failed(unfinished.len() as u64);
                }
                dev.health.mark_failed(&error.to_string());
                dev.pool.clear();
                self.scheduler.fail(slot, unfinished);
                report.failure = Some(error);
            }
        }
        report
    }
}
