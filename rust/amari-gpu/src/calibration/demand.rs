//! Calibration on demand: a call's plan measures only what it needs, when it first needs
//! it. A call that cannot be split (one worker, or one chunk) needs no figures at all; a
//! call split across devices needs each worker's device figures (launch latency, transfer
//! rates), the rate of the workload's family on each (and of its dtype, for float64 work),
//! and the speedup of workers that share hardware. What is measured is cached as any calibration is; each step that measures (and
//! a context's first plan, whatever it needed) says so in one INFO line.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::context::needed;
use crate::context::MultiGpuContext;
use crate::device::GpuDevice;
use crate::error::Result;
use crate::model::DeviceModel;
use crate::workload::Workload;

impl MultiGpuContext {
    /// The cost models a plan of `workload` on `workers`, cut into chunks of `chunk_items`,
    /// is made with (history-corrected), after measuring what the plan needs and the
    /// context does not hold yet. A call that cannot be split is planned on its workers when
    /// they are all measured for it, else on one of them alone (the host device if it is
    /// one: it has nothing to upload), whose model may be nominal: there is nothing to split.
    pub(crate) fn models_to_plan(
        &self,
        workload: &Workload,
        chunk_items: u64,
        workers: &[&GpuDevice],
    ) -> Result<Vec<DeviceModel>> {
        let splits = workers.len() > 1 && workload.items > chunk_items;
        if splits {
            self.measure_for_split(workload, workers)?;
        } else {
            self.report_first(|| "nothing measured: the call has nothing to split".into());
        }
        let mut models = self.models_for(workload, true);
        models.retain(|m| workers.iter().any(|w| w.id == m.device));
        let ids: Vec<usize> = workers.iter().map(|w| w.id).collect();
        if splits || self.lacking(&ids, needed(workload), false).is_empty() {
            return Ok(models);
        }
        // Nothing to split and not every worker measured: one worker alone.
        let alone = (workers.iter())
            .find(|w| w.as_host().is_some())
            .or_else(|| workers.first())
            .map(|w| w.id);
        models.retain(|m| Some(m.device) == alone);
        Ok(models)
    }

    /// Measures what a plan splitting `workload` across `workers` lacks: device figures
    /// and the family's rate on each worker, the speedup of each group of them sharing
    /// hardware. One INFO line says what was measured and how long it took.
    fn measure_for_split(&self, workload: &Workload, workers: &[&GpuDevice]) -> Result<()> {
        let ids: Vec<usize> = workers.iter().map(|w| w.id).collect();
        let wanted = needed(workload);
        if self.lacking(&ids, wanted, false).is_empty()
            && self.lacking_rate(&ids, workload.dtype).is_empty()
            && self.groups_lacking(&ids, false).is_empty()
        {
            self.report_first(|| "nothing measured: every figure the plan needs is known".into());
            return Ok(());
        }
        let _one_at_a_time = self.calibration.lock().expect("calibration lock");
        let started = Instant::now();
        // Per-device lines are details here; the summary below is the INFO line.
        // Work of a dtype with a rate of its own is split by that rate (float64 only).
        let dtypes = [workload.dtype];
        let mut done = self.measure_devices(&ids, (wanted, &dtypes), false, log::Level::Debug)?;
        done.extend(self.measure_rates(&ids, workload.dtype)?);
        let groups = self.groups_lacking(&ids, false);
        done.extend(self.measure_groups(&groups, false, log::Level::Debug)?);
        let family = wanted
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ");
        let what = if done.is_empty() {
            "nothing measured: the figures were in the cache".to_string()
        } else {
            format!("measured {}", done.join("; "))
        };
        self.calibration_reported.store(true, Ordering::Relaxed);
        log::info!(
            "calibration for a call of {family} split across devices {ids:?}: {what} ({:.2} s)",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Logs `line` at INFO if no plan of this context has reported its calibration yet.
    fn report_first(&self, line: impl FnOnce() -> String) {
        // A load first: every call passes here, and only the first need write.
        if !self.calibration_reported.load(Ordering::Relaxed)
            && !self.calibration_reported.swap(true, Ordering::Relaxed)
        {
            log::info!("calibration for the context's first call: {}", line());
        }
    }
}
