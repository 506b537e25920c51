//! The fast path of small calls. A call whose whole work on its best device is predicted
//! (by the cost model) to take no longer than the fixed cost any split adds — the least
//! launch latency among its devices: a second device's submission, or on the host device
//! the hand-off to its pool — cannot gain from splitting. It runs on that one device, on
//! the calling thread (the host device runs its kernel there too), on the same chunk grid
//! as a split would use, so its results are the split path's bit for bit. The decision is
//! made once per kernel, size class (items rounded up to a power of two), set of healthy
//! devices and strategy, and cached; calibration clears the cache, and a change of health
//! changes the key. Its plan says `fast_path`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::MultiGpuContext;
use crate::device::GpuDevice;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::plan::{DeviceWorkload, Plan, Strategy};
use crate::workload::Workload;

/// What a decision depends on besides the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    /// Bits of the call's item count rounded up to a power of two.
    class: u32,
    /// The devices the call may run on, one bit per device id.
    workers: u128,
    /// The strategy asked for.
    strategy: Strategy,
    /// A caller's chunk grid, when given.
    grid: Option<usize>,
}

/// A fast-path decision: the one device, and the model's time of the size class on it.
#[derive(Debug, Clone, Copy)]
struct Decision {
    device: usize,
    seconds: f64,
}

/// The cached decisions of a context, by kernel id (looked up without allocating).
#[derive(Debug, Default)]
pub(crate) struct FastCache {
    decisions: Mutex<HashMap<String, HashMap<Key, Option<Decision>>>>,
}

impl FastCache {
    fn get(&self, kernel: &str, key: &Key) -> Option<Option<Decision>> {
        let decisions = self.decisions.lock().unwrap_or_else(PoisonError::into_inner);
        decisions.get(kernel)?.get(key).copied()
    }

    fn put(&self, kernel: &str, key: Key, decision: Option<Decision>) {
        let mut decisions = self.decisions.lock().unwrap_or_else(PoisonError::into_inner);
        match decisions.get_mut(kernel) {
            Some(by_key) => {
                by_key.insert(key, decision);
            }
            None => {
                decisions.insert(kernel.to_string(), HashMap::from([(key, decision)]));
            }
        }
    }

    /// Forgets every decision (the capabilities they were made from changed).
    pub(crate) fn clear(&self) {
        self.decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// The one-device plan of a fast-path call: every chunk of the grid on `device`.
fn one_device_plan(
    requested: Strategy,
    items: u64,
    chunk_items: u64,
    decision: Decision,
) -> Plan {
    let n_chunks = items.div_ceil(chunk_items.max(1));
    // One device is what the latency strategy gives a call too small to split.
    let strategy = if requested == Strategy::Auto {
        Strategy::Latency
    } else {
        requested
    };
    Plan {
        strategy,
        requested,
        items,
        chunk_items,
        n_chunks,
        assignments: vec![DeviceWorkload {
            device: decision.device,
            start: 0,
            stop: items,
            items,
            first_chunk: 0,
            chunks: n_chunks,
            estimated_seconds: decision.seconds,
        }],
        estimated_makespan_s: decision.seconds,
        lower_bound_s: decision.seconds,
        efficiency: 1.0,
        fast_path: true,
    }
}

impl MultiGpuContext {
    /// The fast-path plan of a call of `kernel` over `workload.items` items on `workers`,
    /// or `None` when it takes the planner's split path: the cached decision of its key,
    /// made from the cost model on a miss.
    pub(super) fn fast_plan(
        &self,
        kernel: &Kernel,
        workload: &Workload,
        grid: Option<usize>,
        strategy: Option<Strategy>,
        workers: &[&GpuDevice],
    ) -> Result<Option<Plan>> {
        let requested = strategy.unwrap_or(self.options.strategy);
        let mut mask = 0u128;
        for dev in workers {
            if dev.id >= 128 {
                return Ok(None);
            }
            mask |= 1 << dev.id;
        }
        if workload.items == 0 || workers.is_empty() {
            return Ok(None);
        }
        let class_items = workload.items.next_power_of_two();
        let key = Key {
            class: class_items.trailing_zeros(),
            workers: mask,
            strategy: requested,
            grid,
        };
        let decision = match self.fast.get(&kernel.id, &key) {
            Some(decision) => decision,
            None => {
                let decision = self.decide(workload, class_items, grid, requested, workers)?;
                self.fast.put(&kernel.id, key, decision);
                decision
            }
        };
        let chunk_items = grid.map_or_else(|| self.chunk_items(workload), |c| c as u64);
        Ok(decision.map(|d| one_device_plan(requested, workload.items, chunk_items, d)))
    }

    /// Whether a call of `workload`'s kernel over `class_items` items cannot gain from a
    /// split, by the cost model: its work on the best device alone (launch latencies
    /// aside) is no longer than the least fixed cost a split adds. A strategy other than
    /// `auto` or `latency` is the caller's choice of plan, which the planner makes.
    fn decide(
        &self,
        workload: &Workload,
        class_items: u64,
        grid: Option<usize>,
        requested: Strategy,
        workers: &[&GpuDevice],
    ) -> Result<Option<Decision>> {
        if !matches!(requested, Strategy::Auto | Strategy::Latency) {
            return Ok(None);
        }
        self.ensure_calibrated()?;
        let class = Workload {
            items: class_items,
            ..workload.clone()
        };
        let mut models = self.models_for(&class, true);
        models.retain(|m| workers.iter().any(|w| w.id == m.device));
        let chunk_items = grid.map_or_else(|| self.chunk_items(&class), |c| c as u64);
        let chunks = class_items.div_ceil(chunk_items.max(1));
        let Some((best, alone_s)) = models
            .iter()
            .filter(|m| m.accepts_chunk(&class, chunk_items))
            .map(|m| (m, m.seconds(&class, class_items, chunks, 1)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        else {
            return Ok(None);
        };
        let split_cost = models
            .iter()
            .map(|m| m.launch_latency_s)
            .fold(f64::INFINITY, f64::min);
        let work_s = alone_s - chunks as f64 * best.launch_latency_s;
        let fast = alone_s.is_finite() && work_s <= split_cost;
        log::debug!(
            "{}: {class_items}-item class {} the fast path (device {}: {:.1} µs of work \
             against a split's {:.1} µs)",
            workload.kernel,
            if fast { "takes" } else { "does not take" },
            best.device,
            work_s * 1e6,
            split_cost * 1e6
        );
        Ok(fast.then_some(Decision {
            device: best.device,
            seconds: alone_s,
        }))
    }
}
