//! The wgpu calls every path to a device shares — the engine's chunks, a domain's rounds,
//! calibration and the raw baseline: bindings and bind groups and encoding a dispatch
//! here; the uploads of a submission, staged through one pooled buffer (`uploads`); how a device fault becomes this crate's error and the error scopes
//! (`faults`), waiting for a submission under the timeout rule (`wait`) and the staging
//! buffer a submission is read back through (`staging`). Timeout and fault handling are
//! defined in this folder and nowhere else.

mod faults;
mod staging;
mod uploads;
mod wait;

pub(crate) use faults::{check_alive, lost, Scopes};
pub(crate) use staging::{timestamps_worth, Staging};
pub(crate) use uploads::Uploads;
pub(crate) use wait::{map_for_reading, submit_handed, wait, wait_mapped, Handed, Limit, Mapped};

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::kernel::Kernel;

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

/// A binding of `bytes` bytes of `buffer` from byte `offset` (at least one word).
pub(crate) fn binding_at(
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

/// A bind group of `buffers`, each bound whole at its index.
pub(crate) fn bind_whole(
    dev: &GpuDevice,
    label: &str,
    layout: &wgpu::BindGroupLayout,
    buffers: &[wgpu::Buffer],
) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| binding(i as u32, b, b.size()))
        .collect();
    let device = &dev.gpu().device;
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(label),
        layout,
        entries: &entries,
    })
}

/// An unpooled buffer of `bytes`.
pub(crate) fn buffer(
    dev: &GpuDevice,
    label: &str,
    bytes: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    dev.gpu().device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes,
        usage,
        mapped_at_creation: false,
    })
}

/// A storage buffer of `bytes` that a kernel or copy writes, and the unpooled mappable
/// buffer of the same size it is read back through.
pub(crate) fn readback_buffers(
    dev: &GpuDevice,
    label: &str,
    bytes: u64,
) -> (wgpu::Buffer, wgpu::Buffer) {
    let source = buffer(
        dev,
        label,
        bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    );
    let staging = buffer(
        dev,
        label,
        bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    (source, staging)
}

/// The workgroup grid of `items` items of `kernel` on `dev` and the threads per row, or an
/// error naming `argument` when they do not fit one dispatch.
pub(crate) fn grid(
    dev: &GpuDevice,
    kernel: &Kernel,
    items: usize,
    argument: &str,
) -> Result<([u32; 3], u32)> {
    u32::try_from(items)
        .ok()
        .and_then(|n| kernel.grid(n, dev.limits.max_compute_workgroups_per_dimension))
        .ok_or_else(|| {
            Error::invalid(
                argument,
                format!("{items} items do not fit one dispatch on device {}", dev.id),
            )
        })
}

/// Records one compute pass that dispatches `pipeline` over `grid` with `bind_group`, its
/// begin and end written to `timestamps` when given.
pub(crate) fn dispatch(
    encoder: &mut wgpu::CommandEncoder,
    label: Option<&str>,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    grid: [u32; 3],
    timestamps: Option<&wgpu::QuerySet>,
) {
    let mut pass = begin_pass(encoder, label, timestamps);
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, bind_group, &[]);
    pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
}

/// Begins a compute pass whose begin and end are written to `timestamps` when given.
pub(crate) fn begin_pass<'e>(
    encoder: &'e mut wgpu::CommandEncoder,
    label: Option<&str>,
    timestamps: Option<&wgpu::QuerySet>,
) -> wgpu::ComputePass<'e> {
    encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label,
        timestamp_writes: timestamps.map(|query_set| wgpu::ComputePassTimestampWrites {
            query_set,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }),
    })
}
