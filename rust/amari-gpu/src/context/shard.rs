//! One shard of a resident array: rows `[start, stop)` of `cols` f32 words each, held on one
//! device — a storage buffer on a wgpu device, a `Vec<f32>` on the host device. Putting rows
//! on a device (checked against its largest buffer and memory budget, out-of-memory caught
//! in an error scope) and reading rows back from one are here.

use std::ops::Range;
use std::time::Duration;

use crate::alloc;
use crate::capabilities::memory_budget_bytes;
use crate::device::{DeviceKind, GpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::{self, Scopes, Staging};
use crate::pool::Pooled;

/// Where a shard's words are.
pub(crate) enum Storage {
    /// A pooled storage buffer on a wgpu device (row 0 of the shard at byte 0).
    Wgpu(Pooled),
    /// Host memory, for the host device.
    Host(Vec<f32>),
}

/// Rows of a resident array on one device.
pub(crate) struct Shard {
    /// Device id.
    pub(crate) device: usize,
    /// Rows of the array it holds.
    pub(crate) rows: Range<usize>,
    /// Its words, `rows.len() * cols` (shared with calls running on it).
    pub(crate) storage: std::sync::Arc<Storage>,
}

impl Shard {
    /// Bytes the shard's rows take (the words held; a pooled buffer may be larger).
    pub(crate) fn bytes(&self, cols: usize) -> u64 {
        (self.rows.len() * cols * 4) as u64
    }
}

/// Usage of every shard buffer: kernels read and write it, copies go both ways.
pub(crate) const SHARD_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// Checks that `dev` may hold `bytes` more when it already holds `held` for resident arrays:
/// within its largest buffer and its memory budget (where one is known).
pub(crate) fn check_room(dev: &GpuDevice, bytes: u64, held: u64) -> Result<()> {
    let refuse = |why: String| Error::OutOfMemory {
        device: dev.id,
        reason: format!("cannot allocate {bytes} bytes for a resident shard: {why}"),
    };
    if dev.as_host().is_none() && bytes > dev.limits.max_buffer_size {
        return Err(refuse(format!(
            "the device's largest buffer is {} bytes",
            dev.limits.max_buffer_size
        )));
    }
    if let Some(budget) = memory_budget_bytes(dev) {
        if held.saturating_add(bytes) > budget {
            return Err(refuse(format!(
                "resident arrays already hold {held} bytes of its {budget}-byte memory budget"
            )));
        }
    }
    Ok(())
}

/// An uninitialised shard buffer of `words` words on `dev` (a kernel or copy fills it).
pub(crate) fn allocate(dev: &GpuDevice, words: usize) -> Result<Storage> {
    match &dev.kind {
        DeviceKind::Host(_) => Ok(Storage::Host(alloc::zeroed("resident shard", words)?)),
        DeviceKind::Wgpu(gpu) => {
            gpu_io::check_alive(dev)?;
            let bytes = (words.max(1) * 4) as u64;
            let scopes = Scopes::open(dev);
            let buffer = dev.pool.take(&gpu.device, bytes, SHARD_USAGE);
            scopes.close(dev.id).map_err(|e| with_bytes(e, bytes))?;
            Ok(Storage::Wgpu(buffer))
        }
    }
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

/// A shard on `dev` holding `data` (whole rows).
pub(crate) fn put(dev: &GpuDevice, data: &[f32]) -> Result<Storage> {
    match &dev.kind {
        DeviceKind::Host(_) => {
            let mut copy: Vec<f32> = alloc::zeroed("resident shard", data.len())?;
            copy.copy_from_slice(data);
            Ok(Storage::Host(copy))
        }
        DeviceKind::Wgpu(gpu) => {
            let storage = allocate(dev, data.len())?;
            if let Storage::Wgpu(buffer) = &storage {
                gpu.queue
                    .write_buffer(buffer, 0, bytemuck::cast_slice(data));
                dev.counters.moved((data.len() * 4) as u64, 0);
            }
            Ok(storage)
        }
    }
}

/// Copies words `words` of `storage` (on `dev`) into `out`, waiting for the device within
/// `timeout`.
pub(crate) fn read(
    dev: &GpuDevice,
    storage: &Storage,
    words: Range<usize>,
    out: &mut [f32],
    timeout: Option<Duration>,
) -> Result<()> {
    match storage {
        Storage::Host(data) => {
            out.copy_from_slice(&data[words]);
            Ok(())
        }
        Storage::Wgpu(buffer) => {
            gpu_io::check_alive(dev)?;
            if words.is_empty() {
                return Ok(());
            }
            let bytes = (words.len() * 4) as u64;
            let gpu = dev.gpu();
            let mut staging = Staging::new(dev, bytes, false);
            let mut encoder = gpu
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("resident gather"),
                });
            encoder.copy_buffer_to_buffer(
                buffer,
                (words.start * 4) as u64,
                staging.buffer(),
                0,
                bytes,
            );
            let submission = gpu.queue.submit(Some(encoder.finish()));
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::device::HostDevice;
    use crate::kernel::FmaMode;

    #[test]
    fn shards_beyond_the_memory_budget_are_refused_naming_device_and_bytes() {
        let info = crate::host::cpu::describe(0);
        let host = HostDevice::new(1, FmaMode::default()).expect("host pool");
        let dev = GpuDevice::host(3, &info, 0, host);
        let asked = 1u64 << 60;
        let error = check_room(&dev, asked, 0).unwrap_err();
        assert!(
            matches!(error, Error::OutOfMemory { device: 3, .. }),
            "{error}"
        );
        assert!(error.to_string().contains(&asked.to_string()), "{error}");
        assert!(check_room(&dev, 4096, 0).is_ok());
    }
}
