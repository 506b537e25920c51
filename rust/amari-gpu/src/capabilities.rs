//! A device's capabilities as users see them: measured figures from calibration plus the
//! limits the device was granted. Unknown is `None`, never a guess.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::device::GpuDevice;

/// What calibration measured on one adapter: the raw figures [`Capabilities`] are made
/// from, as the calibration cache keeps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Seconds for the smallest complete chunk (upload, dispatch, readback).
    pub launch_latency_s: f64,
    /// Host-to-device bytes per second.
    pub h2d_bytes_per_s: f64,
    /// Device-to-host bytes per second.
    pub d2h_bytes_per_s: f64,
    /// On-device copy: bytes read plus bytes written per second.
    pub copy_bytes_per_s: f64,
    /// Items per second of each family's reference kernel on resident data.
    pub family_items_per_s: BTreeMap<String, f64>,
    /// Arithmetic peak: flops per second of a chain of fused multiply-adds.
    #[serde(default)]
    pub peak_flops_per_s: f64,
    /// Streaming copy by a kernel (one vec4 in, one out per thread): bytes read plus
    /// written per second.
    #[serde(default)]
    pub kernel_copy_bytes_per_s: f64,
    /// Extra seconds a chunk takes when its kernel is timed with GPU timestamp queries (0
    /// without the feature; negative in caches written before it was measured).
    #[serde(default = "unmeasured")]
    pub timestamp_cost_s: f64,
    /// Rate of each dtype with a rate of its own ("float64"), relative to float32: items/s
    /// of one probe kernel in that dtype over float32's, measured when a plan first splits
    /// work of that dtype (`calibration::dtypes`).
    #[serde(default)]
    pub dtype_rates: BTreeMap<String, f64>,
    /// Host devices: the call size in bytes (operands and output) past which a streaming
    /// kernel's output is written with non-temporal stores, measured by timing both kinds of
    /// store (`ga::host_cl3::stream_past_bytes`); `None` on wgpu devices and in caches
    /// written before it was measured.
    #[serde(default)]
    pub stream_past_bytes: Option<u64>,
    /// Seconds since the Unix epoch when measured.
    pub measured_unix_s: u64,
    /// Seconds the calibration took.
    pub calibration_s: f64,
}

fn unmeasured() -> f64 {
    -1.0
}

/// What one device can do.
#[derive(Debug, Clone, PartialEq)]
pub struct Capabilities {
    /// On-device copy bandwidth (bytes read + written), GB/s, of the driver's buffer copy.
    pub memory_bandwidth_gb_s: Option<f64>,
    /// Streaming bandwidth a kernel reaches (vec4 copy shader, bytes read + written), GB/s.
    pub kernel_bandwidth_gb_s: Option<f64>,
    /// Host↔device transfer rate, GB/s: the harmonic mean of both directions, i.e. the rate
    /// at which a byte goes up and a byte comes back.
    pub transfer_gb_s: Option<f64>,
    /// Host-to-device GB/s.
    pub h2d_gb_s: Option<f64>,
    /// Device-to-host GB/s.
    pub d2h_gb_s: Option<f64>,
    /// Seconds of the smallest complete chunk (upload, dispatch, readback).
    pub launch_latency_s: Option<f64>,
    /// Kernel family → items per second of its reference kernel on resident data.
    pub throughput: BTreeMap<String, f64>,
    /// Measured arithmetic peak (FMA chains), GFLOP/s.
    pub peak_gflops: Option<f64>,
    /// dtype → its measured rate relative to float32 (float64, once a plan needed it).
    pub dtype_rates: BTreeMap<String, f64>,
    /// Extra seconds per chunk when its kernel is timed with GPU timestamp queries.
    pub timestamp_cost_s: Option<f64>,
    /// Largest buffer the device accepts.
    pub max_buffer_bytes: u64,
    /// Largest storage binding the device accepts.
    pub max_storage_binding_bytes: u64,
    /// Memory a workload may use, where the platform tells (host RAM for CPU adapters).
    pub memory_budget_bytes: Option<u64>,
    /// Device kind.
    pub device_type: String,
    /// Backend name.
    pub backend: String,
    /// Whether the figures came from the on-disk cache rather than a fresh measurement.
    pub from_cache: bool,
    /// Other devices of the context on the same hardware (same adapter, or the same device
    /// through another backend).
    pub shares_hardware_with: Vec<usize>,
    /// Measured speed of the whole group together over one member alone, when the device
    /// shares hardware.
    pub group_speedup: Option<f64>,
}

/// Memory a workload may use on `dev`. Adapters that run on the CPU use host memory, which
/// the OS reports; for GPUs no portable API tells, so it is unknown.
pub fn memory_budget_bytes(dev: &GpuDevice) -> Option<u64> {
    if dev.adapter.device_type != "cpu" {
        return None;
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    // Half of what is free: the rest belongs to the host program and its own arrays.
    Some(kib * 1024 / 2)
}

impl Capabilities {
    /// Combines measurements (if any) with the device's limits.
    pub fn new(dev: &GpuDevice, measured: Option<&Measurements>, from_cache: bool) -> Self {
        let gb = |bytes_per_s: f64| bytes_per_s / 1e9;
        Capabilities {
            memory_bandwidth_gb_s: measured.map(|m| gb(m.copy_bytes_per_s)),
            kernel_bandwidth_gb_s: measured
                .filter(|m| m.kernel_copy_bytes_per_s > 0.0)
                .map(|m| gb(m.kernel_copy_bytes_per_s)),
            transfer_gb_s: measured
                .map(|m| gb(2.0 / (1.0 / m.h2d_bytes_per_s + 1.0 / m.d2h_bytes_per_s))),
            h2d_gb_s: measured.map(|m| gb(m.h2d_bytes_per_s)),
            d2h_gb_s: measured.map(|m| gb(m.d2h_bytes_per_s)),
            launch_latency_s: measured.map(|m| m.launch_latency_s),
            throughput: measured
                .map(|m| m.family_items_per_s.clone())
                .unwrap_or_default(),
            timestamp_cost_s: measured.map(|m| m.timestamp_cost_s).filter(|c| *c >= 0.0),
            peak_gflops: measured
                .filter(|m| m.peak_flops_per_s > 0.0)
                .map(|m| m.peak_flops_per_s / 1e9),
            dtype_rates: measured.map(|m| m.dtype_rates.clone()).unwrap_or_default(),
            max_buffer_bytes: dev.limits.max_buffer_size,
            max_storage_binding_bytes: dev.limits.max_storage_buffer_binding_size,
            memory_budget_bytes: memory_budget_bytes(dev),
            device_type: dev.adapter.device_type.clone(),
            backend: dev.adapter.backend.clone(),
            from_cache,
            shares_hardware_with: Vec::new(),
            group_speedup: None,
        }
    }
}
