//! Planning and running a kernel on a context: the chunk grid, the plan, the workers that
//! execute it (with any active profile), and what completed chunks teach the model.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{MultiGpuContext, Ran, Target};
use crate::alloc;
use crate::chunks::{check_chunk_items, chunk_items_for, chunk_ranges};
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::kernel::{Kernel, Output};
use crate::plan::{Plan, Strategy};
use crate::scheduler::Scheduler;
use crate::worker::{Execution, Run, Work, WorkerReport};
use crate::workload::Workload;

impl MultiGpuContext {
    /// Items per chunk of the grid a call of `workload` is cut into: the context's
    /// `chunk_items` option, else the default sizing (a function of the problem only).
    pub(crate) fn chunk_items(&self, workload: &Workload) -> u64 {
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

    /// Items per chunk of the grid a call of `kernel` over `items` items is cut into:
    /// [`chunk_items`](Self::chunk_items) within the kernel's own bound
    /// ([`Kernel::max_chunk_items`]), on every device alike.
    pub(crate) fn kernel_chunk_items(&self, kernel: &Kernel, items: usize) -> usize {
        let chunk = self.chunk_items(&kernel.workload(items)) as usize;
        kernel.bound_chunk_items(chunk, self.options.chunk_items.is_none())
    }

    /// Decides how `workload` would be split (without running it), over the healthy devices
    /// that run its dtype; the plan's `left_out` names the others and what they lack.
    pub fn distribute_workload(
        &self,
        workload: &Workload,
        strategy: Option<Strategy>,
    ) -> Result<Plan> {
        let healthy = self.healthy_devices();
        let (workers, lacking): (Vec<&GpuDevice>, Vec<&GpuDevice>) = healthy
            .iter()
            .copied()
            .partition(|d| d.runs(workload.dtype));
        if workers.is_empty() && !healthy.is_empty() {
            if let Some(error) = self.no_device_runs_dtype(workload.dtype) {
                return Err(error);
            }
        }
        let mut plan = self.plan_on(workload, None, strategy, &workers)?;
        plan.left_out = lacking
            .iter()
            .filter_map(|d| d.lacks(workload.dtype).map(|why| (d.id, why)))
            .collect();
        Ok(plan)
    }

    /// The devices healthy now: one snapshot, which a call plans on and runs with.
    fn healthy_devices(&self) -> Vec<&GpuDevice> {
        self.devices
            .iter()
            .filter(|d| d.health.is_healthy())
            .map(|d| d.as_ref())
            .collect()
    }

    /// The plan of `workload` on `workers` only (a device that fails meanwhile has no
    /// model and gets no chunks; one that recovers meanwhile is not among them), on chunks
    /// of `grid` items when given, else of the context's chunk size for the problem.
    fn plan_on(
        &self,
        workload: &Workload,
        grid: Option<usize>,
        strategy: Option<Strategy>,
        workers: &[&GpuDevice],
    ) -> Result<Plan> {
        workload.validate()?;
        let chunk_items = grid.map_or_else(|| self.chunk_items(workload), |c| c as u64);
        let models = self.models_to_plan(workload, chunk_items, workers)?;
        if models.is_empty() {
            return Err(self.no_healthy_device());
        }
        let strategy = strategy.unwrap_or(self.options.strategy);
        let models = self.with_budgets(models, strategy);
        crate::partition::plan(workload, chunk_items, &models, strategy)
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
        self.run_on_grid(kernel, inputs, target, items, None, strategy)
    }

    /// [`run`](Self::run) on chunks of `grid` items when given: a caller running one part
    /// of a larger problem (a node of a cluster) cuts it on the whole problem's grid, so
    /// its per-chunk partials are the ones a single context would compute.
    pub fn run_on_grid(
        &self,
        kernel: &Kernel,
        inputs: &[&[f32]],
        target: Target<'_>,
        items: usize,
        grid: Option<usize>,
        strategy: Option<Strategy>,
    ) -> Result<Ran> {
        check_lengths(kernel, inputs, &target, items)?;
        interrupt::check()?;
        let bounded = kernel.max_chunk_items.is_some() || kernel.min_chunk_items.is_some();
        let grid = grid.or_else(|| bounded.then(|| self.kernel_chunk_items(kernel, items)));
        let workload = kernel.workload(items);
        // One snapshot of the healthy devices: the plan is made on exactly these, and they
        // are the call's workers, whatever other calls do to the devices' health meanwhile.
        // A device that cannot run the kernel (the host device, for a kernel without a
        // host implementation) is not among them.
        let healthy = self.healthy_devices();
        let mut workers: Vec<&GpuDevice> = healthy
            .iter()
            .copied()
            .filter(|d| d.can_run(kernel))
            .collect();
        if workers.is_empty() && !healthy.is_empty() {
            return Err(self.no_device_runs(kernel));
        }
        let mut partials = Vec::new();
        let mut output = match target {
            Target::Items(out) => Some(out),
            Target::Chunks => None,
        };
        let mut fast = true;
        loop {
            let planning = Instant::now();
            let fast_plan = match fast {
                true => self.fast_plan(kernel, &workload, grid, strategy, &workers)?,
                false => None,
            };
            let mut plan = match fast_plan {
                Some(plan) => plan,
                None => self.plan_on(&workload, grid, strategy, &workers)?,
            };
            plan.left_out = self.left_out_of(kernel, &healthy);
            let recording = self.recording(&workload, &plan, planning);
            if items == 0 {
                return Ok(Ran { plan, partials });
            }
            let words = match &output {
                Some(_) => None,
                None => Some(alloc::product(
                    "partials",
                    &[plan.n_chunks as usize, kernel.output_words(0)],
                    4,
                )?),
            };
            if let Some(words) = words {
                partials = self.spare.zeroed(words)?;
            }
            // A fast-path call runs on its one device, on this thread.
            let runs_on = match plan.fast_path {
                true => workers
                    .iter()
                    .position(|d| Some(d.id) == plan.assignments.first().map(|a| a.device))
                    .map_or(&workers[..], |i| &workers[i..=i]),
                false => &workers[..],
            };
            let (reports, remaining) = self.execute(Execution {
                kernel,
                inputs,
                output: match output.as_deref_mut() {
                    Some(out) => out,
                    None => &mut partials[..],
                },
                plan: &plan,
                workers: runs_on,
                timeout: self.options.sync_timeout_ms.map(Duration::from_millis),
                counted: true,
                recording,
            })?;
            if !plan.fast_path {
                self.learn(&workload, runs_on, &reports);
            }
            if remaining == 0 {
                return Ok(Ran { plan, partials });
            }
            interrupt::check()?;
            let error = self.call_failed(kernel, runs_on, &reports);
            // The fast path's device failed: the call fails over to the split path on the
            // devices left (the failed one is unhealthy now), like a split call's chunks.
            if plan.fast_path && matches!(error, Error::NoHealthyDevice(_)) && workers.len() > 1 {
                fast = false;
                workers.retain(|d| d.health.is_healthy());
                continue;
            }
            return Err(error);
        }
    }

    /// The error of a call whose chunks did not all complete on `workers`.
    fn call_failed(
        &self,
        kernel: &Kernel,
        workers: &[&GpuDevice],
        reports: &[WorkerReport],
    ) -> Error {
        if let Some(e) = reports.iter().find_map(|r| match &r.failure {
            Some(e @ (Error::Internal(_) | Error::KernelCompile(_))) => Some(e.clone()),
            _ => None,
        }) {
            return e;
        }
        let failures: Vec<&Error> = reports.iter().filter_map(|r| r.failure.as_ref()).collect();
        if !failures.is_empty()
            && failures
                .iter()
                .all(|e| matches!(e, Error::OutOfMemory { .. }))
        {
            return failures[0].clone();
        }
        let failed = (workers.iter().zip(reports))
            .filter_map(|(d, r)| r.failure.as_ref().map(|e| (d.id, e.to_string())))
            .collect();
        match self.no_healthy_device_after(failed) {
            Error::NoHealthyDevice(text) => {
                Error::NoHealthyDevice(text + &self.cannot_run_note(kernel))
            }
            other => other,
        }
    }

    /// Runs `job.plan` on `job.workers`. Returns each worker's report and the chunks left
    /// undone.
    pub(crate) fn execute(&self, job: Execution<'_>) -> Result<(Vec<WorkerReport>, usize)> {
        let Execution {
            kernel,
            inputs,
            output,
            plan,
            workers,
            timeout,
            counted,
            recording,
        } = job;
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
        let mut unplaced = Vec::new();
        for a in &plan.assignments {
            let chunks = a.first_chunk as usize..(a.first_chunk + a.chunks) as usize;
            // A plan made on other devices than these workers (never the case for
            // `run`, which plans on its workers): whoever is here takes them.
            let Some(slot) = slot_of(a.device) else {
                unplaced.extend(chunks);
                continue;
            };
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
            work: Work::Host {
                inputs,
                ranges: &ranges,
                outputs,
            },
            scheduler: Scheduler::new(own, shared, sharers),
            timeout,
            counted,
            recording,
            // Calibration (not counted) runs to its end: its figures would be wrong.
            interrupt: interrupt::current().filter(|_| counted),
            inline: plan.fast_path,
        };
        run.scheduler.adopt(unplaced);
        let reports = run.on(workers);
        Ok((reports, run.scheduler.remaining()))
    }

    /// Feeds each device's completed chunks of a call into the history (as one observation).
    fn learn(&self, workload: &Workload, workers: &[&GpuDevice], reports: &[WorkerReport]) {
        let models = self.models_for(workload, false);
        let key = workload.history_key();
        let family: &str = &key;
        for (dev, report) in workers.iter().zip(reports) {
            let Some(model) = models.iter().find(|m| m.device == dev.id) else {
                continue;
            };
            // Devices of one group busy in this call shared its hardware.
            let sharing = workers
                .iter()
                .zip(reports)
                .filter(|(d, r)| d.group == dev.group && !r.completed.is_empty())
                .count();
            // One observation per device and call, the ratio of the summed times: single
            // chunks are too noisy to learn from (with two in flight a chunk's time depends
            // on what the worker did for its neighbour; on GL per-chunk ratios spread by
            // ±50% while a call's sum is steady within ±20%).
            if report.completed.is_empty() {
                continue;
            }
            // The first chunk a device runs of a kernel carries one-time costs: left out.
            let first_run = self
                .warmed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert((dev.id, workload.kernel.clone()));
            let completed = &report.completed[usize::from(first_run)..];
            if completed.is_empty() {
                continue;
            }
            let predicted: f64 = completed
                .iter()
                .map(|done| model.seconds(workload, done.items as u64, 1, sharing))
                .sum();
            let observed: f64 = completed.iter().map(|done| done.seconds).sum();
            self.history.record(dev.id, family, predicted, observed);
        }
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
