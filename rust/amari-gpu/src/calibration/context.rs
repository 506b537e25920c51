//! Calibration of a context: measuring (or loading) the figures of its devices, as many of
//! the families' rates as asked (all for `calibrate` and the capabilities users see, a
//! call's own family for a plan, see `demand`), the speedup of devices sharing hardware,
//! and the per-workload device models the partitioners plan with, refined by the history of
//! completed calls.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::cache;
use super::dtypes;
use super::families::{families, flops_per_s};
use crate::calibration::measure as calibrate;
use crate::capabilities::Measurements;
use crate::capabilities::{memory_budget_bytes, Capabilities};
use crate::context::MultiGpuContext;
use crate::device::GpuDevice;
use crate::dtype::Dtype;
use crate::error::Result;
use crate::kernel::FamilyDefinition;
use crate::model::DeviceModel;
use crate::plan::Strategy;
use crate::workload::Workload;

/// The cached measurements for `key` when they are usable; otherwise `None`, with a note
/// when an entry exists but cannot be used. An entry may hold any subset of the families'
/// rates (they are measured when first needed); the ones it lacks are measured on top.
fn cached(key: &str) -> Option<Measurements> {
    let m = cache::load::<Measurements>(key)?;
    if !calibrate::has_device_figures(&m) {
        log::info!("calibration cache entry for {key} lacks figures this version measures; measuring again");
        return None;
    }
    if let Some(figure) = calibrate::unusable_figure(&m) {
        log::warn!(
            "calibration cache entry for {key} holds an unusable figure ({figure}); measuring \
             again and rewriting it"
        );
        return None;
    }
    Some(m)
}

/// Transfer rate (each way) of a wgpu device's model before anything is measured on it: a
/// nominal figure, like `flops_per_s`'s fallback rate, for a plan with nothing to split
/// (only its estimate uses it).
const NOMINAL_BYTES_PER_S: f64 = 1e9;

/// What measuring added to `have` to make `m`, in words.
fn what(have: Option<&Measurements>, m: &Measurements) -> String {
    let mut parts = Vec::new();
    if have.is_none() {
        parts.push("device figures".to_string());
    }
    for name in m.family_items_per_s.keys() {
        if !have.is_some_and(|h| h.family_items_per_s.contains_key(name)) {
            parts.push(format!("{name} rate"));
        }
    }
    parts.join(", ")
}

impl MultiGpuContext {
    /// Measures every device (or loads its figures from the disk cache unless `force`), one
    /// device at a time so that devices sharing hardware do not disturb each other, and
    /// every group of devices sharing hardware. Logical devices on one adapter share one
    /// measurement.
    pub fn calibrate(&self, force: bool) -> Result<Vec<Capabilities>> {
        let _one_at_a_time = self.calibration.lock().expect("calibration lock");
        let started = Instant::now();
        let ids: Vec<usize> = (0..self.devices.len()).collect();
        let pending = self.lacking(&ids, families(), force).len();
        if pending > 0 {
            log::info!(
                "calibrating {pending} devices{}…",
                if force { " (forced)" } else { "" }
            );
        }
        self.measure_devices(&ids, (families(), &[Dtype::F64]), force, log::Level::Info)?;
        // Devices whose families came from the cache without the float64 rate.
        for line in self.measure_rates(&ids, Dtype::F64)? {
            log::info!("calibrated {line}");
        }
        let groups = self.groups_lacking(&ids, force);
        self.measure_groups(&groups, force, log::Level::Info)?;
        if pending > 0 {
            log::info!(
                "calibration done in {:.2} s",
                started.elapsed().as_secs_f64()
            );
        }
        Ok((0..self.devices.len())
            .map(|id| self.capabilities_now(id))
            .collect())
    }

    /// Of the healthy devices `ids`, those whose figures lack a rate of `wanted` (all of
    /// them when `force`).
    pub(super) fn lacking(
        &self,
        ids: &[usize],
        wanted: &[&FamilyDefinition],
        force: bool,
    ) -> Vec<usize> {
        let measured = self.measured.lock().expect("measured lock");
        ids.iter()
            .copied()
            .filter(|&id| self.devices[id].health.is_healthy())
            .filter(|&id| {
                force
                    || !measured[id]
                        .as_ref()
                        .is_some_and(|(m, _)| calibrate::covers(m, wanted))
            })
            .collect()
    }

    /// Brings the figures of devices `ids` up to the device figures and the rates of the
    /// `wanted` families: taken from a device on the same adapter measured in this step, or
    /// from the disk cache (unless `force`), else measured (with the rates of `dtypes` the
    /// device runs, so that the cache is written once), and what was measured is cached.
    /// Each device's source is logged at `level`. Returns what was measured, as
    /// "device N (adapter, backend): what in x s", one entry per measurement.
    pub(super) fn measure_devices(
        &self,
        ids: &[usize],
        (wanted, dtypes): (&[&FamilyDefinition], &[Dtype]),
        force: bool,
        level: log::Level,
    ) -> Result<Vec<String>> {
        let mut fresh: BTreeMap<String, Measurements> = BTreeMap::new();
        let mut done = Vec::new();
        for id in self.lacking(ids, wanted, force) {
            let dev = &self.devices[id];
            let name = format!(
                "device {} ({}, {})",
                dev.id, dev.adapter.name, dev.adapter.backend
            );
            let key = cache::device_key(dev);
            let kept = match force {
                true => None,
                false => self.measured.lock().expect("measured lock")[id].clone(),
            };
            // What there is to build on: a measurement of this step on the same adapter,
            // what the device holds, or (first time) the cache, which a cache written
            // before a figure existed, or holding one no cost model can use, does not give.
            let (base, source) = match (fresh.get(&key), kept) {
                (Some(m), _) => (
                    Some((m.clone(), false)),
                    "shared with a device on the same adapter",
                ),
                (None, Some(entry)) => (Some(entry), "kept"),
                (None, None) if !force => {
                    (cached(&key).map(|m| (m, true)), "loaded from the cache")
                }
                (None, None) => (None, ""),
            };
            let entry = match base {
                Some((m, from_cache)) if calibrate::covers(&m, wanted) => {
                    log::log!(level, "{name}: calibration {source}");
                    (m, from_cache)
                }
                _ if !dev.health.is_healthy() => continue,
                base => {
                    let have = base.as_ref().map(|(m, _)| m);
                    let t = Instant::now();
                    let mut m = match dev.as_host() {
                        Some(host) => super::host::measure(host, have, wanted)?,
                        None => calibrate::measure(dev, have, wanted)?,
                    };
                    let mut measured = what(have, &m);
                    for rate in dtypes::add_rates(dev, &mut m, dtypes) {
                        measured.push_str(&format!(", {rate}"));
                    }
                    let seconds = t.elapsed().as_secs_f64();
                    log::log!(level, "calibrated {name} in {seconds:.2} s");
                    done.push(format!("{name}: {measured} in {seconds:.2} s"));
                    if let Some(figure) = calibrate::unusable_figure(&m) {
                        // Not stored: the next process measures again rather than trusting it.
                        log::warn!(
                            "calibration of device {} ({key}) measured an unusable figure \
                             ({figure}); not cached",
                            dev.id
                        );
                    } else if let Err(e) = cache::store(&key, &m) {
                        // A cache that cannot be written only costs a re-measurement next time.
                        log::warn!("calibration cache not written for {key}: {e}");
                    }
                    fresh.insert(key, m.clone());
                    (m, false)
                }
            };
            let mut measured = self.measured.lock().expect("measured lock");
            if !(measured[id].as_ref()).is_some_and(|(m, _)| calibrate::covers(m, wanted)) {
                // The device's model was nominal (or a fallback rate) for these families:
                // what its history learned were ratios to that, not to these figures.
                self.history.forget(id);
            }
            if let (Some(_), Some(bytes)) = (dev.as_host(), entry.0.stream_past_bytes) {
                // The host's measured streaming size, so that no call measures it again.
                crate::ga::use_stream_past(bytes as usize);
            }
            measured[id] = Some(entry);
            // Fast-path decisions were made from the figures replaced.
            self.fast.clear();
        }
        Ok(done)
    }

    /// The groups with several healthy members among devices `ids` whose speedup is not
    /// known yet (all of them when `force`).
    pub(super) fn groups_lacking(&self, ids: &[usize], force: bool) -> BTreeSet<usize> {
        let known = self.group_speedups.lock().expect("group lock");
        let healthy = |g: usize| {
            self.devices
                .iter()
                .filter(|d| d.group == g && d.health.is_healthy())
                .count()
        };
        ids.iter()
            .map(|&id| self.devices[id].group)
            .filter(|&g| force || !known.contains_key(&g))
            .filter(|&g| healthy(g) > 1)
            .collect()
    }

    /// Measures (or loads) the speedup of `groups`, each timed with the first family's
    /// reference kernel on all its healthy members, whose figures for that family are
    /// measured first. Returns what was measured, for the caller to report.
    pub(super) fn measure_groups(
        &self,
        groups: &BTreeSet<usize>,
        force: bool,
        level: log::Level,
    ) -> Result<Vec<String>> {
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let members: Vec<usize> = (self.devices.iter())
            .filter(|d| groups.contains(&d.group))
            .map(|d| d.id)
            .collect();
        let mut done = self.measure_devices(&members, (&families()[..1], &[]), false, level)?;
        let t = Instant::now();
        let speedups = self.measure_group_speedups(groups, force)?;
        let measured: BTreeMap<usize, f64> = (speedups.iter())
            .filter(|(_, (_, from_cache))| !from_cache)
            .map(|(&group, &(speedup, _))| (group, speedup))
            .collect();
        if !measured.is_empty() {
            let seconds = t.elapsed().as_secs_f64();
            log::log!(
                level,
                "measured the speedup of devices sharing hardware in {seconds:.2} s: {measured:?}"
            );
            done.push(format!(
                "the speedup of groups sharing hardware {measured:.2?} in {seconds:.2} s"
            ));
        }
        let mut known = self.group_speedups.lock().expect("group lock");
        for (group, (speedup, _)) in speedups {
            let members = self
                .devices
                .iter()
                .filter(|d| d.group == group && d.health.is_healthy())
                .count();
            known.insert(group, (speedup, members));
        }
        Ok(done)
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

    /// Measures whatever a device or group lacks (every figure of every healthy device,
    /// the speedup of every group sharing hardware): what `capabilities` shows.
    pub(crate) fn ensure_calibrated(&self) -> Result<()> {
        let ids: Vec<usize> = (0..self.devices.len()).collect();
        if !self.lacking(&ids, families(), false).is_empty()
            || !self.lacking_rate(&ids, Dtype::F64).is_empty()
            || !self.groups_lacking(&ids, false).is_empty()
        {
            self.calibrate(false)?;
        }
        Ok(())
    }

    /// What calibration measured on device `id`, if it has been calibrated.
    pub(crate) fn measurements(&self, id: usize) -> Option<Measurements> {
        self.measured.lock().expect("measured lock")[id]
            .as_ref()
            .map(|(m, _)| m.clone())
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

    /// `models` with each device's memory budget as the OS reports it now
    /// ([`memory_budget_bytes`]) when `strategy` plans by it; as they are otherwise.
    pub(crate) fn with_budgets(
        &self,
        mut models: Vec<DeviceModel>,
        strategy: Strategy,
    ) -> Vec<DeviceModel> {
        if strategy == Strategy::Memory {
            for m in &mut models {
                m.memory_budget_bytes = self
                    .devices
                    .get(m.device)
                    .and_then(|d| memory_budget_bytes(d));
            }
        }
        models
    }

    /// The cost models of the healthy devices for `workload`, without history corrections
    /// when `corrected` is false: from each device's figures, nominal where it has none
    /// (see [`model`](Self::model)); `demand` decides when a plan needs measured ones.
    pub(crate) fn models_for(&self, workload: &Workload, corrected: bool) -> Vec<DeviceModel> {
        let groups = self.group_speedups.lock().expect("group lock").clone();
        let measured = self.measured.lock().expect("measured lock");
        self.devices
            .iter()
            .filter(|d| d.health.is_healthy())
            .map(|dev| {
                let m = measured[dev.id].as_ref().map(|(m, _)| m);
                self.model(dev, m, workload, corrected, &groups)
            })
            .collect()
    }

    /// The cost model of `dev` for `workload` from its figures `m`. Without figures (a
    /// device that runs a call alone, where there is nothing to split) the model is nominal:
    /// no launch cost, [`NOMINAL_BYTES_PER_S`] each way (none on the host device, as when
    /// measured), the fallback arithmetic rate of [`flops_per_s`].
    fn model(
        &self,
        dev: &GpuDevice,
        m: Option<&Measurements>,
        workload: &Workload,
        corrected: bool,
        groups: &BTreeMap<usize, (f64, usize)>,
    ) -> DeviceModel {
        let (correction, uncertainty) = if corrected {
            self.history.get(dev.id, &workload.history_key())
        } else {
            (1.0, 0.0)
        };
        // The host device reads inputs and writes outputs in place, inside the kernels
        // whose rates calibration measured on arrays in main memory: its memory traffic is
        // in those rates already, and a transfer term would count it twice (it made the
        // host look 2.4x slower than it ran here).
        let (h2d, d2h) = match (dev.as_host(), m) {
            (Some(_), _) => (f64::INFINITY, f64::INFINITY),
            (None, Some(m)) => (m.h2d_bytes_per_s, m.d2h_bytes_per_s),
            (None, None) => (NOMINAL_BYTES_PER_S, NOMINAL_BYTES_PER_S),
        };
        let no_rates = BTreeMap::new();
        DeviceModel {
            device: dev.id,
            group: dev.group,
            launch_latency_s: m.map_or(0.0, |m| m.launch_latency_s),
            h2d_bytes_per_s: h2d,
            d2h_bytes_per_s: d2h,
            flops_per_s: dtypes::scaled(
                flops_per_s(
                    m.map_or(&no_rates, |m| &m.family_items_per_s),
                    workload.family,
                ),
                m,
                workload.dtype,
            ),
            correction,
            uncertainty,
            // Filled only where a plan reads it (`with_budgets`, the memory strategy): read
            // from the OS on every model, it cost every call two reads of /proc/meminfo per
            // CPU device, before its kernels and after them.
            memory_budget_bytes: None,
            max_binding_bytes: dev.max_binding_bytes(),
            group_speedup: groups.get(&dev.group).map_or(1.0, |g| g.0),
            group_members: groups.get(&dev.group).map_or(1, |g| g.1),
        }
    }
}

/// The families whose rates a model of `workload` is made from: its own family's, or for a
/// workload of a family without a reference kernel every family's (the model takes their
/// mean).
pub(super) fn needed(workload: &Workload) -> &'static [&'static FamilyDefinition] {
    // Found by family, not by address: a definition is a constant, so two references to
    // it need not be the same pointer.
    let all = families();
    let own = (workload.family).and_then(|family| all.iter().position(|f| f.family == family));
    own.map_or(all, |i| &all[i..=i])
}
