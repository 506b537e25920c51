//! Running a row kernel over the rows of one shard on the device that holds it: encoded
//! and submitted on a wgpu device (split into dispatches that fit its binding limit, each
//! bound at its byte offset in the shard buffers), in place on the host device.

use std::sync::Arc;

use super::shard::Storage;
use crate::device::{DeviceKind, GpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::Scopes;
use crate::kernel::{Input, Kernel};
use crate::passes::{self, Launch};

/// Rows a single dispatch covers at most, so every binding of a piece fits the device's
/// binding limit; a multiple of 256 rows keeps every piece's byte offset aligned.
fn piece_rows(dev: &GpuDevice, kernel: &Kernel) -> usize {
    let per_row = kernel.widest_binding_bytes_per_item().max(1);
    let rows = (dev.max_binding_bytes() / per_row) as usize;
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

/// Encodes and submits `kernel` over the `items` rows of one shard on wgpu device `dev`:
/// `inputs[i]` is the shard's rows of input i (or the whole input), `out` the new shard.
pub(crate) fn submit(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[Arc<Storage>],
    out: &Storage,
    items: usize,
) -> Result<wgpu::SubmissionIndex> {
    let gpu = dev.gpu();
    let pipeline = dev.pipeline(kernel)?;
    let scopes = Scopes::open(dev);
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(&kernel.id),
        });
    let step = piece_rows(dev, kernel);
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
        uniforms.extend(passes::encode(
            dev,
            &mut encoder,
            kernel,
            &pipeline,
            &launch,
            &entries,
            None,
        ));
        start += n;
    }
    let submission = gpu.queue.submit(Some(encoder.finish()));
    scopes.close(dev.id)?;
    Ok(submission)
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
