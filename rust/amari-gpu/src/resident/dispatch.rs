//! Running a row kernel over the rows of one shard on the device that holds it: encoded
//! and submitted on a wgpu device (split into dispatches that fit its binding limit, each
//! bound at its byte offset in the shard buffers), in place on the host device. A kernel
//! with a loop check (a user's, see `rows::wrap`) has each piece's check word read back, so
//! a shard whose loops a driver cut short is refused as the engine's chunks are.

use std::ops::Range;
use std::sync::Arc;

use crate::context::shard::Storage;
use crate::device::{DeviceKind, GpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::{self, Limit, Mapped, Scopes};
use crate::kernel::{Input, Kernel};
use crate::passes::{self, Launch};

/// Rows a single dispatch covers at most, so every binding of a piece fits the device's
/// binding limit; a multiple of 256 rows keeps every piece's byte offset aligned.
fn piece_rows(dev: &GpuDevice, kernel: &Kernel) -> usize {
    let per_row = kernel.widest_binding_bytes_per_item().max(1);
    // Room for the loop-check word after a piece's output rows.
    let rows = (dev.max_binding_bytes().saturating_sub(4) / per_row) as usize;
    (rows - rows % 256).max(256)
}

/// A binding of `bytes` bytes of `buffer` from byte `offset`.
pub(super) fn entry(
    index: u32,
    buffer: &wgpu::Buffer,
    offset: u64,
    bytes: u64,
) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding: index,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset,
            size: wgpu::BufferSize::new(bytes.max(4)),
        }),
    }
}

/// The loop-check words of a shard's pieces, copied to a mappable buffer after each piece
/// ran (the next piece overwrites the word with its first row).
pub(crate) struct LoopChecks {
    staging: wgpu::Buffer,
    mapped: Option<Mapped>,
    pieces: Vec<Range<usize>>,
}

impl LoopChecks {
    /// Once the submission has run: an error naming the first piece whose loops a driver
    /// cut short (the shard's results are then not to be kept).
    pub(crate) fn verify(
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
                Err(crate::executor::loop_cap_error(
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
pub(crate) fn submit(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[Arc<Storage>],
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
        let buffer = |s: &Storage| match s {
            Storage::Wgpu(b) => Ok(wgpu::Buffer::clone(b)),
            Storage::Host(_) => Err(Error::Internal(
                "a host shard bound on a wgpu device".into(),
            )),
        };
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
            entries.push(entry(i as u32 + 1, b, offset, bytes));
        }
        // The check word follows the piece's output rows: bound with them, cleared first.
        let check_at = ((start + n) * out_cols * 4) as u64;
        if checks.is_some() {
            if let Some(last) = entries.last_mut() {
                *last = entry(
                    last.binding,
                    &bound[bound.len() - 1],
                    (start * out_cols * 4) as u64,
                    (n * out_cols * 4 + 4) as u64,
                );
            }
            encoder.clear_buffer(&bound[bound.len() - 1], check_at, Some(4));
        }
        uniforms.extend(passes::encode(
            dev,
            &mut encoder,
            kernel,
            &pipeline,
            &launch,
            &entries,
            None,
        ));
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
    let submission = gpu.queue.submit(Some(encoder.finish()));
    if let Some(checks) = checks.as_mut() {
        let bytes = (checks.pieces.len().max(1) * 4) as u64;
        checks.mapped = Some(gpu_io::map_for_reading(&checks.staging, bytes));
    }
    scopes.close(dev.id)?;
    Ok((submission, checks))
}

/// Runs `kernel` over the `items` rows of one shard on the host device.
pub(crate) fn run_host(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[Arc<Storage>],
    items: usize,
) -> Result<Storage> {
    let DeviceKind::Host(host) = &dev.kind else {
        return Err(Error::Internal("run_host on a wgpu device".into()));
    };
    let Some(implementation) = kernel.host.as_ref() else {
        return Err(Error::Internal(format!(
            "kernel {} has no host implementation",
            kernel.id
        )));
    };
    let prepared = host.prepare(implementation.as_ref());
    let mut slices = Vec::with_capacity(inputs.len());
    for storage in inputs {
        match storage.as_ref() {
            Storage::Host(words) => slices.push(words.as_slice()),
            Storage::Wgpu(_) => {
                return Err(Error::Internal("a wgpu shard on the host device".into()))
            }
        }
    }
    let mut out = crate::alloc::zeroed("resident output", items * kernel.output_words_per_item())?;
    host.run(dev.id, prepared.as_ref(), &slices, 0..items, &mut out)?;
    Ok(Storage::Host(out))
}
