//! Why a device of a context cannot run a kernel (the host device for a user's WGSL, a
//! device of another driver, one without the kernel's dtype), and the errors and plan notes
//! that say so.

use super::MultiGpuContext;
use crate::device::GpuDevice;
use crate::error::Error;

impl MultiGpuContext {
    /// Why healthy device `dev` cannot run `kernel`, or `None` when it can.
    fn cannot_run(&self, dev: &GpuDevice, kernel: &crate::kernel::Kernel) -> Option<String> {
        if dev.can_run(kernel) {
            return None;
        }
        if let Some(lacks) = dev.lacks(kernel.dtype) {
            return Some(lacks);
        }
        let host = dev.as_host().is_some() && kernel.host.is_none();
        Some(match (host, kernel.family) {
            (true, crate::family::Family::Rows) => format!(
                "device {} is the host device, which cannot run WGSL (map_rows runs only on \
                 wgpu devices)",
                dev.id
            ),
            (true, _) => format!(
                "device {} is the host device, which has no implementation of this kernel",
                dev.id
            ),
            (false, _) => format!(
                "device {} ({}, {}) is of another driver than the devices map_rows runs on \
                 in this context ({}), whose bits it would not match",
                dev.id,
                dev.adapter.name,
                dev.adapter.backend,
                kernel.devices.as_ref().map_or_else(String::new, |ids| {
                    let ids: Vec<String> = ids.iter().map(|i| format!("device {i}")).collect();
                    ids.join(", ")
                })
            ),
        })
    }

    /// The devices of `healthy` that cannot run `kernel`, by id, with why: a plan's
    /// `left_out`.
    pub(crate) fn left_out_of(
        &self,
        kernel: &crate::kernel::Kernel,
        healthy: &[&GpuDevice],
    ) -> Vec<(usize, String)> {
        healthy
            .iter()
            .filter_map(|d| self.cannot_run(d, kernel).map(|why| (d.id, why)))
            .collect()
    }

    /// What the healthy devices that cannot run `kernel` are, as a clause to append
    /// ("; device 1 is the host device, ..."), empty when there are none.
    pub(crate) fn cannot_run_note(&self, kernel: &crate::kernel::Kernel) -> String {
        self.devices
            .iter()
            .filter(|d| d.health.is_healthy())
            .filter_map(|d| self.cannot_run(d, kernel))
            .map(|why| format!("; {why}"))
            .collect()
    }

    /// The error of a call whose healthy devices are all unable to run `kernel` (the host
    /// device, for a kernel without a host implementation; a device of another driver, for
    /// a user's WGSL): names the devices that could run it and why they are unhealthy, and
    /// why each healthy one cannot.
    pub(crate) fn no_device_runs(&self, kernel: &crate::kernel::Kernel) -> Error {
        if let Some(error) = self.no_device_runs_dtype(kernel.dtype) {
            return error;
        }
        let unhealthy: Vec<String> = self
            .devices
            .iter()
            .filter(|d| d.can_run(kernel) && !d.health.is_healthy())
            .map(|d| {
                format!(
                    "device {} ({}, {}) is unhealthy: {}",
                    d.id,
                    d.adapter.name,
                    d.adapter.backend,
                    d.health.reason().unwrap_or_default()
                )
            })
            .collect();
        let (state, hint) = if unhealthy.is_empty() {
            (
                "none of its devices can".to_string(),
                "open a wgpu adapter too (e.g. backends=[\"vulkan\", \"host\"])",
            )
        } else {
            (
                unhealthy.join("; "),
                "reset_health() once the cause is fixed, or open another context",
            )
        };
        Error::NoHealthyDevice(format!(
            "no healthy device of this context can run kernel {}/{}: {state}{}; {hint}",
            kernel.family,
            kernel.id,
            self.cannot_run_note(kernel)
        ))
    }

    /// The error of a call in `dtype` when no device of the context, healthy or not, runs
    /// that dtype: names every device and what it lacks. `None` when one does.
    pub(crate) fn no_device_runs_dtype(&self, dtype: crate::dtype::Dtype) -> Option<Error> {
        let lacking: Vec<String> = self
            .devices
            .iter()
            .map(|d| d.lacks(dtype))
            .collect::<Option<_>>()?;
        Some(Error::invalid(
            "dtype",
            format!(
                "no device of this context computes in {dtype}: {}. Open a device whose adapter \
                 has {} (e.g. backends=[\"vulkan\"] for Mesa's lavapipe, or the host device), \
                 or pass dtype=numpy.float32 to compute in float32 (float32 inputs where a \
                 function takes no dtype=)",
                lacking.join("; "),
                dtype.feature_name()
            ),
        ))
    }
}
