//! The wgpu calls every path to a device shares — the engine's chunks, a domain's rounds,
//! calibration and the raw baseline: how a device fault becomes this crate's error, error
//! scopes, bindings and bind groups, encoding a dispatch and uploads; waiting for a
//! submission under the timeout rule ([`wait`]) and the staging buffer a submission is read
//! back through ([`staging`]). Timeout and fault handling are defined here and nowhere else.

mod staging;
mod wait;

pub(crate) use staging::{timestamps_worth, Staging};
pub(crate) use wait::{map_for_reading, submit_handed, wait, wait_mapped, Handed, Limit};

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::pool::Pooled;

/// The error of a device that failed or stopped answering.
pub(crate) fn lost(device: usize, reason: impl Into<String>) -> Error {
    Error::DeviceLost {
        device,
        reason: reason.into(),
    }
}

/// `Err` if the device is already known to be lost.
pub(crate) fn check_alive(dev: &GpuDevice) -> Result<()> {
    match dev.lost_reason() {
        Some(reason) => Err(lost(dev.id, reason)),
        None => Ok(()),
    }
}

/// Maps a wgpu error caught in a scope to the core error of device `device`.
fn scoped_error(device: usize, error: wgpu::Error) -> Error {
    match error {
        wgpu::Error::OutOfMemory { .. } => Error::OutOfMemory {
            device,
            reason: error.to_string(),
        },
        other => lost(device, other.to_string()),
    }
}

/// The error scopes around one submission's commands: out of memory outside validation.
pub(crate) struct Scopes {
    // Fields drop in declaration order, and an unclosed guard pops its scope when dropped:
    // the scope pushed last (validation) must come first, or an early return (`?` between
    // open and close) pops them out of order and wgpu panics.
    validation: wgpu::ErrorScopeGuard,
    oom: wgpu::ErrorScopeGuard,
}

impl Scopes {
    /// Opens both scopes on `dev` (on this thread: wgpu keeps error scopes per thread).
    pub(crate) fn open(dev: &GpuDevice) -> Self {
        let device = &dev.gpu().device;
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
        Scopes { oom, validation }
    }

    /// Closes both; the first error caught, as this crate's error. Native wgpu reports errors
    /// at the call, so the scopes can be closed as soon as the work is submitted.
    pub(crate) fn close(self, device: usize) -> Result<()> {
        if let Some(error) = pollster::block_on(self.validation.pop()) {
            return Err(scoped_error(device, error));
        }
        if let Some(error) = pollster::block_on(self.oom.pop()) {
            return Err(scoped_error(device, error));
        }
        Ok(())
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

/// A pooled storage buffer holding `data` (at least one word), and its bytes.
pub(crate) fn upload(dev: &GpuDevice, data: &[f32]) -> (Pooled, u64) {
    let bytes = (data.len().max(1) * 4) as u64;
    let buffer = dev.pool.take(
        &dev.gpu().device,
        bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    );
    let queue = &dev.gpu().queue;
    queue.write_buffer(&buffer, 0, bytemuck::cast_slice(data));
    (buffer, bytes)
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
