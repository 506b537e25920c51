//! The multi-device context: one process-wide wgpu instance, the devices a caller selected,
//! their measured capabilities and history, and the entry points that plan a workload and
//! run a map kernel across all healthy devices.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::adapter::{self, AdapterInfo};
use crate::calibrate::{self, Measurements};
use crate::capabilities::{memory_budget_bytes, Capabilities};
use crate::chunks::{check_chunk_items, chunk_items_for, chunk_ranges};
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::families::{families, family_of};
use crate::health::CounterSnapshot;
use crate::history::History;
use crate::kernel::{Kernel, Output};
use crate::model::DeviceModel;
use crate::plan::{Plan, Strategy};
use crate::profile::{CallRecord, Kind, Profiler};
use crate::scheduler::Scheduler;
use crate::selection::{select, ContextOptions};
use crate::worker::{Recording, Run, WorkerReport};
use crate::workload::Workload;

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
fn enumerated() -> &'static [(wgpu::Adapter, AdapterInfo)] {
    static ADAPTERS: OnceLock<Vec<(wgpu::Adapter, AdapterInfo)>> = OnceLock::new();
    ADAPTERS.get_or_init(|| adapter::enumerate(instance()))
}

/// Every adapter of every native backend, preferred backends first.
pub fn adapters() -> Vec<AdapterInfo> {
    enumerated().iter().map(|(_, info)| info.clone()).collect()
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
    /// Bytes of device buffers the context holds (pooled and in use).
    pub memory_in_use_bytes: u64,
    /// Whether the device is given work.
    pub healthy: bool,
    /// Why not, if not.
    pub reason: Option<String>,
}

/// A set of open devices that kernels run on together.
pub struct MultiGpuContext {
    devices: Vec<Arc<GpuDevice>>,
    options: ContextOptions,
    measured: Mutex<Vec<Option<(Measurements, bool)>>>,
    calibration: Mutex<()>,
    history: History,
    /// Group → (measured speedup of its members together, members it was measured with).
    group_speedups: Mutex<BTreeMap<usize, (f64, usize)>>,
    /// The active profile, if any.
    profiler: Mutex<Option<Arc<Profiler>>>,
}

impl MultiGpuContext {
    /// Opens the devices `options` select.
    pub fn new(options: ContextOptions) -> Result<Self> {
        let pairs = enumerated();
        let infos: Vec<AdapterInfo> = pairs.iter().map(|(_, info)| info.clone()).collect();
        let chosen = select(&infos, &options)?;
        let devices = chosen
            .iter()
            .enumerate()
            .map(|(id, &index)| {
                // Devices on one adapter, or on one device seen through two backends, share
                // hardware: they form one group, named by the original adapter's index.
                let group = infos[index].same_device_as.unwrap_or(index);
                GpuDevice::open(
                    id,
                    &pairs[index].0,
                    &pairs[index].1,
                    group,
                    options.gpu_timestamps != Some(false),
                )
                .map(Arc::new)
            })
            .collect::<Result<Vec<_>>>()?;
        let measured = Mutex::new(vec![None; devices.len()]);
        Ok(MultiGpuContext {
            devices,
            options,
            measured,
            calibration: Mutex::new(()),
            history: History::default(),
            group_speedups: Mutex::new(BTreeMap::new()),
            profiler: Mutex::new(None),
        })
    }

    /// The open devices, by id.
    pub fn devices(&self) -> &[Arc<GpuDevice>] {
        &self.devices
    }

    /// The options the context was opened with.
    pub fn options(&self) -> &ContextOptions {
        &self.options
    }

    fn device(&self, id: usize) -> Result<&GpuDevice> {
        self.devices.get(id).map(Arc::as_ref).ok_or_else(|| {
            Error::invalid(
                "device_id",
                format!("expected 0..{}, got {id}", self.devices.len()),
            )
        })
    }

    /// Measures every device (or loads its figures from the disk cache unless `force`), one
    /// device at a time so that devices sharing hardware do not disturb each other. Logical
    /// devices on one adapter share one measurement.
    pub fn calibrate(&self, force: bool) -> Result<Vec<Capabilities>> {
        let _one_at_a_time = self.calibration.lock().expect("calibration lock");
        let mut fresh: BTreeMap<String, Measurements> = BTreeMap::new();
        for dev in &self.devices {
            if !force && self.measured.lock().expect("measured lock")[dev.id].is_some() {
                continue;
            }
            let key = format!("{}|amari-gpu {}", dev.adapter.identity(), crate::VERSION);
            let found = match fresh.get(&key) {
                Some(m) => Some((m.clone(), false)),
                // A cache written before a family or figure existed is measured again.
                None if !force => crate::cache::load::<Measurements>(&key)
                    .filter(calibrate::is_complete)
                    .map(|m| (m, true)),
                None => None,
            };
            let entry = match found {
                Some(entry) => entry,
                None => {
                    if !dev.health.is_healthy() {
                        continue;
                    }
                    let m = calibrate::measure(dev)?;
                    // A cache that cannot be written only costs a re-measurement next time.
                    let _ = crate::cache::store(&key, &m);
                    fresh.insert(key, m.clone());
                    (m, false)
                }
            };
            self.measured.lock().expect("measured lock")[dev.id] = Some(entry);
        }
        let needs_groups = force || self.group_speedups.lock().expect("group lock").is_empty();
        if needs_groups {
            let measured = self.measure_group_speedups(force)?;
            let mut groups = self.group_speedups.lock().expect("group lock");
            for (group, speedup) in measured {
                let members = self
                    .devices
                    .iter()
                    .filter(|d| d.group == group && d.health.is_healthy())
                    .count();
                groups.insert(group, (speedup, members));
            }
        }
        Ok((0..self.devices.len())
            .map(|id| self.capabilities_now(id))
            .collect())
    }

    fn capabilities_now(&self, id: usize) -> Capabilities {
        let measured = self.measured.lock().expect("measured lock")[id].clone();
        let dev = &self.devices[id];
        let mut caps = Capabilities::new(
            dev,
            measured.as_ref().map(|(m, _)| m),
            measured.as_ref().is_some_and(|(_, c)| *c),
        );
        caps.shares_hardware_with = self
            .devices
            .iter()
            .filter(|d| d.group == dev.group && d.id != id)
            .map(|d| d.id)
            .collect();
        caps.group_speedup = self
            .group_speedups
            .lock()
            .expect("group lock")
            .get(&dev.group)
            .map(|g| g.0);
        caps
    }

    fn ensure_calibrated(&self) -> Result<()> {
        let missing = {
            let measured = self.measured.lock().expect("measured lock");
            self.devices
                .iter()
                .any(|d| d.health.is_healthy() && measured[d.id].is_none())
        };
        if missing {
            self.calibrate(false)?;
        }
        Ok(())
    }

    /// Measured speedup of each group of devices sharing hardware, with its member count.
    pub fn group_speedups(&self) -> BTreeMap<usize, (f64, usize)> {
        self.group_speedups.lock().expect("group lock").clone()
    }

    /// The capabilities of device `id` (calibrating first if needed).
    pub fn capabilities(&self, id: usize) -> Result<Capabilities> {
        self.device(id)?;
        self.ensure_calibrated()?;
        Ok(self.capabilities_now(id))
    }

    /// The cost models of the healthy devices for `workload`, without history corrections
    /// when `corrected` is false.
    pub(crate) fn models_for(&self, workload: &Workload, corrected: bool) -> Vec<DeviceModel> {
        let family = family_of(&workload.kernel);
        let groups = self.group_speedups.lock().expect("group lock").clone();
        let measured = self.measured.lock().expect("measured lock");
        self.devices
            .iter()
            .filter(|d| d.health.is_healthy())
            .filter_map(|dev| {
                let (m, _) = measured[dev.id].as_ref()?;
                let flops_per_s = match family {
                    Some(f) => m
                        .family_items_per_s
                        .get(f.name)
                        .map(|r| r * f.reference_flops_per_item),
                    None => None,
                }
                .unwrap_or_else(|| mean_flops_per_s(m));
                let family_name = family.map_or(workload.kernel.as_str(), |f| f.name);
                let (correction, uncertainty) = if corrected {
                    self.history.get(dev.id, family_name)
                } else {
                    (1.0, 0.0)
                };
                Some(DeviceModel {
                    device: dev.id,
                    group: dev.group,
                    launch_latency_s: m.launch_latency_s,
                    h2d_bytes_per_s: m.h2d_bytes_per_s,
                    d2h_bytes_per_s: m.d2h_bytes_per_s,
                    flops_per_s,
                    correction,
                    uncertainty,
                    memory_budget_bytes: memory_budget_bytes(dev),
                    max_binding_bytes: dev.max_binding_bytes(),
                    group_speedup: groups.get(&dev.group).map_or(1.0, |g| g.0),
                    group_members: groups.get(&dev.group).map_or(1, |g| g.1),
                })
            })
            .collect()
    }

    pub(crate) fn no_healthy_device(&self) -> Error {
        let reasons: Vec<String> = self
            .devices
            .iter()
            .map(|d| {
                format!(
                    "device {}: {}",
                    d.id,
                    d.health.reason().unwrap_or_else(|| "healthy".into())
                )
            })
            .collect();
        Error::NoHealthyDevice(format!("no healthy device left ({})", reasons.join("; ")))
    }

    fn chunk_items(&self, workload: &Workload) -> u64 {
        self.options.chunk_items.map_or_else(
            || {
                chunk_items_for(
                    workload.items,
                    workload.bytes_in_per_item + workload.bytes_out_per_item,
                    workload.widest_bytes_per_item(),
                )
            },
            |c| c as u64,
        )
    }

    /// Decides how `workload` would be split (without running it).
    pub fn distribute_workload(
        &self,
        workload: &Workload,
        strategy: Option<Strategy>,
    ) -> Result<Plan> {
        workload.validate()?;
        self.ensure_calibrated()?;
        let models = self.models_for(workload, true);
        if models.is_empty() {
            return Err(self.no_healthy_device());
        }
        let strategy = strategy.unwrap_or(self.options.strategy);
        crate::partition::plan(workload, self.chunk_items(workload), &models, strategy)
    }

    /// Runs a kernel with a per-item output over `items` items on the healthy devices and
    /// returns the plan it followed; `output` receives the kernel's words for every item.
    pub fn run_map(
        &self,
        kernel: &Kernel,
        inputs: &[&[f32]],
        output: &mut [f32],
        items: usize,
        strategy: Option<Strategy>,
    ) -> Result<Plan> {
        self.run(kernel, inputs, Target::Items(output), items, strategy)
            .map(|ran| ran.plan)
    }

    /// Runs `kernel` over `items` items on the healthy devices: `inputs[i]` holds what
    /// `kernel.inputs[i]` says (per-item words, or one whole array). Per-item results go to
    /// `target`; per-chunk results come back in [`Ran::partials`], in chunk order. Chunks
    /// of a device that fails are re-run on the others.
    pub fn run(
        &self,
        kernel: &Kernel,
        inputs: &[&[f32]],
        target: Target<'_>,
        items: usize,
        strategy: Option<Strategy>,
    ) -> Result<Ran> {
        check_lengths(kernel, inputs, &target, items)?;
        let workload = kernel.workload(items);
        let profiler = self.profiler.lock().expect("profiler lock").clone();
        let planning = Instant::now();
        let plan = self.distribute_workload(&workload, strategy)?;
        let recording = profiler.map(|profiler| {
            let call = profiler.call(CallRecord {
                kernel: workload.kernel.clone(),
                items: workload.items,
                lower_bound_s: plan.lower_bound_s,
                estimated_makespan_s: plan.estimated_makespan_s,
                strategy: plan.strategy.name().to_string(),
            });
            profiler.host(
                None,
                Kind::Plan,
                None,
                call,
                planning,
                Instant::now(),
                0,
                workload.items,
            );
            Recording {
                profiler,
                call,
                gpu_timed: self.gpu_timed(&plan),
            }
        });
        let mut partials = Vec::new();
        if items == 0 {
            return Ok(Ran { plan, partials });
        }
        let output = match target {
            Target::Items(out) => out,
            Target::Chunks => {
                partials = vec![0.0; plan.n_chunks as usize * kernel.output_words(0)];
                &mut partials[..]
            }
        };
        let workers: Vec<&GpuDevice> = self
            .devices
            .iter()
            .filter(|d| d.health.is_healthy())
            .map(|d| d.as_ref())
            .collect();
        let timeout = self.options.sync_timeout_ms.map(Duration::from_millis);
        let (reports, remaining) = self.execute(
            kernel, inputs, output, &plan, &workers, timeout, true, recording,
        )?;
        self.learn(&workload, &workers, &reports);
        if remaining > 0 {
            let failures: Vec<&Error> = reports.iter().filter_map(|r| r.failure.as_ref()).collect();
            if !failures.is_empty()
                && failures
                    .iter()
                    .all(|e| matches!(e, Error::OutOfMemory { .. }))
            {
                return Err(failures[0].clone());
            }
            return Err(self.no_healthy_device());
        }
        Ok(Ran { plan, partials })
    }

    /// Runs `plan` on `workers` (the planned devices plus any others that may take over
    /// chunks of a failed one). Returns each worker's report and the chunks left undone.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn execute(
        &self,
        kernel: &Kernel,
        inputs: &[&[f32]],
        output: &mut [f32],
        plan: &Plan,
        workers: &[&GpuDevice],
        timeout: Option<Duration>,
        counted: bool,
        recording: Option<Recording>,
    ) -> Result<(Vec<WorkerReport>, usize)> {
        for dev in workers {
            check_chunk_items(kernel, plan.chunk_items as usize, dev.max_binding_bytes())?;
            for (i, data) in inputs.iter().enumerate() {
                let whole = matches!(kernel.inputs[i], crate::kernel::Input::Whole(_));
                if whole && (data.len() * 4) as u64 > dev.max_binding_bytes() {
                    return Err(Error::invalid(
                        format!("inputs[{i}]"),
                        format!(
                            "expected at most {} bytes (device {} binding limit) for an input bound whole to every chunk, got {}",
                            dev.max_binding_bytes(),
                            dev.id,
                            data.len() * 4
                        ),
                    ));
                }
            }
        }
        let ranges = chunk_ranges(plan.items as usize, plan.chunk_items as usize);
        let slot_of = |device: usize| workers.iter().position(|w| w.id == device);
        let mut own: Vec<VecDeque<usize>> = vec![VecDeque::new(); workers.len()];
        let mut shared = VecDeque::new();
        let mut sharers = vec![false; workers.len()];
        for a in &plan.assignments {
            let slot = slot_of(a.device).expect("planned devices are among the workers");
            let chunks = a.first_chunk as usize..(a.first_chunk + a.chunks) as usize;
            if plan.strategy == Strategy::Adaptive {
                sharers[slot] = true;
                shared.extend(chunks);
            } else {
                own[slot].extend(chunks);
            }
        }
        let mut outputs = Vec::with_capacity(ranges.len());
        let mut rest = output;
        for range in &ranges {
            let (head, tail) =
                std::mem::take(&mut rest).split_at_mut(kernel.output_words(range.len()));
            outputs.push(Mutex::new(Some(head)));
            rest = tail;
        }
        let run = Run {
            kernel,
            inputs,
            ranges: &ranges,
            outputs,
            scheduler: Scheduler::new(own, shared, sharers),
            timeout,
            counted,
            recording,
        };
        let reports: Vec<WorkerReport> = std::thread::scope(|scope| {
            let handles: Vec<_> = workers
                .iter()
                .enumerate()
                .map(|(slot, dev)| {
                    let run = &run;
                    scope.spawn(move || run.work(slot, dev))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("worker threads do not panic"))
                .collect()
        });
        Ok((reports, run.scheduler.remaining()))
    }

    /// Feeds completed chunks into the history and the busy-time counters.
    fn learn(&self, workload: &Workload, workers: &[&GpuDevice], reports: &[WorkerReport]) {
        let models = self.models_for(workload, false);
        let family = family_of(&workload.kernel).map_or(workload.kernel.as_str(), |f| f.name);
        for (dev, report) in workers.iter().zip(reports) {
            dev.counters.add_busy(report.busy_s);
            let Some(model) = models.iter().find(|m| m.device == dev.id) else {
                continue;
            };
            // Devices of one group busy in this call shared its hardware.
            let sharing = workers
                .iter()
                .zip(reports)
                .filter(|(d, r)| d.group == dev.group && !r.completed.is_empty())
                .count();
            for done in &report.completed {
                let predicted = model.seconds(workload, done.items as u64, 1, sharing);
                self.history.record(dev.id, family, predicted, done.seconds);
            }
        }
    }

    /// By device id: whether profiled kernels of `plan` are timed with GPU timestamps — where
    /// the device has them and, unless forced, where one costs under 3% of a chunk.
    fn gpu_timed(&self, plan: &Plan) -> Vec<bool> {
        let measured = self.measured.lock().expect("measured lock");
        self.devices
            .iter()
            .map(|dev| {
                let supported = dev.timestamp_period_ns.is_some();
                match self.options.gpu_timestamps {
                    Some(forced) => forced && supported,
                    None => {
                        let cost = measured[dev.id]
                            .as_ref()
                            .map_or(f64::INFINITY, |(m, _)| m.timestamp_cost_s);
                        let chunk_s = plan
                            .assignments
                            .iter()
                            .find(|a| a.device == dev.id && a.chunks > 0)
                            .map_or(0.0, |a| a.estimated_seconds / a.chunks as f64);
                        supported && cost >= 0.0 && cost <= 0.03 * chunk_s
                    }
                }
            })
            .collect()
    }

    /// Starts recording every call's steps. Fails if a profile is already active.
    pub fn start_profile(&self) -> Result<Arc<Profiler>> {
        let mut active = self.profiler.lock().expect("profiler lock");
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

    /// Stops recording and returns the profile, if one was active.
    pub fn stop_profile(&self) -> Option<Arc<Profiler>> {
        self.profiler.lock().expect("profiler lock").take()
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
                memory_in_use_bytes: d.pool.live_bytes(),
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

    /// Marks device `id` (or every device) healthy again.
    pub fn reset_health(&self, id: Option<usize>) -> Result<()> {
        match id {
            Some(id) => self.device(id)?.health.reset(),
            None => self.devices.iter().for_each(|d| d.health.reset()),
        }
        Ok(())
    }
}

/// Arithmetic rate averaged over the measured families: the estimate for a family that has
/// no reference kernel yet.
fn mean_flops_per_s(m: &Measurements) -> f64 {
    let rates: Vec<f64> = families()
        .iter()
        .filter_map(|f| {
            m.family_items_per_s
                .get(f.name)
                .map(|r| r * f.reference_flops_per_item)
        })
        .collect();
    if rates.is_empty() {
        1e9
    } else {
        rates.iter().sum::<f64>() / rates.len() as f64
    }
}

fn check_lengths(
    kernel: &Kernel,
    inputs: &[&[f32]],
    target: &Target<'_>,
    items: usize,
) -> Result<()> {
    if inputs.len() != kernel.inputs.len() {
        return Err(Error::invalid(
            "inputs",
            format!(
                "expected {} arrays, got {}",
                kernel.inputs.len(),
                inputs.len()
            ),
        ));
    }
    for (i, data) in inputs.iter().enumerate() {
        let want = kernel.input_len(i, items);
        if data.len() != want {
            return Err(Error::invalid(
                format!("inputs[{i}]"),
                format!("expected {want} words, got {}", data.len()),
            ));
        }
    }
    match (target, kernel.output) {
        (Target::Items(out), Output::PerItem(w)) if out.len() != items * w => {
            return Err(Error::invalid(
                "output",
                format!("expected {} words, got {}", items * w, out.len()),
            ));
        }
        (Target::Items(_), Output::PerChunk(_)) | (Target::Chunks, Output::PerItem(_)) => {
            return Err(Error::invalid(
                "output",
                format!("kernel {} writes {:?}", kernel.id, kernel.output),
            ));
        }
        _ => {}
    }
    if items > u32::MAX as usize {
        return Err(Error::invalid(
            "items",
            format!("expected at most {} items per call, got {items}", u32::MAX),
        ));
    }
    Ok(())
}
