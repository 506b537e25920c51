//! Opening the devices a context selected: wgpu devices on their adapters, and the host
//! CPU device (once, whatever `devices_per_adapter`: its threads are its parallelism). The
//! host device shares hardware with the CPU adapters (lavapipe, llvmpipe, WARP), so it joins
//! their group. Its kernels round `fma` as the context's wgpu devices do, which a probe
//! kernel measures on each adapter (once per process).
//!
//! Devices whose adapters round `fma` differently (a hardware GPU fuses, Mesa's CPU drivers
//! round twice) cannot give each other's bits for kernels with `fma` chains; the context
//! opens them but warns, and the host follows the first wgpu device.
//!
//! This sits above the kernel families (the probe is a generated GA kernel), so the context
//! itself depends on no family.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::adapter::AdapterInfo;
use crate::context::{adapters, enumerated, host_adapter, MultiGpuContext};
use crate::device::GpuDevice;
use crate::dtype::{f64_words, read_f64, Dtype};
use crate::error::Result;
use crate::ga::algebra::Algebra;
use crate::ga::codegen::Broadcast;
use crate::ga::operation::Operation;
use crate::host::cpu;
use crate::host::device::HostDevice;
use crate::kernel::FmaMode;
use crate::options::ContextOptions;
use crate::runner::executor::{run_chunk, ChunkJob};
use crate::selection::selection;

/// The logger these messages go to: the name Python users filter on (`amari_gpu.context.open`),
/// kept from when opening was a module of the context.
const LOG: &str = "amari_gpu::context::open";

/// How device `dev`'s adapter rounds WGSL `fma` in `dtype` (float32 or float64), measured
/// with the generated Cl(1) product (r0 = a0 b0, then fma(a1, b1, r0) with a0 b0 = −1 and
/// a1 b1 just under 1); cached per adapter and dtype for the process. `None` when the probe
/// fails or gives neither value (and for a dtype the device does not run).
fn fma_mode(dev: &GpuDevice, dtype: Dtype) -> Option<FmaMode> {
    static MODES: OnceLock<Mutex<HashMap<(usize, Dtype), FmaMode>>> = OnceLock::new();
    let modes = MODES.get_or_init(Mutex::default);
    let key = (dev.adapter.index, dtype);
    if let Some(mode) = modes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Some(*mode);
    }
    if !dev.runs(dtype) {
        return None;
    }
    let algebra = Algebra::new(1, 0, 0).ok()?;
    let kernel = crate::ga::kernels::kernel(&algebra, Operation::Geometric, Broadcast::None, dtype);
    // The operands as words of the dtype, and the probe's result read back from them.
    let (a, b): (Vec<f32>, Vec<f32>) = match dtype {
        Dtype::F64 => {
            let [x, y, _] = FmaMode::PROBE_F64;
            (
                f64_words(&[1.0, x]).to_vec(),
                f64_words(&[-1.0, y]).to_vec(),
            )
        }
        _ => {
            let [x, y, _] = FmaMode::PROBE;
            (vec![1.0, x], vec![-1.0, y])
        }
    };
    let mut out = vec![0.0f32; a.len()];
    let probed = dev.pipeline(&kernel).and_then(|pipeline| {
        let job = ChunkJob {
            range: 0..1,
            output: &mut out,
        };
        run_chunk(dev, &kernel, &pipeline, &[&a, &b], job, None, false)
    });
    let result = match dtype {
        Dtype::F64 => read_f64(&out, 0),
        _ => f64::from(out[0]),
    };
    let epsilon = match dtype {
        Dtype::F64 => f64::EPSILON,
        _ => f64::from(f32::EPSILON),
    };
    let mode = match probed {
        Ok(_) => FmaMode::from_probe_f64(result, epsilon),
        Err(e) => {
            log::warn!(target: LOG, "{dtype} fma probe failed on device {}: {e}", dev.id);
            None
        }
    };
    if let Some(mode) = mode {
        modes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, mode);
    } else {
        log::warn!(
            target: LOG,
            "{dtype} fma probe on device {} ({}) gave {result:e}, neither fused nor separate \
             rounding",
            dev.id,
            dev.adapter.name,
        );
    }
    mode
}

/// The fma mode in `dtype` the host device follows: the one the wgpu devices that run
/// `dtype` share, `Fused` without any. When they disagree, a warning (they cannot be
/// bit-identical to each other) and the first device's mode.
fn shared_fma_mode(wgpu: &[Arc<GpuDevice>], dtype: Dtype) -> FmaMode {
    let mut seen: Vec<(FmaMode, &GpuDevice)> = Vec::new();
    for dev in wgpu {
        if seen
            .iter()
            .any(|(_, d)| d.adapter.index == dev.adapter.index)
        {
            continue;
        }
        if let Some(mode) = fma_mode(dev, dtype) {
            seen.push((mode, dev));
        }
    }
    let Some(&(first, _)) = seen.first() else {
        return FmaMode::Fused;
    };
    if seen.iter().any(|(m, _)| *m != first) {
        let modes: Vec<String> = seen
            .iter()
            .map(|(m, d)| format!("{} ({}): {}", d.adapter.name, d.adapter.backend, m.name()))
            .collect();
        log::warn!(
            target: LOG,
            "the context's devices round WGSL {dtype} fma differently ({}): results of kernels \
             with fma chains depend on which device computed them; the host device rounds as {} \
             does",
            modes.join(", "),
            seen[0].1.adapter.name
        );
    }
    first
}

/// Opens the devices for `chosen` adapter indices (one entry per logical device) of
/// `pairs` (the wgpu adapters) and `host` (the host device's description, last index).
fn open_devices(
    pairs: &[(wgpu::Adapter, AdapterInfo)],
    host: &AdapterInfo,
    chosen: &[usize],
    options: &ContextOptions,
) -> Result<Vec<Arc<GpuDevice>>> {
    let group_of = |index: usize| pairs[index].1.same_device_as.unwrap_or(index);
    let mut devices = Vec::new();
    for &index in chosen.iter().filter(|&&i| i != host.index) {
        let dev = GpuDevice::open(
            devices.len(),
            &pairs[index].0,
            &pairs[index].1,
            group_of(index),
            options.gpu_timestamps != Some(false),
        )?;
        devices.push(Arc::new(dev));
    }
    if chosen.contains(&host.index) {
        let others = devices.len();
        // A hardware GPU's worker thread keeps a core to feed it. A CPU adapter's worker
        // mostly waits for its driver, whose threads run on the host's cores anyway: keeping
        // a core for it would only slow the host device down (the group's measured speedup
        // says what running both at once costs).
        let feeders = devices
            .iter()
            .filter(|d| d.adapter.device_type != "cpu")
            .count();
        let threads = options
            .host_threads
            .unwrap_or_else(|| cpu::hardware_threads().saturating_sub(feeders).max(1));
        // One piece of hardware with the CPU adapters the context opened.
        let group = devices
            .iter()
            .find(|d| d.adapter.device_type == "cpu")
            .map_or(host.index, |d| d.group);
        let host_device = HostDevice::new(threads, shared_fma_mode(&devices, Dtype::F32))?
            .with_fma_f64(shared_fma_mode(&devices, Dtype::F64));
        log::info!(
            target: LOG,
            "host device {}: {} threads, simd {}, fma {} (float64: {})",
            others,
            host_device.pool.threads(),
            host_device.simd.name(),
            host_device.fma.name(),
            host_device.fma_f64.name()
        );
        devices.push(Arc::new(GpuDevice::host(others, host, group, host_device)));
    } else if devices.len() > 1 {
        shared_fma_mode(&devices, Dtype::F32);
        shared_fma_mode(&devices, Dtype::F64);
    }
    Ok(devices)
}

impl MultiGpuContext {
    /// Opens the devices `options` select.
    pub fn new(options: ContextOptions) -> Result<Self> {
        let infos = adapters();
        let chosen = selection(&infos, &options)?;
        // Devices on one adapter, or on one device seen through two backends, share
        // hardware: they form one group, named by the original adapter's index.
        let devices = open_devices(enumerated(), host_adapter(), &chosen.devices, &options)?;
        let mut ctx = MultiGpuContext::with_devices(devices, options);
        ctx.selection = chosen;
        Ok(ctx)
    }
}
