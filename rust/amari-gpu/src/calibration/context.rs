//! Calibration of a context: measuring (or loading) every device's figures, the
//! capabilities users see, and the per-workload device models the partitioners plan with,
//! refined by the history of completed calls.

use std::collections::BTreeMap;
use std::time::Instant;

use super::cache;
use super::families::flops_per_s;
use crate::calibration::measure as calibrate;
use crate::capabilities::Measurements;
use crate::capabilities::{memory_budget_bytes, Capabilities};
use crate::context::MultiGpuContext;
use crate::error::Result;
use crate::model::DeviceModel;
use crate::workload::Workload;

/// The cached measurements for `key` when they are complete and usable; otherwise `None`,
/// with a warning when an entry exists but cannot be used.
fn cached(key: &str) -> Option<Measurements> {
    let m = cache::load::<Measurements>(key)?;
    if !calibrate::is_complete(&m) {
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

impl MultiGpuContext {
    /// Measures every device (or loads its figures from the disk cache unless `force`), one
    /// device at a time so that devices sharing hardware do not disturb each other. Logical
    /// devices on one adapter share one measurement.
    pub fn calibrate(&self, force: bool) -> Result<Vec<Capabilities>> {
        let _one_at_a_time = self.calibration.lock().expect("calibration lock");
        let started = Instant::now();
        let pending = {
            let measured = self.measured.lock().expect("measured lock");
            self.devices
                .iter()
                .filter(|d| force || measured[d.id].is_none())
                .count()
        };
        if pending > 0 {
            log::info!(
                "calibrating {pending} devices{}…",
                if force { " (forced)" } else { "" }
            );
        }
        let mut fresh: BTreeMap<String, Measurements> = BTreeMap::new();
        for dev in &self.devices {
            if !force && self.measured.lock().expect("measured lock")[dev.id].is_some() {
                continue;
            }
            let mut key = format!("{}|amari-gpu {}", dev.adapter.identity(), crate::VERSION);
            if let Some(host) = dev.as_host() {
                // The host's rates scale with its pool, and are the build's own: an
                // unoptimised build measures slower.
                key.push_str(&format!("|threads {}", host.pool.threads()));
                if cfg!(debug_assertions) {
                    key.push_str("|debug");
                }
            }
            let found = match fresh.get(&key) {
                Some(m) => Some((m.clone(), false)),
                // A cache written before a family or figure existed, or holding a figure
                // no cost model can use, is measured again (and rewritten).
                None if !force => cached(&key).map(|m| (m, true)),
                None => None,
            };
            let entry = match found {
                Some(entry) => {
                    log::info!(
                        "device {} ({}, {}): calibration {}",
                        dev.id,
                        dev.adapter.name,
                        dev.adapter.backend,
                        if entry.1 {
                            "loaded from the cache"
                        } else {
                            "shared with a device on the same adapter"
                        }
                    );
                    entry
                }
                None => {
                    if !dev.health.is_healthy() {
                        continue;
                    }
                    let t = Instant::now();
                    let m = match dev.as_host() {
                        Some(host) => super::host::measure(host)?,
                        None => calibrate::measure(dev)?,
                    };
                    log::info!(
                        "calibrated device {} ({}, {}) in {:.2} s",
                        dev.id,
                        dev.adapter.name,
                        dev.adapter.backend,
                        t.elapsed().as_secs_f64()
                    );
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
            self.measured.lock().expect("measured lock")[dev.id] = Some(entry);
            // Fast-path decisions were made from the figures replaced.
            self.fast.clear();
        }
        let needs_groups = force || self.group_speedups.lock().expect("group lock").is_empty();
        if needs_groups {
            let t = Instant::now();
            let measured = self.measure_group_speedups(force)?;
            if !measured.is_empty() {
                log::info!(
                    "measured the speedup of devices sharing hardware in {:.2} s: {measured:?}",
                    t.elapsed().as_secs_f64()
                );
            }
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

    pub(crate) fn ensure_calibrated(&self) -> Result<()> {
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

    /// The cost models of the healthy devices for `workload`, without history corrections
    /// when `corrected` is false.
    pub(crate) fn models_for(&self, workload: &Workload, corrected: bool) -> Vec<DeviceModel> {
        let groups = self.group_speedups.lock().expect("group lock").clone();
        let measured = self.measured.lock().expect("measured lock");
        self.devices
            .iter()
            .filter(|d| d.health.is_healthy())
            .filter_map(|dev| {
                let (m, _) = measured[dev.id].as_ref()?;
                let (correction, uncertainty) = if corrected {
                    self.history.get(dev.id, workload.history_key())
                } else {
                    (1.0, 0.0)
                };
                // The host device reads inputs and writes outputs in place, inside the
                // kernels whose rates calibration measured on arrays in main memory: its
                // memory traffic is in those rates already, and a transfer term would count
                // it twice (it made the host look 2.4x slower than it ran here).
                let (h2d, d2h) = if dev.as_host().is_some() {
                    (f64::INFINITY, f64::INFINITY)
                } else {
                    (m.h2d_bytes_per_s, m.d2h_bytes_per_s)
                };
                Some(DeviceModel {
                    device: dev.id,
                    group: dev.group,
                    launch_latency_s: m.launch_latency_s,
                    h2d_bytes_per_s: h2d,
                    d2h_bytes_per_s: d2h,
                    flops_per_s: flops_per_s(&m.family_items_per_s, workload.family),
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
}
