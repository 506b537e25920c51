//! The roofline limits of each device of a context, measured on the device: streaming
//! bandwidth (calibration's streaming-copy kernel or `shaders/triad.wgsl`, whichever is
//! faster, on a wgpu device; its parallel memcpy on the host), and the issue rates of three dependent-free loops: fused multiply-add, add, and
//! the max-plus step (`shaders/peak.wgsl` on a wgpu device, its SIMD twin `host_peak` on the
//! host, on every thread of the device). A kernel's achieved rates over these are its
//! fractions of the device's limits (`amari-gpu bench --roofline`). Measured fresh on each
//! call, never cached: they are what the device does now. A wgpu device's limits are timed
//! on the clock that times its profiled kernels (GPU timestamps where the adapter records
//! them), the fastest of several dispatches of tens of milliseconds each, so that a kernel's
//! fraction of a limit compares two figures of one clock.

use super::host_peak::{self, Op};
use super::rates::{self, Timing};
use crate::context::MultiGpuContext;
use crate::device::{DeviceKind, GpuDevice};
use crate::error::Result;
use crate::shaders;

/// What one device is measured to sustain.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceLimits {
    /// Context-wide device id.
    pub device: usize,
    /// Bytes read plus written per second by a streaming copy or triad.
    pub stream_bytes_per_s: f64,
    /// Flops per second of independent fused multiply-add chains (one counts two flops).
    pub fma_flops_per_s: f64,
    /// Adds per second of independent add chains.
    pub add_ops_per_s: f64,
    /// Operations per second of independent max-plus chains (`max(x + m, s)`: an add and a
    /// max, counted two).
    pub max_ops_per_s: f64,
    /// Which kernels measured it ("wgsl" or the host's SIMD level and threads).
    pub measured_with: String,
    /// The clock that timed it, the one that times the engine's profiled kernels on the
    /// device: "gpu" (the adapter's timestamps around each limit dispatch), "host+wait" (the
    /// host clock around submission and the wait, on an adapter without timestamps) or
    /// "host" (the host device).
    pub clock: String,
}

/// The limits of `dev`.
pub fn measure_device(dev: &GpuDevice) -> Result<DeviceLimits> {
    match &dev.kind {
        DeviceKind::Host(host) => Ok(DeviceLimits {
            device: dev.id,
            stream_bytes_per_s: super::host::memcpy_bytes_per_s(host),
            fma_flops_per_s: host_peak::ops_per_s(host, Op::Fma)?,
            add_ops_per_s: host_peak::ops_per_s(host, Op::Add)?,
            max_ops_per_s: host_peak::ops_per_s(host, Op::Max)?,
            measured_with: format!("{} x {} threads", host.simd.name(), host.pool.threads()),
            clock: "host".to_string(),
        }),
        DeviceKind::Wgpu(_) => {
            let limit = Timing::Limit;
            // The better of calibration's copy (a vec4 a thread) and the triad (eight of
            // each array a thread): on a GPU they agree, on a CPU driver the copy is bound
            // by its invocations.
            let (copy, clock) = rates::measure_kernel_copy(dev, limit)?;
            let (triad, _) = rates::measure_triad(dev, limit)?;
            let (fma, _) = rates::measure_peak(dev, limit)?;
            let (add, _) = rates::loop_ops_per_s(
                dev,
                "peak_add",
                shaders::PEAK_ADD,
                Op::Add.ops_per_step(),
                limit,
            )?;
            let (max, _) = rates::loop_ops_per_s(
                dev,
                "peak_max",
                shaders::PEAK_MAX,
                Op::Max.ops_per_step(),
                limit,
            )?;
            Ok(DeviceLimits {
                device: dev.id,
                stream_bytes_per_s: copy.max(triad),
                fma_flops_per_s: fma,
                add_ops_per_s: add,
                max_ops_per_s: max,
                measured_with: "wgsl".to_string(),
                // Every limit of a device is timed on the one clock its profile uses.
                clock: clock.name().to_string(),
            })
        }
    }
}

/// The limits of every device of `ctx`, in device order.
pub fn measure(ctx: &MultiGpuContext) -> Result<Vec<DeviceLimits>> {
    ctx.devices()
        .iter()
        .map(|dev| measure_device(dev))
        .collect()
}
