//! One chunk on one wgpu device: upload its inputs, dispatch the kernel (with GPU
//! timestamps when asked and available), request the readback, then wait and copy the
//! results straight into the caller's output; an interrupted call stops waiting and abandons
//! the chunk to the device. This is the wgpu device's [`Runner`]; the worker loop that keeps
//! chunks in flight is in `worker`.

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Begun, Finished, Job, Runner};
use crate::device::{Compiled, GpuDevice, WgpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::{self, binding, Handed, Limit, Scopes, Staging, Uploads};
use crate::interrupt::Interrupt;
use crate::kernel::{Input, Kernel};
use crate::passes::{self, Launch};
use crate::pool::Pooled;

/// One chunk of work: its item range and where its output goes.
pub struct ChunkJob<'a> {
    /// Items of the chunk within the whole problem.
    pub range: Range<usize>,
    /// The output words of exactly these items.
    pub output: &'a mut [f32],
}

/// A chunk handed to the device's queue; its readback is requested once the queue has
/// taken it ([`InFlight::wait_submitted`]).
pub struct InFlight {
    handed: Handed,
    /// Set once the queue has taken the chunk.
    submission: Option<wgpu::SubmissionIndex>,
    staging: Staging,
    buffers: Vec<Pooled>,
    /// The chunk's items, and whether its kernel writes a loop-check word after the output.
    range: Range<usize>,
    loop_check: bool,
    /// When the chunk was submitted.
    pub submitted: Instant,
    /// Bytes uploaded for it.
    pub bytes_up: u64,
    /// Bytes read back for it.
    pub bytes_down: u64,
}

impl InFlight {
    /// Waits until the device's queue has taken the chunk (a driver may hold the submit
    /// until earlier work is done) and requests its readback; gives up with
    /// [`Error::Cancelled`](crate::Error::Cancelled) within a wait slice of `stop` being
    /// set. A worker calls it on its latest chunk before any other call on the device.
    pub fn wait_submitted(
        &mut self,
        dev: &GpuDevice,
        timeout: Option<Duration>,
        stop: Option<&Interrupt>,
    ) -> Result<wgpu::SubmissionIndex> {
        if let Some(index) = &self.submission {
            return Ok(index.clone());
        }
        let index = self.handed.submitted(dev, Limit::Sync(timeout), stop)?;
        self.staging.map();
        self.submission = Some(index.clone());
        Ok(index)
    }

    /// Whether the queue took the chunk on the thread that submitted it.
    #[cfg(feature = "bench-support")]
    pub(crate) fn inline(&self) -> bool {
        self.handed.inline()
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

/// A worker's buffers the device may still be using: its chunks in flight and its resident
/// inputs when it stopped early.
struct Abandoned {
    /// Chunks handed to the queue and not finished.
    chunks: Vec<InFlight>,
    /// The whole-bound inputs those chunks read.
    resident: Resident,
}

impl Abandoned {
    /// Gives every buffer to wgpu, which frees it once the work using it is done.
    fn release(self) {
        for chunk in self.chunks {
            chunk.discard();
        }
        for (buffer, _) in self.resident.into_iter().flatten() {
            buffer.discard();
        }
    }

    /// [`Abandoned::release`] on a thread of its own, so that an interrupted call returns
    /// at once: on GL freeing a buffer takes the adapter's lock, which a submit handed off
    /// holds for as long as the driver runs the chunk before it. Without a thread the
    /// buffers are released here.
    fn release_later(self) {
        let release = |slot: &Mutex<Option<Abandoned>>| {
            let taken = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(abandoned) = taken {
                abandoned.release();
            }
        };
        let slot = Arc::new(Mutex::new(Some(self)));
        let theirs = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name("amari-gpu release".into())
            .spawn(move || release(&theirs));
        if let Err(e) = spawned {
            log::debug!("no thread to release abandoned buffers ({e}): released in place");
            release(&slot);
        }
    }
}

/// Uploads a chunk's inputs, encodes the kernel and its readback copy, and hands them to
/// the device's queue (see [`gpu_io::submit_handed`]: make no other call on the device
/// before [`InFlight::wait_submitted`]). `resident` holds the worker's copies of the
/// whole-bound inputs (filled on first use).
pub fn submit(
    dev: &GpuDevice,
    kernel: &Kernel,
    pipeline: &Compiled,
    inputs: &[&[f32]],
    range: Range<usize>,
    resident: &mut Resident,
    timed: bool,
) -> Result<InFlight> {
    gpu_io::check_alive(dev)?;
    let items = range.len();
    let launch = Launch::new(dev, kernel, items, "chunk_items")?;
    let out_bytes = (kernel.output_words(items).max(1) * 4) as u64;
    // The loop-check value rides after the output: bound, cleared and read back with it.
    let check_bytes = kernel.loop_check_bytes() as u64;
    let bound_bytes = out_bytes + check_bytes;
    let scopes = Scopes::open(dev);

    let mut buffers = Vec::with_capacity(inputs.len() + 1);
    let mut sizes = Vec::with_capacity(inputs.len() + 1);
    // Index into `buffers` of every binding after the uniform, or None for a resident one.
    let mut slots: Vec<Option<usize>> = Vec::with_capacity(inputs.len());
    let mut bytes_up = 0;
    // Every upload of the chunk, the uniform blocks too, goes through one pooled staging.
    let mut uploads = Uploads::default();
    resident.resize_with(inputs.len(), || None);
    for (i, (data, spec)) in inputs.iter().zip(&kernel.inputs).enumerate() {
        let slice = match *spec {
            Input::PerItem(words) => &data[range.start * words..range.end * words],
            Input::Whole(_) => {
                if resident[i].is_none() {
                    let buffer = uploads.buffer(dev, data, wgpu::BufferUsages::STORAGE);
                    resident[i] = Some((buffer, (data.len().max(1) * 4) as u64));
                    bytes_up += (data.len() * 4) as u64;
                }
                slots.push(None);
                continue;
            }
        };
        slots.push(Some(buffers.len()));
        buffers.push(uploads.buffer(dev, slice, wgpu::BufferUsages::STORAGE));
        sizes.push((slice.len().max(1) * 4) as u64);
        bytes_up += (slice.len() * 4) as u64;
    }
    let output_index = buffers.len();
    let mut output_usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
    if kernel.loop_check {
        output_usage |= wgpu::BufferUsages::COPY_DST;
    }
    buffers.push(dev.pool.take(&dev.gpu().device, bound_bytes, output_usage));
    sizes.push(bound_bytes);
    // Kernel timestamps ride along in the staging buffer, after the output.
    let mut staging = Staging::new(dev, bound_bytes, timed);

    let mut entries = Vec::with_capacity(inputs.len() + 1);
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
        bound_bytes,
    ));
    let mut encoder = dev
        .gpu()
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(&kernel.id),
        });
    if kernel.loop_check {
        encoder.clear_buffer(&buffers[output_index], out_bytes, Some(check_bytes));
    }
    let uniforms = passes::encode(
        dev,
        &mut encoder,
        &mut uploads,
        pipeline,
        &launch,
        &entries,
        staging.queries(),
    )?;
    drop(entries);
    buffers.extend(uniforms);
    encoder.copy_buffer_to_buffer(&buffers[output_index], 0, staging.buffer(), 0, bound_bytes);
    staging.resolve_timestamps(dev, &mut encoder);
    let commands = encoder.finish();
    scopes.close(dev.id)?;
    let handed = gpu_io::submit_handed(dev, commands)?;
    Ok(InFlight {
        handed,
        submission: None,
        staging,
        buffers,
        range,
        loop_check: kernel.loop_check,
        submitted: Instant::now(),
        bytes_up,
        bytes_down: bound_bytes,
    })
}

/// Waits for a chunk handed to the queue and copies its result into `output`. On error the chunk's
/// buffers are discarded and `output` is untouched; so it is when the kernel's loop-check
/// word says a driver cut its loops short (the results would be wrong), which is the
/// user's error of [`loop_cap_error`]. Once `stop` is set the wait gives up
/// with [`Error::Cancelled`](crate::Error::Cancelled) (within a wait slice) rather than
/// wait for a long dispatch: the device finishes the chunk into buffers wgpu keeps alive
/// until then, and nothing is copied.
pub fn finish(
    dev: &GpuDevice,
    mut chunk: InFlight,
    output: &mut [f32],
    timeout: Option<Duration>,
    stop: Option<&Interrupt>,
) -> Result<Finished> {
    let wait_start = Instant::now();
    let waited = chunk
        .wait_submitted(dev, timeout, stop)
        .and_then(|index| chunk.staging.wait_or_stop(dev, index, timeout, stop));
    let wait_end = Instant::now();
    if let Err(error) = waited {
        chunk.discard();
        return Err(error);
    }
    let loop_check = chunk.loop_check;
    let (cut_short, ticks) = chunk.staging.read(dev, |view| {
        let words: &[u32] = bytemuck::cast_slice(view);
        if loop_check && words.get(output.len()).is_none_or(|&w| w != 0) {
            return true;
        }
        output.copy_from_slice(bytemuck::cast_slice(&words[..output.len()]));
        false
    })?;
    if cut_short {
        return Err(loop_cap_error(dev, chunk.range));
    }
    Ok(Finished {
        wait_start,
        wait_end,
        copied: Instant::now(),
        ticks,
        staged: true,
    })
}

impl Runner for WgpuDevice {
    type Prepared = Arc<Compiled>;
    type Flight = InFlight;
    type Held = Resident;
    // Two in flight: the upload of chunk k+1 and the readback of chunk k-1 overlap the
    // dispatch of chunk k.
    const DEPTH: usize = 2;

    fn prepare(&self, dev: &GpuDevice, kernel: &Kernel) -> Result<Arc<Compiled>> {
        dev.pipeline(kernel)
    }

    fn begin(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        prepared: &Arc<Compiled>,
        range: Range<usize>,
        held: &mut Resident,
    ) -> Result<(InFlight, Begun)> {
        let flight = submit(
            dev, job.kernel, prepared, job.inputs, range, held, job.timed,
        )?;
        let begun = Begun {
            submitted: flight.submitted,
            bytes_up: flight.bytes_up,
            bytes_down: flight.bytes_down,
        };
        Ok((flight, begun))
    }

    fn wait_submitted(&self, dev: &GpuDevice, job: &Job<'_>, flight: &mut InFlight) -> Result<()> {
        flight.wait_submitted(dev, job.timeout, job.stop).map(drop)
    }

    fn finish(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        _prepared: &Arc<Compiled>,
        flight: InFlight,
        output: &mut [f32],
    ) -> Result<Finished> {
        finish(dev, flight, output, job.timeout, job.stop)
    }

    fn abandon(&self, flights: Vec<InFlight>, held: Option<Resident>, later: bool) {
        let abandoned = Abandoned {
            chunks: flights,
            resident: held.unwrap_or_default(),
        };
        if later {
            abandoned.release_later();
        } else {
            abandoned.release();
        }
    }
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
    finish(dev, chunk, job.output, timeout, None)
}

/// The error of a chunk whose loop-check word was set (see `rows::wrap`): the driver stopped the
/// kernel's loops early on some of `rows`, so none of the chunk's results are kept.
pub(crate) fn loop_cap_error(dev: &GpuDevice, rows: Range<usize>) -> Error {
    Error::KernelCompile(format!(
        "map_rows: the loops of row stopped early on device {} ({}, {}) for some of rows \
         {}..{}, so no result was returned. Mesa's llvmpipe and lavapipe end every loop of \
         one invocation after 65,535 iterations in total, counting all of its loops \
         together (the ones map_rows adds to copy the rows in and out too); nothing else \
         tells the kernel. Do fewer loop iterations per row: split a long loop over more \
         rows, or unroll part of it. No device was marked unhealthy",
        dev.id, dev.adapter.name, dev.adapter.backend, rows.start, rows.end
    ))
}
