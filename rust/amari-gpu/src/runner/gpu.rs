//! A wgpu device as a [`Shards`] holder: shard words in pooled storage buffers (allocated
//! in an error scope, so running out of memory is an error, not an abort), written with the
//! queue and read back through a staging buffer; a row kernel over a shard encoded and
//! submitted in pieces that fit the device's binding limit (each bound at its byte offset in
//! the shard buffers) and waited for when the shard is finished. A kernel with a loop check
//! (a user's, see `rows::wrap`) has each piece's check word read back, so a shard whose
//! loops a driver cut short is refused as the engine's chunks are.

use std::ops::Range;
use std::time::Duration;

use super::{Partials, Piece, Reduced, Run, Shard, ShardChunks, Shards, Storage, Unfinished};
use crate::device::{Compiled, GpuDevice, WgpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::{self, Limit, Mapped, Scopes, Staging, Uploads};
use crate::kernel::{Input, Kernel};
use crate::passes::{self, Launch};
use crate::pool::Pooled;

/// Usage of every shard buffer: kernels read and write it, copies go both ways.
const SHARD_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl Shards for WgpuDevice {
    fn largest_shard(&self, dev: &GpuDevice) -> Option<u64> {
        Some(dev.limits.max_buffer_size)
    }

    fn copies_within(&self) -> bool {
        true
    }

    fn copy_within(&self, _dev: &GpuDevice, target: &mut Storage, pieces: &[Piece]) -> Result<()> {
        let target = target.buffer()?;
        if pieces.is_empty() {
            return Ok(());
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("resident reshard"),
            });
        for (source, from, into) in pieces {
            let source = source.buffer()?;
            encoder.copy_buffer_to_buffer(
                source,
                (from.start * 4) as u64,
                target,
                (into.start * 4) as u64,
                (from.len() * 4) as u64,
            );
        }
        self.submit(Some(encoder.finish()));
        Ok(())
    }

    fn allocate(&self, dev: &GpuDevice, words: usize) -> Result<Storage> {
        gpu_io::check_alive(dev)?;
        let bytes = (words.max(1) * 4) as u64;
        let scopes = Scopes::open(dev);
        let buffer = dev.pool.take(&self.device, bytes, SHARD_USAGE);
        scopes.close(dev.id).map_err(|e| with_bytes(e, bytes))?;
        Ok(Storage::Wgpu(buffer))
    }

    fn put(&self, dev: &GpuDevice, data: &[f32]) -> Result<Storage> {
        let storage = self.allocate(dev, data.len())?;
        if let Storage::Wgpu(buffer) = &storage {
            self.queue
                .write_buffer(buffer, 0, bytemuck::cast_slice(data));
            dev.counters.moved((data.len() * 4) as u64, 0);
        }
        Ok(storage)
    }

    fn run_shard(&self, dev: &GpuDevice, kernel: &Kernel, inputs: &[Shard], items: usize) -> Run {
        // A loop check's value follows the rows (see `submit`).
        let words = items * kernel.output_words_per_item();
        let out = self.allocate(dev, words + kernel.loop_check_bytes() / 4)?;
        let (submission, checks) = submit(dev, kernel, inputs, &out, items)?;
        Ok((out, Some(Box::new(Submitted { submission, checks }))))
    }

    fn reduce_shard(&self, dev: &GpuDevice, kernel: &Kernel, span: &ShardChunks<'_>) -> Reduced {
        let buffer = span.storage.buffer()?;
        let (cols, words) = (span.cols, span.words);
        // Windows start at rows whose byte offsets (rows and per-row words alike) are
        // multiples of the device's offset alignment.
        let align = dev.limits.min_storage_buffer_offset_alignment.max(4) as usize;
        let step = align / 4;
        let widest = ((step + span.chunk_items) * cols * 4) as u64;
        if widest > dev.max_binding_bytes() || (words * 4) as u64 > dev.max_binding_bytes() {
            return Ok(None);
        }
        let pipeline = dev.pipeline(kernel)?;
        let stride = words.div_ceil(step) * step;
        let per_row = span.per_row.map(|w| self.put(dev, w)).transpose()?;
        // Words of the per-row input a row (the window's offset stays aligned: a multiple).
        let per_row_words = match kernel.inputs.get(1) {
            Some(Input::PerItem(k)) => *k,
            _ => 1,
        };
        let results = self.allocate(dev, span.chunks.len() * stride)?;
        let results_buffer = results.buffer()?;
        let scopes = Scopes::open(dev);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(&kernel.id),
            });
        let mut uniforms = Vec::with_capacity(span.chunks.len());
        for (i, c) in span.chunks.clone().enumerate() {
            let rows = span.local(c);
            let window = rows.start - rows.start % step;
            let first = rows.start - window;
            let bound = first + rows.len();
            let mut launch = Launch::new(dev, kernel, rows.len(), "rows")?;
            launch.header[2] = first as u32;
            // Byte offsets and sizes of the bindings (u64, as wgpu takes them).
            let bytes = |words: usize| (words * 4) as u64;
            let mut entries = vec![gpu_io::binding_at(
                1,
                buffer,
                bytes(window * cols),
                bytes(bound * cols),
            )];
            if let Some(Storage::Wgpu(w)) = &per_row {
                let k = per_row_words;
                entries.push(gpu_io::binding_at(
                    2,
                    w,
                    bytes(window * k),
                    bytes(bound * k),
                ));
            }
            let index = entries.len() as u32 + 1;
            entries.push(gpu_io::binding_at(
                index,
                results_buffer,
                bytes(i * stride),
                bytes(words),
            ));
            let recorded = encode_piece(dev, &mut encoder, &pipeline, &launch, &entries)?;
            uniforms.extend(recorded);
        }
        self.submit(Some(encoder.finish()));
        scopes.close(dev.id)?;
        Ok(Some(Box::new(Strided {
            storage: results,
            chunks: span.chunks.len(),
            words,
            stride,
        })))
    }
}

/// Copies `out.len()` words of `buffer` (a shard on `dev`) from word `at` into `out`
/// through a staging buffer, waiting for the device within `timeout`.
pub(super) fn read(
    dev: &GpuDevice,
    buffer: &wgpu::Buffer,
    at: usize,
    out: &mut [f32],
    timeout: Option<Duration>,
) -> Result<()> {
    gpu_io::check_alive(dev)?;
    if out.is_empty() {
        return Ok(());
    }
    let bytes = (out.len() * 4) as u64;
    let mut staging = Staging::new(dev, bytes, false);
    let mut encoder = dev
        .gpu()
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("resident gather"),
        });
    encoder.copy_buffer_to_buffer(buffer, (at * 4) as u64, staging.buffer(), 0, bytes);
    let submission = dev.gpu().submit(Some(encoder.finish()));
    staging.map();
    if let Err(error) = staging.wait(dev, submission, timeout) {
        staging.discard();
        return Err(error);
    }
    staging.read(dev, |view| {
        out.copy_from_slice(bytemuck::cast_slice(view));
    })?;
    dev.counters.moved(0, bytes);
    Ok(())
}

/// A shard's partials on their way from a wgpu device: each chunk's at a multiple of
/// `stride` words of `storage` (the offset alignment), `words` of it the partial.
struct Strided {
    storage: Storage,
    chunks: usize,
    words: usize,
    stride: usize,
}

impl Partials for Strided {
    fn collect(
        self: Box<Self>,
        dev: &GpuDevice,
        out: &mut [f32],
        timeout: Option<Duration>,
    ) -> Result<()> {
        let mut strided = crate::alloc::zeroed("partials", self.chunks * self.stride)?;
        self.storage.read(dev, 0, &mut strided, timeout)?;
        for (partial, got) in out
            .chunks_exact_mut(self.words)
            .zip(strided.chunks_exact(self.stride))
        {
            partial.copy_from_slice(&got[..self.words]);
        }
        Ok(())
    }
}

/// A shard's kernel submitted to a wgpu device, with its loop checks.
struct Submitted {
    submission: wgpu::SubmissionIndex,
    checks: Option<LoopChecks>,
}

impl Unfinished for Submitted {
    fn finish(
        self: Box<Self>,
        dev: &GpuDevice,
        rows: &Range<usize>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let limit = Limit::Sync(timeout);
        gpu_io::wait(dev, Some(self.submission.clone()), limit)?;
        gpu_io::check_alive(dev)?;
        match self.checks {
            Some(checks) => checks.verify(dev, self.submission, limit, rows),
            None => Ok(()),
        }
    }
}

/// Records the passes of one piece over shard buffers, its uniform blocks its only uploads
/// (see [`passes::encode`]); returns them, to keep until the submission has run.
fn encode_piece(
    dev: &GpuDevice,
    encoder: &mut wgpu::CommandEncoder,
    pipeline: &Compiled,
    launch: &Launch<'_>,
    entries: &[wgpu::BindGroupEntry<'_>],
) -> Result<Vec<Pooled>> {
    let mut uploads = Uploads::default();
    passes::encode(dev, encoder, &mut uploads, pipeline, launch, entries, None)
}

/// An out-of-memory error that says how many bytes were asked.
fn with_bytes(error: Error, bytes: u64) -> Error {
    match error {
        Error::OutOfMemory { device, reason } => Error::OutOfMemory {
            device,
            reason: format!("cannot allocate {bytes} bytes for a resident shard: {reason}"),
        },
        other => other,
    }
}

/// Rows a single dispatch covers at most, so every binding of a piece fits the device's
/// binding limit; a multiple of 256 rows keeps every piece's byte offset aligned.
fn piece_rows(dev: &GpuDevice, kernel: &Kernel) -> usize {
    let per_row = kernel.widest_binding_bytes_per_item().max(1);
    // Room for the loop-check value after a piece's output rows.
    let check = kernel.loop_check_bytes().max(4) as u64;
    let rows = (dev.max_binding_bytes().saturating_sub(check) / per_row) as usize;
    (rows - rows % 256).max(256)
}

/// The loop-check words of a shard's pieces, copied to a mappable buffer after each piece
/// ran (the next piece overwrites the word with its first row).
struct LoopChecks {
    staging: wgpu::Buffer,
    mapped: Option<Mapped>,
    pieces: Vec<Range<usize>>,
}

impl LoopChecks {
    /// Once the submission has run: an error naming the first piece whose loops a driver
    /// cut short (the shard's results are then not to be kept).
    fn verify(
        mut self,
        dev: &GpuDevice,
        submission: wgpu::SubmissionIndex,
        limit: Limit,
        rows: &Range<usize>,
    ) -> Result<()> {
        let bytes = (self.pieces.len() * 4) as u64;
        let mapped = self
            .mapped
            .take()
            .ok_or_else(|| Error::Internal("loop checks were never mapped".into()))?;
        gpu_io::wait_mapped(dev, submission, &mapped, limit)?;
        let cut = {
            let view = self
                .staging
                .slice(..bytes)
                .get_mapped_range()
                .map_err(|e| gpu_io::lost(dev.id, format!("readback mapping failed: {e}")))?;
            let words: &[u32] = bytemuck::cast_slice(&view);
            words.iter().position(|&w| w != 0)
        };
        self.staging.unmap();
        match cut {
            Some(i) => {
                let piece = &self.pieces[i];
                Err(crate::runner::executor::loop_cap_error(
                    dev,
                    rows.start + piece.start..rows.start + piece.end,
                ))
            }
            None => Ok(()),
        }
    }
}

/// Encodes and submits `kernel` over the `items` rows of one shard on wgpu device `dev`:
/// `inputs[i]` is the shard's rows of input i (or the whole input), `out` the new shard
/// (one word longer when the kernel has a loop check). Returns the submission, and the
/// loop checks to verify once it has run.
fn submit(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[Shard],
    out: &Storage,
    items: usize,
) -> Result<(wgpu::SubmissionIndex, Option<LoopChecks>)> {
    let gpu = dev.gpu();
    let pipeline = dev.pipeline(kernel)?;
    let scopes = Scopes::open(dev);
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(&kernel.id),
        });
    let step = piece_rows(dev, kernel);
    let mut checks = kernel.loop_check.then(|| {
        let pieces = items.div_ceil(step);
        LoopChecks {
            staging: gpu_io::buffer(
                dev,
                "amari-gpu loop checks",
                (pieces.max(1) * 4) as u64,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            mapped: None,
            pieces: Vec::with_capacity(pieces),
        }
    });
    let out_cols = kernel.output_words_per_item();
    let mut uniforms = Vec::new();
    let mut start = 0;
    while start < items {
        let n = step.min(items - start);
        let launch = Launch::new(dev, kernel, n, "rows")?;
        let buffer = |s: &Storage| s.buffer().map(|b| wgpu::Buffer::clone(b));
        let mut entries = Vec::with_capacity(inputs.len() + 1);
        let mut bound = Vec::with_capacity(inputs.len() + 1);
        for storage in inputs {
            bound.push(buffer(storage)?);
        }
        bound.push(buffer(out)?);
        let widths = kernel
            .inputs
            .iter()
            .map(|i| match *i {
                Input::PerItem(w) => (w, true),
                Input::Whole(w) => (w, false),
            })
            .chain(std::iter::once((kernel.output_words_per_item(), true)));
        for (i, ((w, per_item), b)) in widths.zip(&bound).enumerate() {
            let (offset, bytes) = if per_item {
                ((start * w * 4) as u64, (n * w * 4) as u64)
            } else {
                (0, (w * 4) as u64)
            };
            entries.push(gpu_io::binding_at(i as u32 + 1, b, offset, bytes));
        }
        // The check value follows the piece's output rows: bound with them, cleared first;
        // its first word is the one read back.
        let check_at = ((start + n) * out_cols * 4) as u64;
        let check_bytes = kernel.loop_check_bytes() as u64;
        if checks.is_some() {
            if let Some(last) = entries.last_mut() {
                *last = gpu_io::binding_at(
                    last.binding,
                    &bound[bound.len() - 1],
                    (start * out_cols * 4) as u64,
                    (n * out_cols * 4) as u64 + check_bytes,
                );
            }
            encoder.clear_buffer(&bound[bound.len() - 1], check_at, Some(check_bytes));
        }
        let recorded = encode_piece(dev, &mut encoder, &pipeline, &launch, &entries)?;
        uniforms.extend(recorded);
        if let Some(checks) = checks.as_mut() {
            let at = (checks.pieces.len() * 4) as u64;
            encoder.copy_buffer_to_buffer(
                &bound[bound.len() - 1],
                check_at,
                &checks.staging,
                at,
                4,
            );
            checks.pieces.push(start..start + n);
        }
        start += n;
    }
    let submission = gpu.submit(Some(encoder.finish()));
    if let Some(checks) = checks.as_mut() {
        let bytes = (checks.pieces.len().max(1) * 4) as u64;
        checks.mapped = Some(gpu_io::map_for_reading(&checks.staging, bytes));
    }
    scopes.close(dev.id)?;
    Ok((submission, checks))
}
