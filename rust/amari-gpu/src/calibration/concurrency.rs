//! Measures how much devices that share hardware gain from running together: logical
//! devices on one adapter, or one device seen through two backends. The gain is measured
//! end to end (uploads, dispatches, readbacks), because that is where it comes from: while
//! one device computes, another's transfers proceed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::cache;
use super::families::families;
use super::measure::{median, number, out_of_bounds, MAX_ITEMS_PER_S, MAX_STEP_S};
use crate::context::MultiGpuContext;
use crate::device::GpuDevice;
use crate::error::Result;
use crate::host::cpu;
use crate::plan::{Plan, Strategy};
use crate::worker::Execution;

/// Items per chunk of a measurement run.
const CHUNK_ITEMS: u64 = 1 << 14;
/// Seconds one member alone is predicted to take for a run: long enough that launch noise
/// is a small part, short enough that calibration stays quick on a slow adapter.
const TARGET_RUN_S: f64 = 0.05;
/// Chunks per member at the least, so that every member pipelines when all run together.
const MIN_CHUNKS_PER_MEMBER: usize = 4;
/// Items per run at the most.
const MAX_ITEMS: usize = 1 << 20;
/// Timed rounds (after one warm-up round) of each configuration.
const REPEATS: usize = 5;
/// Calibration ignores the context's `sync_timeout_ms` (its chunks are not the caller's)
/// but still gives up on a device that hangs.
const CALIBRATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Smallest believable group speedup: members that together run at a hundredth of the
/// speed of one alone are a broken measurement, not contention.
pub const MIN_GROUP_SPEEDUP: f64 = 0.01;

/// Largest believable group speedup per member: `k` members sharing hardware gain at most
/// as `k` independent devices would (a speedup of `k`); the factor leaves room for timing
/// noise.
pub const MAX_GROUP_SPEEDUP_PER_MEMBER: f64 = 2.0;

/// The bounds of a group of `members` devices' speedup.
fn speedup_bounds(members: usize) -> (f64, f64, &'static str) {
    (
        MIN_GROUP_SPEEDUP,
        MAX_GROUP_SPEEDUP_PER_MEMBER * members as f64,
        "for this many members",
    )
}

/// The bounds of a member's seconds per item alone: no faster than [`MAX_ITEMS_PER_S`], no
/// slower than one calibration step per item.
const PER_ITEM_BOUNDS: (f64, f64, &str) = (1.0 / MAX_ITEMS_PER_S, MAX_STEP_S, "s per item");

/// Cache key of a group: its members' adapter identities, in order (the host device's with
/// its thread count, which its speed and its contention with CPU adapters depend on), and
/// how the speedup was measured (figures from an equal split are not comparable).
pub fn group_key(members: &[&GpuDevice]) -> String {
    let names: Vec<String> = members
        .iter()
        .map(|d| match d.as_host() {
            Some(host) => format!("{} threads {}", d.adapter.identity(), host.pool.threads()),
            None => d.adapter.identity(),
        })
        .collect();
    format!(
        "group|{}|amari-gpu {}|capability split",
        names.join("+"),
        crate::VERSION
    )
}

/// The kernel a group is timed with: the first family's reference, or with the host device
/// among the members its host-runnable stand-in.
fn group_kernel(members: &[&GpuDevice]) -> crate::kernel::Kernel {
    let reference = (families()[0].reference)();
    if members.iter().any(|d| d.as_host().is_some()) {
        super::host::host_reference(&reference).unwrap_or(reference)
    } else {
        reference
    }
}

impl MultiGpuContext {
    /// Items per run for a group: what its first member alone is predicted (from its
    /// calibrated figures) to finish in [`TARGET_RUN_S`], in whole chunks, at least
    /// [`MIN_CHUNKS_PER_MEMBER`] chunks per member and at most [`MAX_ITEMS`].
    fn run_items(&self, members: &[&GpuDevice]) -> usize {
        let kernel = group_kernel(members);
        let workload = kernel.workload(MAX_ITEMS);
        let chunk = CHUNK_ITEMS as usize;
        let smallest = chunk * MIN_CHUNKS_PER_MEMBER * members.len();
        let per_item_s = self
            .models_for(&workload, false)
            .into_iter()
            .find(|m| m.device == members[0].id)
            .map(|m| m.seconds(&workload, MAX_ITEMS as u64, (MAX_ITEMS / chunk) as u64, 1))
            .map_or(0.0, |s| s / MAX_ITEMS as f64);
        let wanted = if per_item_s > 0.0 {
            (TARGET_RUN_S / per_item_s) as usize
        } else {
            MAX_ITEMS
        };
        wanted
            .div_ceil(chunk)
            .saturating_mul(chunk)
            .clamp(smallest.min(MAX_ITEMS), MAX_ITEMS)
    }

    /// The plan of a measurement run of `items` items on `members` split by `strategy`, and
    /// the items each member was given.
    fn measurement_plan(
        &self,
        members: &[&GpuDevice],
        items: usize,
        strategy: Strategy,
    ) -> Result<(Plan, Vec<u64>)> {
        let workload = group_kernel(members).workload(items);
        let models: Vec<_> = self
            .models_for(&workload, false)
            .into_iter()
            .filter(|m| members.iter().any(|d| d.id == m.device))
            .collect();
        let models = self.with_budgets(models, strategy);
        let plan = crate::partition::plan(&workload, CHUNK_ITEMS, &models, strategy)?;
        let planned = members
            .iter()
            .map(|d| {
                plan.assignments
                    .iter()
                    .filter(|a| a.device == d.id)
                    .map(|a| a.items)
                    .sum()
            })
            .collect();
        Ok((plan, planned))
    }

    /// The group speedup of `members`, measured: each adapter's members alone (logical
    /// devices of one adapter share that time), then all together on a capability split,
    /// so that members of different speeds (the host device beside lavapipe) are all busy
    /// for most of the run. The runs are interleaved round by round, so that a change of
    /// load on the machine hits them alike; each figure is a median.
    fn measure_speedup(&self, members: &[&GpuDevice]) -> Result<(f64, Vec<f64>)> {
        let items = self.run_items(members);
        let kernel = group_kernel(members);
        let inputs = kernel.filled_inputs(items, 0.5);
        let views: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
        let mut output = vec![0.0; kernel.output_words(items)];
        // One configuration per adapter alone, then everyone.
        let mut configs: Vec<(Vec<&GpuDevice>, Plan)> = Vec::new();
        let mut alone_of: Vec<usize> = Vec::new();
        for dev in members {
            let known = configs[..]
                .iter()
                .position(|(m, _)| m[0].adapter.index == dev.adapter.index);
            let slot = match known {
                Some(slot) => slot,
                None => {
                    let (plan, _) = self.measurement_plan(&[dev], items, Strategy::Balanced)?;
                    configs.push((vec![*dev], plan));
                    configs.len() - 1
                }
            };
            alone_of.push(slot);
        }
        let (together, planned) = self.measurement_plan(members, items, Strategy::Capability)?;
        configs.push((members.to_vec(), together));
        let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(REPEATS); configs.len()];
        for round in 0..=REPEATS {
            for (slot, (workers, plan)) in configs.iter().enumerate() {
                let start = Instant::now();
                let (_, remaining) = self.execute(Execution {
                    kernel: &kernel,
                    inputs: &views,
                    output: &mut output,
                    plan,
                    workers,
                    timeout: Some(CALIBRATION_TIMEOUT),
                    counted: false,
                    recording: None,
                })?;
                if remaining > 0 {
                    return Err(self.no_healthy_device());
                }
                // The first round warms pipelines and buffer pools up.
                if round > 0 {
                    samples[slot].push(start.elapsed().as_secs_f64());
                }
            }
        }
        let medians: Vec<f64> = samples.into_iter().map(median).collect();
        let alone_s: Vec<f64> = alone_of.iter().map(|&slot| medians[slot]).collect();
        let measured = speedup_from(&alone_s, &planned, items, medians[configs.len() - 1]);
        let per_item = alone_s.iter().map(|s| s / items as f64).collect();
        Ok((bounded(measured, members), per_item))
    }

    /// Seeds the history of every member with what it took alone, end to end, for the
    /// group's reference kernel (seconds per item, in member order): the figure calibration
    /// measures for a device on resident data leaves out what a chunk costs around the
    /// kernel (on lavapipe it predicted half the time a call took here), and a device the
    /// plans then leave out would never be observed to correct it.
    fn seed_history(&self, members: &[&GpuDevice], alone_s_per_item: &[f64]) {
        let items = self.run_items(members);
        let workload = group_kernel(members).workload(items);
        let chunks = (items as u64).div_ceil(CHUNK_ITEMS);
        let models = self.models_for(&workload, false);
        for (dev, &per_item) in members.iter().zip(alone_s_per_item) {
            if let Some(model) = models.iter().find(|m| m.device == dev.id) {
                let predicted = model.seconds(&workload, items as u64, chunks, 1);
                let observed = per_item * items as f64;
                self.history
                    .record(dev.id, &workload.history_key(), predicted, observed);
            }
        }
    }

    /// For each of `wanted` with several healthy members: aggregate speed of all members
    /// together over the speed of one alone (1 = sharing gains nothing, k = k independent
    /// devices), and whether it came from the disk cache.
    pub(crate) fn measure_group_speedups(
        &self,
        wanted: &BTreeSet<usize>,
        force: bool,
    ) -> Result<BTreeMap<usize, (f64, bool)>> {
        let mut groups: BTreeMap<usize, Vec<&GpuDevice>> = BTreeMap::new();
        for dev in self.devices().iter().filter(|d| d.health.is_healthy()) {
            if wanted.contains(&dev.group) {
                groups.entry(dev.group).or_default().push(dev.as_ref());
            }
        }
        let mut speedups = BTreeMap::new();
        for (group, members) in groups.into_iter().filter(|(_, m)| m.len() > 1) {
            let key = group_key(&members);
            let alone_keys: Vec<String> = (0..members.len())
                .map(|i| format!("{key}|member {i} alone s per item"))
                .collect();
            let cached = if force {
                None
            } else {
                // A figure outside its bounds (not finite, a speedup of 0 or 10^308) would
                // mislead every plan: the group is measured again (and rewritten).
                let load = |k: &str, bounds| {
                    cache::load::<f64>(k).filter(|&s| {
                        let problem = out_of_bounds(s, bounds);
                        if let Some(why) = &problem {
                            log::warn!(
                                "calibration cache entry for {k} holds an unusable figure \
                                 ({} {why}); measuring again and rewriting it",
                                number(s)
                            );
                        }
                        problem.is_none()
                    })
                };
                let alone: Option<Vec<f64>> = alone_keys
                    .iter()
                    .map(|k| load(k, PER_ITEM_BOUNDS))
                    .collect();
                load(&key, speedup_bounds(members.len())).zip(alone)
            };
            let from_cache = cached.is_some();
            let (speedup, alone) = match cached {
                Some(figures) => figures,
                None => {
                    let (s, alone) = self.measure_speedup(&members)?;
                    let unusable = out_of_bounds(s, speedup_bounds(members.len())).or_else(|| {
                        alone
                            .iter()
                            .find_map(|&a| out_of_bounds(a, PER_ITEM_BOUNDS))
                    });
                    if let Some(why) = unusable {
                        // Not stored: the next process measures again rather than trusting it.
                        log::warn!(
                            "measured speedup {} of group {key} ({why}); not cached",
                            number(s)
                        );
                    } else {
                        // A cache that cannot be written only costs a re-measurement next time.
                        let _ = cache::store(&key, &s);
                        for (k, per_item) in alone_keys.iter().zip(&alone) {
                            let _ = cache::store(k, per_item);
                        }
                    }
                    (s, alone)
                }
            };
            self.seed_history(&members, &alone);
            speedups.insert(group, (speedup, from_cache));
        }
        Ok(speedups)
    }
}

/// `speedup` for a group of `members`, bounded where the group cannot gain: when its host
/// device's pool already has a thread on every hardware thread, the CPU adapters beside it
/// (lavapipe, llvmpipe) only take turns on the same cores, so running them together adds
/// no arithmetic. A measurement above 1 there is time taken from other processes of a
/// loaded machine (more threads, a larger share of it), which neither lasts nor scales.
fn bounded(speedup: f64, members: &[&GpuDevice]) -> f64 {
    let saturating = members
        .iter()
        .filter_map(|d| d.as_host())
        .any(|h| h.pool.threads() >= cpu::hardware_threads());
    if saturating && speedup > 1.0 {
        log::info!(
            "measured a speedup of {speedup:.2} for the host device beside CPU adapters; \
             its pool spans every hardware thread, so the model uses 1"
        );
        1.0
    } else {
        speedup
    }
}

/// The group speedup the cost model uses ([`crate::model::DeviceModel::group_speedup`]),
/// from one run of all `m` members together: member `i` alone takes `alone_s[i]` for `items`
/// items and was given `planned[i]` of them; all together took `together_s`. The model
/// slows every busy member by `f = m / speedup`, so it predicts the together run to take
/// `f · max_i(planned[i] · alone_s[i] / items)`; the speedup is the one that makes that
/// prediction the measured time. For `m` equal members on an equal split it is
/// `alone / together`.
pub(crate) fn speedup_from(alone_s: &[f64], planned: &[u64], items: usize, together_s: f64) -> f64 {
    let slowest_share = alone_s
        .iter()
        .zip(planned)
        .map(|(&s, &n)| s * n as f64 / items as f64)
        .fold(0.0f64, f64::max);
    let busy = planned.iter().filter(|&&n| n > 0).count().max(1);
    busy as f64 * slowest_share / together_s
}

#[cfg(test)]
mod tests {
    use super::speedup_from;

    #[test]
    fn equal_members_on_an_equal_split_give_alone_over_together() {
        let s = speedup_from(&[0.1, 0.1], &[500, 500], 1000, 0.08);
        assert!((s - 0.1 / 0.08).abs() < 1e-12, "{s}");
    }

    #[test]
    fn members_of_different_speeds_on_a_proportional_split() {
        // The host takes 20 ms alone, lavapipe 100 ms; split 5:1 they would both finish in
        // 16.7 ms if they did not share cores. Measured 30 ms: each ran 1.8x slower than
        // alone, a speedup of 2 / 1.8.
        let s = speedup_from(&[0.1, 0.02], &[1000, 5000], 6000, 0.03);
        let f = 0.03 / (0.1 / 6.0);
        assert!((s - 2.0 / f).abs() < 1e-12, "{s}");
        assert!(s < 1.2, "sharing the cores gains little: {s}");
    }
}
