//! The fast path of small calls. A call whose time on its best device, less the one launch
//! no split avoids, is predicted (by the cost model) to be no longer than the fixed cost any
//! split adds — the least launch latency among its devices: a second device's submission,
//! or on the host device the hand-off to its pool — cannot gain from splitting. It runs on that one device, on
//! the calling thread (the host device runs its kernel there too, each chunk its kernel
//! runs as one piece: see `HostDevice::run`), on the same chunk grid
//! as a split would use, so its results are the split path's bit for bit. The decision is
//! made once per kernel (and dtype), size class (items rounded up to a power of two), set of healthy
//! devices and strategy, and cached; calibration clears the cache, and a change of health
//! changes the key. Its plan says `fast_path`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use super::MultiGpuContext;
use crate::device::GpuDevice;
use crate::error::Result;
use crate::host::device::HostPool;
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
        let decisions = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        decisions.get(kernel)?.get(key).copied()
    }

    fn put(&self, kernel: &str, key: Key, decision: Option<Decision>) {
        let mut decisions = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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

/// An empty hand-off to the host device's pool, timed: what running a kernel there adds to
/// running it on the calling thread. The pool's threads are asleep between a user's small
/// calls, as here (right after a hand-off they spin, and one costs a tenth as much).
fn handoff_s(pool: &HostPool) -> f64 {
    let started = Instant::now();
    pool.run_with(|| ());
    started.elapsed().as_secs_f64()
}

/// The one-device plan of a fast-path call: every chunk of the grid on `device`.
fn one_device_plan(requested: Strategy, items: u64, chunk_items: u64, decision: Decision) -> Plan {
    let n_chunks = items.div_ceil(chunk_items.max(1));
    Plan {
        // One device is what the latency strategy gives a call too small to split.
        strategy: requested.resolved(),
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
        left_out: Vec::new(),
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
        // Per kernel and dtype: a float64 call's best device is not its float32 twin's.
        let kernel_key = kernel.pipeline_key();
        let decision = match self.fast.get(&kernel_key, &key) {
            Some(decision) => decision,
            None => {
                let decision = self.decide(workload, class_items, grid, requested, workers)?;
                self.fast.put(&kernel_key, key, decision);
                decision
            }
        };
        let chunk_items = grid.map_or_else(|| self.chunk_items(workload), |c| c as u64);
        Ok(decision.map(|d| one_device_plan(requested, workload.items, chunk_items, d)))
    }

    /// Whether a call of `workload`'s kernel over `class_items` items cannot gain from a
    /// split, by the cost model: its time on the best device alone, less the one launch no
    /// split avoids, is no longer than the least fixed cost a split adds. The fast path is
    /// one of `auto`'s choices: any other strategy is the caller's choice of plan.
    fn decide(
        &self,
        workload: &Workload,
        class_items: u64,
        grid: Option<usize>,
        requested: Strategy,
        workers: &[&GpuDevice],
    ) -> Result<Option<Decision>> {
        if requested != Strategy::Auto {
            return Ok(None);
        }
        let class = Workload {
            items: class_items,
            ..workload.clone()
        };
        let chunk_items = grid.map_or_else(|| self.chunk_items(&class), |c| c as u64);
        // The models a plan of the size class would be made from (measured as it would
        // measure them).
        let models = self.models_to_plan(&class, chunk_items, workers)?;
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
            .map(|m| match workers.iter().find(|w| w.id == m.device) {
                // Unmeasured (a lone host device needs no calibration to run): what the
                // host device's split costs, a hand-off to its pool, timed here.
                Some(dev) if m.launch_latency_s == 0.0 => {
                    dev.as_host().map_or(0.0, |host| handoff_s(&host.pool))
                }
                _ => m.launch_latency_s,
            })
            .fold(f64::INFINITY, f64::min);
        // A split divides everything but the first chunk's launch: the rest of the call
        // (its work and its other chunks' launches) is all a split could share out, and
        // sharing it pays only when it is longer than the least a second device adds.
        let work_s = alone_s - best.launch_latency_s;
        // A call of one chunk whose best device is a wgpu device cannot be split, and its
        // kernel runs on the device whichever thread submits it: there is nothing for the
        // planner to choose, measured or not, so an unmeasured wgpu device (no launch latency
        // to weigh) takes the fast path too rather than paying for a plan and a hand-off to
        // its worker thread. (On the host device the fast path also gives up the pool's
        // threads within the chunk, so there the measured comparison stays the rule.)
        let on_wgpu = (workers.iter()).any(|w| w.id == best.device && w.as_host().is_none());
        let unsplittable = chunks == 1 && on_wgpu;
        let fast = alone_s.is_finite() && (unsplittable || work_s <= split_cost);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ga::cl3::geometric_cl3_kernel;

    fn product(ctx: &MultiGpuContext, n: usize, strategy: Option<Strategy>) -> (Plan, Vec<f32>) {
        let a: Vec<f32> = (0..n * 8).map(|i| (i % 13) as f32 * 0.25 - 1.5).collect();
        let b: Vec<f32> = (0..n * 8).map(|i| (i % 7) as f32 * 0.5 - 1.0).collect();
        let mut out = vec![0.0; n * 8];
        let plan = ctx
            .run_map(&geometric_cl3_kernel(), &[&a, &b], &mut out, n, strategy)
            .expect("runs");
        (plan, out)
    }

    /// The planner's path of the same 3-row call: not the fast path, and the same bits.
    fn assert_the_planned_path_gives(ctx: &MultiGpuContext, fast: &[f32]) {
        let (split, planned) = product(ctx, 3, Some(Strategy::Balanced));
        assert!(!split.fast_path);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(fast), bits(&planned));
    }

    fn decisions(ctx: &MultiGpuContext) -> usize {
        let decisions = ctx.fast.decisions.lock().unwrap();
        decisions.values().map(HashMap::len).sum()
    }

    #[test]
    fn small_calls_take_the_fast_path_from_a_cached_decision_and_large_ones_split() {
        let ctx = MultiGpuContext::on(&["host"]);
        let (plan, fast) = product(&ctx, 3, None);
        assert!(plan.fast_path, "{plan:?}");
        assert_eq!(plan.assignments.len(), 1);
        assert_eq!(plan.requested, Strategy::Auto);
        assert_eq!(decisions(&ctx), 1);
        // Same size class: the cached decision, no new one.
        let (again, _) = product(&ctx, 4, None);
        assert!(again.fast_path);
        assert_eq!(decisions(&ctx), 1);
        assert_the_planned_path_gives(&ctx, &fast);
        let (large, _) = product(&ctx, 1 << 21, None);
        assert!(!large.fast_path, "{large:?}");
        // Calibrating again replaces the figures the decisions were made from.
        ctx.calibrate(true).expect("calibrates");
        assert_eq!(decisions(&ctx), 0);
    }

    // A float64 kernel has its float32 twin's id: its decisions are its own all the same.
    #[test]
    fn each_dtype_of_a_kernel_has_its_own_decisions() {
        let ctx = MultiGpuContext::on(&["host"]);
        let algebra = crate::ga::Algebra::CL3;
        let op = crate::ga::Operation::Geometric;
        let broadcast = crate::ga::Broadcast::None;
        let a = [0.5f32; 16];
        let mut out = [0.0f32; 16];
        for dtype in [crate::dtype::Dtype::F32, crate::dtype::Dtype::F64] {
            let kernel = crate::ga::kernel(&algebra, op, broadcast, dtype);
            // One row: 8 words in float32, 16 in float64.
            let words = 8 * dtype.bytes() / 4;
            let plan = ctx
                .run_map(
                    &kernel,
                    &[&a[..words], &a[..words]],
                    &mut out[..words],
                    1,
                    None,
                )
                .expect("runs");
            assert!(plan.fast_path, "{plan:?}");
        }
        let decisions = ctx.fast.decisions.lock().unwrap();
        let mut keys: Vec<&String> = decisions.keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "ga_cl300_geometric_product_nn",
                "ga_cl300_geometric_product_nn@float64"
            ]
        );
    }

    #[test]
    fn a_one_chunk_call_on_an_unmeasured_wgpu_device_takes_the_fast_path() {
        let ctx = MultiGpuContext::on(&["vulkan"]);
        let (plan, fast) = product(&ctx, 3, None);
        assert!(plan.fast_path, "{plan:?}");
        assert_the_planned_path_gives(&ctx, &fast);
        // A call of many chunks is still planned until the device is measured.
        let (large, _) = product(&ctx, 1 << 21, None);
        assert!(large.n_chunks > 1, "{large:?}");
        assert!(!large.fast_path, "{large:?}");
    }

    #[test]
    fn a_failed_device_changes_the_key() {
        let ctx = MultiGpuContext::on(&["vulkan", "host"]);
        assert_eq!(ctx.devices().len(), 2, "lavapipe and the host device");
        // Measured: a nominal model knows no launch latency, so no split cost to weigh.
        ctx.calibrate(false).expect("calibrates");
        let (plan, expected) = product(&ctx, 2, None);
        assert!(plan.fast_path);
        let chosen = plan.assignments[0].device;
        ctx.inject_fault(chosen, 0).expect("device exists");
        let (failed_over, got) = product(&ctx, 2, None);
        assert!(!failed_over.fast_path);
        assert!(failed_over.assignments.iter().all(|a| a.device != chosen));
        assert_eq!(got, expected);
        let (next, _) = product(&ctx, 2, None);
        assert!(next.fast_path);
        assert_ne!(next.assignments[0].device, chosen);
    }
}
