//! The worker loop: one thread per device, of either kind, pulls chunks from the scheduler
//! and keeps as many begun as its kind runs at once ([`Runner::DEPTH`]: two on a wgpu
//! device, so the upload of chunk k+1 and the readback of chunk k−1 overlap the dispatch of
//! chunk k; one on the host device, which runs each in place). On failure the device's
//! unfinished chunks go back to the scheduler for the others. When the call is interrupted
//! the worker stops waiting for the device and leaves its chunks in flight to it. With a
//! profile active every step becomes an event.

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::kernel::Kernel;
use crate::plan::Plan;
use crate::profile::{Clock, Event, Kind, Profiler};
use crate::runner::{self, Begun, Drive, Finished, Job, Runner};
use crate::scheduler::Scheduler;

/// What a worker reports about one completed chunk, for the model's history.
#[derive(Debug, Clone, Copy)]
pub struct Completed {
    /// Items in the chunk.
    pub items: usize,
    /// Seconds the chunk held its device: from when the worker began uploading it (or, if
    /// later, when the previous chunk completed) to its completion. The host side of the
    /// upload counts: on some backends (GL) it blocks the worker and is most of the cost.
    pub seconds: f64,
}

/// The outcome of one worker.
#[derive(Debug, Default)]
pub struct WorkerReport {
    /// Chunks it completed.
    pub completed: Vec<Completed>,
    /// Seconds from its first submit to its last completion.
    pub busy_s: f64,
    /// Why it stopped early, if it failed.
    pub failure: Option<Error>,
}

/// The active profile of a call, and the call's index in it.
#[derive(Clone)]
pub struct Recording {
    /// Where events go.
    pub profiler: Arc<Profiler>,
    /// Index of the call in the profile.
    pub call: u64,
    /// By device id: whether its kernels are timed with GPU timestamp queries.
    pub gpu_timed: Vec<bool>,
}

/// A plan to run, with everything its workers need.
pub(crate) struct Execution<'a> {
    /// The kernel.
    pub(crate) kernel: &'a Kernel,
    /// Inputs, whole problem.
    pub(crate) inputs: &'a [&'a [f32]],
    /// Output words of every item (or of every chunk).
    pub(crate) output: &'a mut [f32],
    /// The plan.
    pub(crate) plan: &'a Plan,
    /// The planned devices plus any others that may take over chunks of a failed one.
    pub(crate) workers: &'a [&'a GpuDevice],
    /// Per-chunk wait limit.
    pub(crate) timeout: Option<Duration>,
    /// Whether the work counts in the devices' counters and fault countdowns.
    pub(crate) counted: bool,
    /// The profile to record into, if one is active.
    pub(crate) recording: Option<Recording>,
}

/// Everything the workers of one call share.
pub struct Run<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// Inputs, whole problem.
    pub inputs: &'a [&'a [f32]],
    /// Item range of every chunk of the grid.
    pub ranges: &'a [Range<usize>],
    /// Output slice of every chunk, taken by whoever completes it.
    pub outputs: Vec<Mutex<Option<&'a mut [f32]>>>,
    /// Who does what next.
    pub scheduler: Scheduler,
    /// Per-chunk wait limit.
    pub timeout: Option<Duration>,
    /// Whether the work counts in the devices' counters and fault countdowns (calibration
    /// runs do not).
    pub counted: bool,
    /// The profile to record into, if one is active.
    pub recording: Option<Recording>,
    /// The call's interrupt: once set, no more chunks are started.
    pub interrupt: Option<Arc<Interrupt>>,
}

/// One chunk begun on a worker and not yet finished.
struct Pending<F> {
    meta: Meta,
    flight: F,
}

/// What the worker keeps about a chunk beyond what its device holds.
#[derive(Clone, Copy)]
struct Meta {
    chunk: usize,
    items: usize,
    /// Taken from the scheduler as an orphan of a failed device.
    orphan: bool,
    taken: Instant,
    begun: Begun,
}

/// Aligns GPU timestamps with the host clock: the offset is the smallest observed gap between
/// a kernel's GPU end and the host seeing it done, the tightest alignment the host can know.
#[derive(Default)]
pub(crate) struct GpuClock {
    offset_s: Option<f64>,
}

impl GpuClock {
    /// The kernel's start and duration on the profile's clock, given when the host saw it
    /// done (`seen`).
    pub(crate) fn kernel(
        &mut self,
        profiler: &Profiler,
        seen: Instant,
        ticks: (u64, u64),
        period_ns: f64,
    ) -> (f64, f64) {
        let begin_s = ticks.0 as f64 * period_ns * 1e-9;
        let end_s = ticks.1.max(ticks.0) as f64 * period_ns * 1e-9;
        let seen_s = profiler.at(seen);
        let offset = self
            .offset_s
            .map_or(seen_s - end_s, |o| o.min(seen_s - end_s));
        self.offset_s = Some(offset);
        (begin_s + offset, end_s - begin_s)
    }
}

impl Run<'_> {
    /// Records the steps of a completed chunk.
    fn record_chunk(
        &self,
        dev: &GpuDevice,
        m: &Meta,
        done: &Finished,
        previous_done: Instant,
        clock: &mut GpuClock,
    ) {
        let Some(r) = &self.recording else { return };
        let p = &r.profiler;
        // Every step of the chunk: its kind, start and duration on the profile's clock,
        // bytes moved and the clock that measured it.
        let record = |kind, start_s, duration_s: f64, bytes, clock| {
            p.push(Event {
                device: Some(dev.id),
                kind,
                chunk: Some(m.chunk as u64),
                call: r.call,
                start_s,
                duration_s: duration_s.max(0.0),
                bytes,
                items: m.items as u64,
                clock,
            });
        };
        let host = |kind, start: Instant, end: Instant, bytes| {
            record(
                kind,
                p.at(start),
                (end - start).as_secs_f64(),
                bytes,
                Clock::Host,
            );
        };
        if done.staged {
            host(Kind::Upload, m.taken, m.begun.submitted, m.begun.bytes_up);
        }
        match (done.ticks, dev.timestamp_period_ns) {
            (Some(ticks), Some(period)) => {
                let (start_s, duration_s) = clock.kernel(p, done.wait_end, ticks, period);
                record(Kind::Kernel, start_s, duration_s, 0, Clock::Gpu);
            }
            // Without timestamps the kernel is bounded by its submit (or the previous
            // chunk's completion, whichever is later) and the host seeing it done.
            _ => host(
                Kind::Kernel,
                m.begun.submitted.max(previous_done),
                done.wait_end,
                0,
            ),
        }
        if done.staged {
            host(Kind::Wait, done.wait_start, done.wait_end, 0);
            host(
                Kind::Readback,
                done.wait_end,
                done.copied,
                m.begun.bytes_down,
            );
        }
        if m.orphan {
            host(Kind::Retry, m.taken, done.copied, 0);
        }
    }

    /// Works through chunks on `dev` (worker `slot`) until none is left or the device fails.
    pub fn work(&self, slot: usize, dev: &GpuDevice) -> WorkerReport {
        runner::drive(dev, Worker { run: self, slot })
    }

    /// The worker loop on `dev`, whose kind is `runner`: keeps [`Runner::DEPTH`] chunks
    /// begun, finishes the oldest, and on failure gives the unfinished ones back.
    fn work_on<R: Runner>(&self, slot: usize, dev: &GpuDevice, runner: &R) -> WorkerReport {
        let mut report = WorkerReport::default();
        let started = Instant::now();
        let mut in_flight: VecDeque<Pending<R::Flight>> = VecDeque::new();
        let mut held: Option<usize> = None;
        let mut kept = R::Held::default();
        let mut last_done = started;
        let mut clock = GpuClock::default();
        let job = Job {
            kernel: self.kernel,
            inputs: self.inputs,
            timed: self
                .recording
                .as_ref()
                .is_some_and(|r| r.gpu_timed.get(dev.id).copied().unwrap_or(false)),
            timeout: self.timeout,
            stop: self.interrupt.as_deref(),
        };
        let cancelled = || self.interrupt.as_ref().is_some_and(|i| i.is_cancelled());
        // Before any call on the device, it must have taken the latest chunk (see
        // `gpu_io::submit_handed`); an interrupt stops this wait too.
        let queue_took_latest = |in_flight: &mut VecDeque<Pending<R::Flight>>| -> Result<()> {
            match in_flight.back_mut() {
                Some(latest) => runner.wait_submitted(dev, &job, &mut latest.flight),
                None => Ok(()),
            }
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
            // Prepared at the first chunk taken, not before: a device the plan gives nothing
            // (the host's CPU adapters under `auto`) would otherwise compile the kernel on
            // the cores the working devices use (Mesa takes hundreds of ms for a new one).
            let mut prepared: Option<R::Prepared> = None;
            loop {
                while in_flight.len() < R::DEPTH && !cancelled() {
                    let next = if in_flight.is_empty() {
                        self.scheduler.next(slot)
                    } else {
                        self.scheduler.try_next(slot)
                    };
                    let Some((chunk, orphan)) = next else { break };
                    held = Some(chunk);
                    queue_took_latest(&mut in_flight)?;
                    ready_for_chunk(dev, self.counted)?;
                    let ready = match &prepared {
                        Some(ready) => ready,
                        None => prepared.insert(runner.prepare(dev, self.kernel)?),
                    };
                    let taken = Instant::now();
                    let range = self.ranges[chunk].clone();
                    let items = range.len();
                    let (flight, begun) = runner.begin(dev, &job, ready, range, &mut kept)?;
                    let meta = Meta {
                        chunk,
                        items,
                        orphan,
                        taken,
                        begun,
                    };
                    in_flight.push_back(Pending { meta, flight });
                    held = None;
                }
                queue_took_latest(&mut in_flight)?;
                let Some(Pending { meta, flight }) = in_flight.pop_front() else {
                    return Ok(());
                };
                held = Some(meta.chunk);
                let Some(ready) = &prepared else {
                    return Err(Error::Internal("a chunk began unprepared".into()));
                };
                let mut slot_guard = self.outputs[meta.chunk]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let Some(output) = slot_guard.as_deref_mut() else {
                    return Err(Error::Internal(format!(
                        "chunk {} completed twice",
                        meta.chunk
                    )));
                };
                let done = runner.finish(dev, &job, ready, flight, output)?;
                *slot_guard = None;
                drop(slot_guard);
                held = None;
                let service_start = meta.taken.max(last_done);
                report.completed.push(Completed {
                    items: meta.items,
                    seconds: (done.copied - service_start).as_secs_f64(),
                });
                if self.counted {
                    dev.counters.chunk_done(
                        meta.items as u64,
                        meta.begun.bytes_up,
                        meta.begun.bytes_down,
                    );
                    dev.health.chunk_completed();
                }
                log::debug!(
                    "device {} chunk {} ({} items{}) done",
                    dev.id,
                    meta.chunk,
                    meta.items,
                    if meta.orphan {
                        ", re-run for a failed device"
                    } else {
                        ""
                    }
                );
                self.record_chunk(dev, &meta, &done, last_done, &mut clock);
                last_done = done.copied;
                self.scheduler.done();
            }
        }))
        .unwrap_or_else(|panic| {
            Err(Error::from_panic(
                &format!("the worker of device {}", dev.id),
                panic.as_ref(),
            ))
        });
        report.busy_s = if report.completed.is_empty() {
            0.0
        } else {
            (last_done - started).as_secs_f64()
        };
        let mut unfinished: Vec<usize> = held.into_iter().collect();
        unfinished.extend(in_flight.iter().map(|p| p.meta.chunk));
        // What the device may still be using (after a failure, or chunks left to it when
        // the call was interrupted): never pooled for a next call to write or map.
        let flights: Vec<R::Flight> = in_flight.drain(..).map(|p| p.flight).collect();
        let kept = outcome.is_err().then_some(kept);
        match outcome {
            Ok(()) => self.scheduler.exit(),
            // Interrupted while waiting for the device: the call stops, the device is fine.
            Err(Error::Cancelled) => {
                log::debug!(
                    "device {}: call interrupted, chunks {unfinished:?} left to the device",
                    dev.id
                );
                runner.abandon(flights, kept, true);
                self.scheduler.exit();
            }
            // The user's kernel, not the device: the device stays healthy and the call
            // stops (every chunk would fail alike), its error the call's.
            Err(error @ Error::KernelCompile(_)) => {
                runner.abandon(flights, kept, false);
                log::info!("device {}: {error}", dev.id);
                self.scheduler.abort();
                report.failure = Some(error);
            }
            Err(error) => {
                runner.abandon(flights, kept, false);
                log::warn!(
                    "device {} ({}, {}) failed: {error}; chunks {unfinished:?} re-queued on the other devices",
                    dev.id,
                    dev.adapter.name,
                    dev.adapter.backend
                );
                if self.counted {
                    dev.counters.chunks_failed(unfinished.len() as u64);
                }
                dev.health.mark_failed(&error.to_string());
                dev.pool.clear();
                self.scheduler.fail(slot, unfinished);
                report.failure = Some(error);
            }
        }
        report
    }
}

/// One worker's loop, run by [`runner::drive`] with its device's kind.
struct Worker<'r, 'a> {
    run: &'r Run<'a>,
    slot: usize,
}

impl Drive for Worker<'_, '_> {
    type Out = WorkerReport;
    fn run<R: Runner>(self, dev: &GpuDevice, runner: &R) -> WorkerReport {
        self.run.work_on(self.slot, dev, runner)
    }
}

/// Whether `dev` may start another chunk of a counted call: not when another call has found
/// it failed (it fails here too, and its chunks go to the others), nor when an injected
/// fault is due. Calibration's uncounted runs ignore both.
pub(crate) fn ready_for_chunk(dev: &GpuDevice, counted: bool) -> Result<()> {
    if !counted {
        return Ok(());
    }
    if !dev.health.is_healthy() {
        return Err(Error::DeviceLost {
            device: dev.id,
            reason: dev.health.reason().unwrap_or_else(|| "unhealthy".into()),
        });
    }
    match dev.health.injected_fault_due() {
        Some(reason) => Err(Error::DeviceLost {
            device: dev.id,
            reason,
        }),
        None => Ok(()),
    }
}
