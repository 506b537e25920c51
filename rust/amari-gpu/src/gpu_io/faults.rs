//! How a device fault becomes this crate's error: a lost device, and the error scopes around
//! one submission's commands.

use crate::device::GpuDevice;
use crate::error::{Error, Result};

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
