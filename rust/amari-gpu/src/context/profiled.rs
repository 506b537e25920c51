//! What a call records into an active profile: its call record and planning step, and by
//! device whether its kernels are timed with GPU timestamps.

use std::time::Instant;

use super::MultiGpuContext;
use crate::gpu_io;
use crate::plan::Plan;
use crate::profile::{CallRecord, HostStep, Kind};
use crate::worker::Recording;
use crate::workload::Workload;

impl MultiGpuContext {
    /// The profile record of a call about to run `plan` (planned since `planning`), when a
    /// profile is active.
    pub(super) fn recording(
        &self,
        workload: &Workload,
        plan: &Plan,
        planning: Instant,
    ) -> Option<Recording> {
        let profiler = self.active_profile()?;
        let call = profiler.call(CallRecord {
            kernel: workload.kernel.clone(),
            items: workload.items,
            flops_per_item: workload.flops_per_item,
            bytes_per_item: workload.bytes_in_per_item + workload.bytes_out_per_item,
            lower_bound_s: plan.lower_bound_s,
            estimated_makespan_s: plan.estimated_makespan_s,
            strategy: plan.strategy.name().to_string(),
        });
        let plan_step = HostStep {
            device: None,
            kind: Kind::Plan,
            chunk: None,
            call,
            bytes: 0,
            items: workload.items,
        };
        profiler.host(plan_step, planning, Instant::now());
        Some(Recording {
            profiler,
            call,
            gpu_timed: self.gpu_timed(plan),
        })
    }

    /// By device id: whether profiled kernels of `plan` are timed with GPU timestamps (see
    /// [`gpu_io::timestamps_worth`]; a kernel here is one chunk of the plan).
    fn gpu_timed(&self, plan: &Plan) -> Vec<bool> {
        let measured = self
            .measured
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.devices
            .iter()
            .map(|dev| {
                let cost = measured[dev.id].as_ref().map(|(m, _)| m.timestamp_cost_s);
                let chunk_s = plan
                    .assignments
                    .iter()
                    .find(|a| a.device == dev.id && a.chunks > 0)
                    .map_or(0.0, |a| a.estimated_seconds / a.chunks as f64);
                gpu_io::timestamps_worth(
                    dev.timestamp_period_ns.is_some(),
                    self.options.gpu_timestamps,
                    cost,
                    chunk_s,
                )
            })
            .collect()
    }
}
