//! One chunk on one device: upload its inputs, dispatch the kernel (with GPU timestamps
//! when asked and available), request the readback, then wait and copy the results straight
//! into the caller's output. The worker loop that keeps chunks in flight is in `worker`.

use std::ops::Range;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::device::{Compiled, GpuDevice};
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel};
use crate::pool::Pooled;

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
    out_bytes: u64,
    submission: wgpu::SubmissionIndex,
    mapped: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    staging: Pooled,
    buffers: Vec<Pooled>,
    /// When the chunk was submitted.
    pub submitted: Instant,
    /// Bytes uploaded for it.
    pub bytes_up: u64,
    /// Bytes read back for it.
    pub bytes_down: u64,
    /// Where the kernel's two GPU timestamps sit in the staging buffer, when recorded.
    timestamps_at: Option<u64>,
    /// Bytes of the staging buffer that are mapped (output and timestamps).
    staging_bytes: u64,
    queries: Option<wgpu::QuerySet>,
}

/// What finishing a chunk measured.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    /// Host time the wait for the device began.
    pub wait_start: Instant,
    /// Host time the device had finished (the wait returned).
    pub wait_end: Instant,
    /// Host time the results were in the output.
    pub copied: Instant,
    /// The kernel's begin and end timestamps in GPU ticks, when recorded.
    pub ticks: Option<(u64, u64)>,
}

impl InFlight {
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

/// The error scopes around one submission's commands: out of memory outside validation.
pub struct Scopes {
    oom: wgpu::ErrorScopeGuard,
    validation: wgpu::ErrorScopeGuard,
}

impl Scopes {
    /// Opens both scopes on `dev` (on this thread: wgpu keeps error scopes per thread).
    pub fn open(dev: &GpuDevice) -> Self {
        let oom = dev.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = dev.device.push_error_scope(wgpu::ErrorFilter::Validation);
        Scopes { oom, validation }
    }

    /// Closes both; the first error caught, as this crate's error. Native wgpu reports errors
    /// at the call, so the scopes can be closed as soon as the work is submitted.
    pub fn close(self, device: usize) -> Result<()> {
        if let Some(error) = pollster::block_on(self.validation.pop()) {
            return Err(scoped_error(device, error));
        }
        if let Some(error) = pollster::block_on(self.oom.pop()) {
            return Err(scoped_error(device, error));
        }
        Ok(())
    }
}

/// Requests that `staging`'s first `bytes` be mapped for reading; the receiver gets the
/// outcome once the device has finished the work before it.
pub fn map_for_reading(
    staging: &wgpu::Buffer,
    bytes: u64,
) -> mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>> {
    let (sender, mapped) = mpsc::channel();
    staging
        .slice(..bytes)
        .map_async(wgpu::MapMode::Read, move |result| {
            // The receiver is gone only if the caller already gave up on this work.
            let _ = sender.send(result);
        });
    mapped
}

/// Records the copy of a pass's two timestamps (`queries`) into `staging` at byte `at`, by
/// way of a pooled resolve buffer, which is returned: keep it until the submission completes.
pub fn resolve_timestamps(
    dev: &GpuDevice,
    encoder: &mut wgpu::CommandEncoder,
    queries: Option<&wgpu::QuerySet>,
    staging: &wgpu::Buffer,
    at: Option<u64>,
) -> Option<Pooled> {
    let (query_set, at) = (queries?, at?);
    let target = dev.pool.take(
        &dev.device,
        16,
        wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
    );
    encoder.resolve_query_set(query_set, 0..2, &target, 0);
    encoder.copy_buffer_to_buffer(&target, 0, staging, at, 16);
    Some(target)
}

/// Uploads a chunk's inputs, dispatches the kernel and requests the readback. `resident`
/// holds the worker's copies of the whole-bound inputs (filled on first use).
pub fn submit(
    dev: &GpuDevice,
    kernel: &Kernel,
    pipeline: &Compiled,
    inputs: &[&[f32]],
    range: Range<usize>,
    resident: &mut Resident,
    timed: bool,
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
    // Kernel timestamps ride along in the staging buffer, after the output.
    let timestamps_at =
        (timed && dev.timestamp_period_ns.is_some()).then(|| out_bytes.div_ceil(8) * 8);
    let staging_bytes = timestamps_at.map_or(out_bytes, |at| at + 16);
    let scopes = Scopes::open(dev);

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
        staging_bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    let queries = timestamps_at.map(|_| dev.take_query_set());

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
        layout: &pipeline.layout,
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
            timestamp_writes: queries
                .as_ref()
                .map(|query_set| wgpu::ComputePassTimestampWrites {
                    query_set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }
    encoder.copy_buffer_to_buffer(&buffers[output_index], 0, &staging, 0, out_bytes);
    let resolve = resolve_timestamps(dev, &mut encoder, queries.as_ref(), &staging, timestamps_at);
    buffers.extend(resolve);
    let submission = dev.queue.submit(Some(encoder.finish()));
    let mapped = map_for_reading(&staging, staging_bytes);
    scopes.close(dev.id)?;
    Ok(InFlight {
        out_bytes,
        submission,
        mapped,
        staging,
        buffers,
        submitted: Instant::now(),
        bytes_up,
        bytes_down: out_bytes,
        timestamps_at,
        staging_bytes,
        queries,
    })
}

/// Waits for a submitted chunk and copies its result into `output`. On error the chunk's
/// buffers are discarded and `output` is untouched.
pub fn finish(
    dev: &GpuDevice,
    chunk: InFlight,
    output: &mut [f32],
    timeout: Option<Duration>,
) -> Result<Finished> {
    let wait_start = Instant::now();
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
    let wait_end = Instant::now();
    if let Err(error) = outcome {
        chunk.discard();
        return Err(error);
    }
    let ticks;
    {
        let view = chunk
            .staging
            .slice(..chunk.staging_bytes)
            .get_mapped_range()
            .map_err(|e| lost(dev.id, format!("readback mapping failed: {e}")))?;
        let words: &[f32] = bytemuck::cast_slice(&view[..chunk.out_bytes as usize]);
        output.copy_from_slice(&words[..output.len()]);
        ticks = chunk.timestamps_at.map(|at| {
            let stamps: &[u64] = bytemuck::cast_slice(&view[at as usize..at as usize + 16]);
            (stamps[0], stamps[1])
        });
    }
    chunk.staging.unmap();
    if let Some(queries) = chunk.queries {
        dev.give_back_query_set(queries);
    }
    if let Some(reason) = dev.lost_reason() {
        return Err(lost(dev.id, reason));
    }
    Ok(Finished {
        wait_start,
        wait_end,
        copied: Instant::now(),
        ticks,
    })
}

/// Runs one chunk synchronously (calibration times complete chunks with it), its kernel
/// timed with GPU timestamps when `stamped`.
pub fn run_chunk(
    dev: &GpuDevice,
    kernel: &Kernel,
    pipeline: &Compiled,
    inputs: &[&[f32]],
    job: ChunkJob<'_>,
    timeout: Option<Duration>,
    stamped: bool,
) -> Result<Finished> {
    let mut resident = Resident::new();
    let chunk = submit(
        dev,
        kernel,
        pipeline,
        inputs,
        job.range,
        &mut resident,
        stamped,
    )?;
    finish(dev, chunk, job.output, timeout)
}
