//! The multi-device context: one process-wide wgpu instance, the devices a caller selected,
//! their health, counters and profile, and the storage of its resident arrays (`ledger`,
//! `lineage`, `shard`; the operations on them are in `resident`). Opening one is in `open`,
//! above the families (it probes each adapter's `fma` with a GA kernel); planning and
//! running kernels are in `execution`; calibration and the cost model in `calibration`.

mod execution;
mod fast;
pub(crate) mod ledger;
pub(crate) mod lineage;
mod profiled;
pub(crate) mod shard;
mod spare;
mod unable;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::adapter::{self, AdapterInfo};
use crate::capabilities::Measurements;
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::health::CounterSnapshot;
use crate::history::History;
use crate::options::ContextOptions;
use crate::plan::Plan;
use crate::profile::Profiler;
use crate::selection::{explain, Selection};
use ledger::Ledger;

/// The one wgpu instance of the process, over every native backend.
pub fn instance() -> &'static wgpu::Instance {
    static INSTANCE: OnceLock<wgpu::Instance> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = wgpu::Backends::all();
        descriptor.flags = wgpu::InstanceFlags::from_build_config().with_env();
        wgpu::Instance::new(descriptor)
    })
}

/// The adapters of the process, enumerated once.
///
/// Enumerating again would create new adapter objects, and wgpu's GL backend gives every
/// one of them its own lock around the one EGL context they share: two threads could then
/// make that context current at once, which EGL refuses. One enumeration, one lock.
pub(crate) fn enumerated() -> &'static [(wgpu::Adapter, AdapterInfo)] {
    static ADAPTERS: OnceLock<Vec<(wgpu::Adapter, AdapterInfo)>> = OnceLock::new();
    ADAPTERS.get_or_init(|| adapter::enumerate(instance()))
}

/// The host CPU device described as an adapter: the last index, after the wgpu adapters.
pub(crate) fn host_adapter() -> &'static AdapterInfo {
    static HOST: OnceLock<AdapterInfo> = OnceLock::new();
    HOST.get_or_init(|| crate::host::cpu::describe(enumerated().len()))
}

/// Every adapter of every native backend, preferred backends first, then the host device.
pub fn adapters() -> Vec<AdapterInfo> {
    let wgpu = enumerated().iter().map(|(_, info)| info.clone());
    wgpu.chain(std::iter::once(host_adapter().clone()))
        .collect()
}

/// For every adapter of [`adapters`], in order: whether a context opened with `options`
/// would use it, and why (or why not) in a few words.
pub fn explain_selection(options: &ContextOptions) -> Result<Vec<(bool, String)>> {
    explain(&adapters(), options)
}

/// Where a kernel's results go.
pub enum Target<'a> {
    /// The caller's array, for kernels with a per-item output.
    Items(&'a mut [f32]),
    /// Partial results per chunk, returned in [`Ran::partials`].
    Chunks,
}

/// What a call ran and produced.
#[derive(Debug)]
pub struct Ran {
    /// The plan it followed.
    pub plan: Plan,
    /// For per-chunk outputs: every chunk's words, in chunk order.
    pub partials: Vec<f32>,
}

/// One device's state as `stats()` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceStats {
    /// Device id.
    pub device: usize,
    /// Totals since the context opened.
    pub counters: CounterSnapshot,
    /// Bytes of device memory the context holds: its wgpu buffers (pooled and in use) and
    /// the resident shards it keeps in host memory (the host device's).
    pub memory_in_use_bytes: u64,
    /// Bytes of it held by live resident arrays.
    pub resident_bytes: u64,
    /// Users' kernels (`map_rows`) the device keeps compiled (at most
    /// [`crate::device::MAX_USER_PIPELINES`]).
    pub user_pipelines: usize,
    /// Whether the device is given work.
    pub healthy: bool,
    /// Why not, if not.
    pub reason: Option<String>,
}

/// A set of open devices that kernels run on together.
pub struct MultiGpuContext {
    pub(crate) devices: Vec<Arc<GpuDevice>>,
    pub(crate) options: ContextOptions,
    pub(super) measured: Mutex<Vec<Option<(Measurements, bool)>>>,
    pub(super) calibration: Mutex<()>,
    /// Whether a plan of the context has said what its calibration measured (the first
    /// call's INFO line).
    pub(super) calibration_reported: AtomicBool,
    pub(crate) history: History,
    /// (device, kernel id) pairs that have run in a call: a device's first chunk of a kernel
    /// pays one-time costs (the driver compiling the pipeline at its first dispatch, the host
    /// pool's threads and the kernel's tables warming up: 14 ms against 0.09 ms for a
    /// 1024-item Cl(3,0) chunk on the host here), which the history must not learn from.
    pub(super) warmed: Mutex<HashSet<(usize, String)>>,
    /// Group → (measured speedup of its members together, members it was measured with).
    pub(super) group_speedups: Mutex<BTreeMap<usize, (f64, usize)>>,
    /// The active profile, if any.
    pub(super) profiler: Mutex<Option<Arc<Profiler>>>,
    /// The live resident arrays (their shards and lineage).
    pub(crate) resident: Arc<Ledger>,
    /// What the selection chose and left out, and why (set by `open`).
    pub(crate) selection: Selection,
    /// The fast-path decisions of small calls (see `fast`).
    pub(crate) fast: fast::FastCache,
    /// Buffers the last calls handed back: reductions' partials and grid boards.
    pub(crate) spare: crate::alloc::Spare,
}

impl MultiGpuContext {
    /// A context over `devices`, opened with `options` (see `open` for how they are
    /// chosen and opened).
    pub(crate) fn with_devices(devices: Vec<Arc<GpuDevice>>, options: ContextOptions) -> Self {
        let measured = Mutex::new(vec![None; devices.len()]);
        MultiGpuContext {
            devices,
            options,
            measured,
            calibration: Mutex::new(()),
            calibration_reported: AtomicBool::new(false),
            history: History::default(),
            warmed: Mutex::new(HashSet::new()),
            group_speedups: Mutex::new(BTreeMap::new()),
            profiler: Mutex::new(None),
            resident: Arc::default(),
            selection: Selection::default(),
            fast: fast::FastCache::default(),
            spare: crate::alloc::Spare::default(),
        }
    }
    /// Releases the devices: when this is the context's last reference (no call is
    /// running), every device's pooled buffers are freed and the device destroyed; otherwise
    /// they are released when the last running call drops its reference.
    pub fn close(self: Arc<Self>) {
        // Resident shards go first, back to the pools that are cleared below.
        self.resident.clear();
        let Ok(ctx) = Arc::try_unwrap(self) else {
            return;
        };
        for dev in ctx.devices {
            dev.pool.clear();
            if let Ok(GpuDevice {
                kind: crate::device::DeviceKind::Wgpu(gpu),
                ..
            }) = Arc::try_unwrap(dev)
            {
                gpu.device.destroy();
            }
        }
    }

    /// The open devices, by id.
    pub fn devices(&self) -> &[Arc<GpuDevice>] {
        &self.devices
    }

    /// The host device's threads, where the context has the host device.
    pub(crate) fn host_pool(&self) -> Option<&crate::host::HostPool> {
        self.devices
            .iter()
            .find_map(|d| d.as_host())
            .map(|h| &h.pool)
    }

    /// Runs a call's parallel pass over its inputs (`f`: a check or scan written with rayon's
    /// parallel iterators) on the host device's threads when the context has them and the
    /// pass is `large`, else on the calling thread (whose rayon calls use rayon's global
    /// pool). Why: the global pool's threads spin a while after a pass, and the host
    /// device's threads woken beside them for the kernels shared one CPU of two (a 1024²
    /// max-plus call took 23 instead of 14 ms); one pool keeps a call on the same threads.
    pub(crate) fn on_host_threads<R: Send>(&self, large: bool, f: impl FnOnce() -> R + Send) -> R {
        match self.host_pool() {
            Some(pool) if large && pool.threads() > 1 => pool.run_with(f),
            _ => f(),
        }
    }
    /// What the selection chose when the context opened: the adapters left out and why,
    /// and the options that could not apply.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }
    /// The options the context was opened with.
    pub fn options(&self) -> &ContextOptions {
        &self.options
    }
    pub(crate) fn device(&self, id: usize) -> Result<&GpuDevice> {
        self.devices.get(id).map(Arc::as_ref).ok_or_else(|| {
            Error::invalid(
                "device_id",
                format!("expected 0..{}, got {id}", self.devices.len()),
            )
        })
    }
    pub(crate) fn no_healthy_device(&self) -> Error {
        let failed = self
            .devices
            .iter()
            .filter_map(|d| d.health.reason().map(|reason| (d.id, reason)))
            .collect();
        self.no_healthy_device_after(failed)
    }
    /// The error of a call that ran out of devices, naming the devices that failed it and
    /// why (`failed`), never one that is healthy: under concurrency another call may have
    /// reset a device since, which the message then says in its own words.
    pub(crate) fn no_healthy_device_after(&self, failed: Vec<(usize, String)>) -> Error {
        let mut text = if failed.is_empty() {
            "no healthy device left for this call".to_string()
        } else {
            let reasons: Vec<String> = failed
                .iter()
                .map(|(id, reason)| format!("device {id}: {reason}"))
                .collect();
            format!(
                "no healthy device left for this call ({})",
                reasons.join("; ")
            )
        };
        // Only the devices that failed this call and are healthy now were reset since: a
        // device healthy all along (one that cannot run the kernel) was not.
        let reset: Vec<String> = failed
            .iter()
            .filter(|(id, _)| self.devices.get(*id).is_some_and(|d| d.health.is_healthy()))
            .map(|(id, _)| id.to_string())
            .collect();
        if !reset.is_empty() {
            text.push_str(&format!(
                "; since then, another call has marked device(s) {} healthy again: retry",
                reset.join(", ")
            ));
        }
        Error::NoHealthyDevice(text)
    }
    /// Starts recording every call's steps. Fails if a profile is already active.
    pub fn start_profile(&self) -> Result<Arc<Profiler>> {
        let mut active = self.profiler.lock().unwrap_or_else(PoisonError::into_inner);
        if active.is_some() {
            return Err(Error::invalid(
                "profile",
                "a profile is already active on this context",
            ));
        }
        let profiler = Arc::new(Profiler::default());
        *active = Some(Arc::clone(&profiler));
        Ok(profiler)
    }
    /// The active profile, if any.
    pub(crate) fn active_profile(&self) -> Option<Arc<Profiler>> {
        self.profiler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
    /// Stops recording and returns the profile, if one was active.
    pub fn stop_profile(&self) -> Option<Arc<Profiler>> {
        self.profiler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
    /// Health of every device.
    pub fn health(&self) -> Vec<(usize, bool, Option<String>)> {
        self.devices
            .iter()
            .map(|d| (d.id, d.health.is_healthy(), d.health.reason()))
            .collect()
    }
    /// Counters, memory and health of every device.
    pub fn stats(&self) -> Vec<DeviceStats> {
        self.devices
            .iter()
            .map(|d| DeviceStats {
                device: d.id,
                counters: d.counters.snapshot(),
                // Shards in host memory (the host device's) are no pool buffers.
                memory_in_use_bytes: d.pool.live_bytes() + self.resident.host_held_bytes(d.id),
                resident_bytes: self.resident.held_bytes(d.id),
                user_pipelines: d.user_pipelines(),
                healthy: d.health.is_healthy(),
                reason: d.health.reason(),
            })
            .collect()
    }
    /// Makes device `id` fail when it starts its next chunk after `after_chunks` more.
    pub fn inject_fault(&self, id: usize, after_chunks: u64) -> Result<()> {
        self.device(id)?.health.inject_fault(after_chunks);
        Ok(())
    }
    /// Makes device `id`'s waits for its wgpu work not end after it completes
    /// `after_chunks` more chunks, until `reset_health` (for tests of timeouts and
    /// interrupts that must not depend on how fast the device is).
    pub fn inject_hold(&self, id: usize, after_chunks: u64) -> Result<()> {
        self.device(id)?.health.inject_hold(after_chunks);
        Ok(())
    }
    /// For tests of the grid rebalancer: judges device `id`'s grid rounds as if it computed
    /// `cells_per_s` cells per second (see [`crate::health::Health::inject_grid_rate`]);
    /// `None` measures them again.
    pub fn inject_grid_rate(&self, id: usize, cells_per_s: Option<f64>) -> Result<()> {
        if let Some(rate) = cells_per_s {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(Error::invalid(
                    "cells_per_s",
                    format!("expected a finite number of cells per second > 0 or None, got {rate}"),
                ));
            }
        }
        self.device(id)?.health.inject_grid_rate(cells_per_s);
        Ok(())
    }
    /// Marks device `id` (or every device) healthy again.
    pub fn reset_health(&self, id: Option<usize>) -> Result<()> {
        match id {
            Some(id) => self.device(id)?.health.reset(),
            None => self.devices.iter().for_each(|d| d.health.reset()),
        }
        Ok(())
    }
}

#[cfg(test)]
impl MultiGpuContext {
    /// A context on `backends` with default options, for the core's own tests.
    pub(crate) fn on(backends: &[&str]) -> MultiGpuContext {
        MultiGpuContext::new(ContextOptions {
            backends: Some(backends.iter().map(|b| b.to_string()).collect()),
            ..Default::default()
        })
        .expect("context opens")
    }
}
