//! The worker loop: one thread per device, of either kind, pulls chunks from the scheduler
//! and keeps as many begun as its kind runs at once ([`Runner::DEPTH`]: two on a wgpu
//! device, so the upload of chunk k+1 and the readback of chunk k−1 overlap the dispatch of
//! chunk k; one on the host device, which runs each in place). A chunk is an item range of
//! host operands ([`Work::Host`]) or a piece of a call on resident operands
//! ([`Work::Resident`]: a shard's rows, begun where they live). On failure the device's
//! unfinished chunks go back to the scheduler for the others (a resident piece's lost rows
//! are rebuilt from their lineage by the device that takes it). When the call is interrupted
//! the worker stops waiting for the device and leaves its chunks in flight to it. With a
//! profile active every step becomes an event.

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::device::{DeviceKind, GpuDevice};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::kernel::Kernel;
use crate::plan::Plan;
use crate::runner::{self, Begun, Drive, Finished, Job, Runner};
use crate::scheduler::Scheduler;

mod events;

use events::Meta;
pub(crate) use events::Recording;

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

/// A resident call's pieces (a shard's rows each) as the worker loop runs them: begun on
/// whichever device takes the piece, its result kept by the call.
pub(crate) trait Pieces: Sync {
    /// Rows of piece `piece`.
    fn items(&self, piece: usize) -> usize;

    /// Begins `piece` on `dev`: its inputs gathered there (rows of a failed device rebuilt
    /// from their lineage) and its kernel started. An error other than
    /// [`Error::DeviceLost`] is the call's, not the device's.
    /// Also returns when the kernel was handed to the device (after the inputs were).
    fn begin(&self, dev: &GpuDevice, piece: usize) -> Result<(Box<dyn Landing + '_>, Instant)>;
}

/// A piece begun on a device: waiting for it keeps its result.
pub(crate) trait Landing {
    /// Waits for the piece on `dev` within `timeout` and hands its result to the call.
    fn land(self: Box<Self>, dev: &GpuDevice, timeout: Option<Duration>) -> Result<()>;
}

/// What the chunks of a call are: the operand sum type of the one loop.
pub(crate) enum Work<'a> {
    /// Item ranges of host inputs, each written into its slice of a host output.
    Host {
        /// Inputs, whole problem.
        inputs: &'a [&'a [f32]],
        /// Item range of every chunk of the grid.
        ranges: &'a [Range<usize>],
        /// Output slice of every chunk, taken by whoever completes it.
        outputs: Vec<Mutex<Option<&'a mut [f32]>>>,
    },
    /// Pieces of a call on resident operands.
    Resident(&'a dyn Pieces),
}

/// Everything the workers of one call share.
pub(crate) struct Run<'a> {
    /// The kernel.
    pub(crate) kernel: &'a Kernel,
    /// The chunks.
    pub(crate) work: Work<'a>,
    /// Who does what next.
    pub(crate) scheduler: Scheduler,
    /// Per-chunk wait limit.
    pub(crate) timeout: Option<Duration>,
    /// Whether the work counts in the devices' counters and fault countdowns (calibration
    /// runs do not).
    pub(crate) counted: bool,
    /// The profile to record into, if one is active.
    pub(crate) recording: Option<Recording>,
    /// The call's interrupt: once set, no more chunks are started.
    pub(crate) interrupt: Option<Arc<Interrupt>>,
    /// Whether the call took the fast path: a host device then runs its kernel on the
    /// calling thread, not on its pool, for each chunk the kernel runs as one piece (see
    /// `context::fast`, `HostDevice::run`).
    pub(crate) inline: bool,
}

/// A chunk in flight: one of host inputs on a device of kind `F`'s, or a resident piece.
enum Flight<'s, F> {
    Chunk(F),
    Piece(Box<dyn Landing + 's>),
}

/// One chunk begun on a worker and not yet finished.
struct Pending<'s, F> {
    meta: Meta,
    flight: Flight<'s, F>,
}

impl Run<'_> {
    /// Works through chunks on `dev` (worker `slot`) until none is left or the device fails.
    /// The host device's loop runs on a thread of its own pool (unless the call took the
    /// fast path, whose kernel runs on the calling thread): each chunk's kernel is then a
    /// fork-join among threads that are already awake, where from another thread every
    /// chunk was a hand-off into the pool and back (about 12 µs, against 17 µs of kernel
    /// per thread for a float16 Cl(3,0) chunk of 16,384 rows).
    pub fn work(&self, slot: usize, dev: &GpuDevice) -> WorkerReport {
        let worker = Worker { run: self, slot };
        match &dev.kind {
            DeviceKind::Host(host) if !self.inline => {
                host.pool.run_with(|| runner::drive(dev, worker))
            }
            _ => runner::drive(dev, worker),
        }
    }

    /// The worker loop on `dev`, whose kind is `runner`: keeps [`Runner::DEPTH`] chunks
    /// begun, finishes the oldest, and on failure gives the unfinished ones back.
    fn work_on<R: Runner>(&self, slot: usize, dev: &GpuDevice, runner: &R) -> WorkerReport {
        let mut report = WorkerReport::default();
        let started = Instant::now();
        let mut in_flight: VecDeque<Pending<'_, R::Flight>> = VecDeque::new();
        // The chunks taken and not yet begun or finished (one, or a batch being finished).
        let mut held: Vec<usize> = Vec::new();
        let mut kept = R::Held::default();
        let mut last_done = started;
        // A resident piece that could not begin for a reason of the call's (its rows do not
        // fit, an operand was freed): every device would fail alike.
        let mut call_error = false;
        let job = Job {
            kernel: self.kernel,
            inputs: match &self.work {
                Work::Host { inputs, .. } => inputs,
                Work::Resident(_) => &[],
            },
            timed: self
                .recording
                .as_ref()
                .is_some_and(|r| r.gpu_timed.get(dev.id).copied().unwrap_or(false)),
            timeout: self.timeout,
            stop: self.interrupt.as_deref(),
            inline: self.inline,
        };
        let cancelled = || self.interrupt.as_ref().is_some_and(|i| i.is_cancelled());
        // Before any call on the device, it must have taken the latest chunk (see
        // `gpu_io::submit_handed`); an interrupt stops this wait too.
        let queue_took_latest = |in_flight: &mut VecDeque<Pending<'_, R::Flight>>| -> Result<()> {
            match in_flight.back_mut().map(|p| &mut p.flight) {
                Some(Flight::Chunk(latest)) => runner.wait_submitted(dev, &job, latest),
                _ => Ok(()),
            }
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
            // Prepared at the first chunk taken, not before: a device the plan gives nothing
            // (the host's CPU adapters under `auto`) would otherwise compile the kernel on
            // the cores the working devices use (Mesa takes hundreds of ms for a new one).
            let mut prepared: Option<R::Prepared> = None;
            // Chunks of host inputs finished together (`Runner::BATCH`; on a runner that
            // batches, all of them when this worker is the call's only one: no other device
            // could take any, and each batch ends in a wait for its slowest chunk); pieces,
            // and the kernels of a fast-path call (on the calling thread), one by one. A
            // wgpu device (no batches) keeps its `DEPTH` chunks in flight, alone or not.
            let batch = match &self.work {
                Work::Host { .. }
                    if !self.inline && R::BATCH > 1 && self.scheduler.workers() == 1 =>
                {
                    usize::MAX
                }
                Work::Host { .. } if !self.inline => R::BATCH.max(1),
                Work::Host { .. } | Work::Resident(_) => 1,
            };
            loop {
                // One by one while an injected fault or hold counts the chunks down.
                let most = match self.counted && dev.health.counting_down() {
                    true => R::DEPTH,
                    false => R::DEPTH.max(batch),
                };
                while in_flight.len() < most && !cancelled() {
                    let next = if in_flight.is_empty() {
                        self.scheduler.next(slot)
                    } else {
                        self.scheduler.try_next(slot)
                    };
                    let Some((chunk, orphan)) = next else { break };
                    held = vec![chunk];
                    queue_took_latest(&mut in_flight)?;
                    ready_for_chunk(dev, self.counted)?;
                    let taken = Instant::now();
                    let (items, flight, begun) = match &self.work {
                        Work::Host { ranges, .. } => {
                            let ready = match &prepared {
                                Some(ready) => ready,
                                None => prepared.insert(runner.prepare(dev, self.kernel)?),
                            };
                            let range = ranges[chunk].clone();
                            let items = range.len();
                            let (flight, begun) =
                                runner.begin(dev, &job, ready, range, &mut kept)?;
                            (items, Flight::Chunk(flight), begun)
                        }
                        Work::Resident(pieces) => {
                            let (landing, submitted) =
                                pieces.begin(dev, chunk).inspect_err(|e| {
                                    call_error = !matches!(e, Error::DeviceLost { .. });
                                })?;
                            // Its uploads are the call's own events, not the chunk's bytes.
                            let begun = Begun {
                                submitted,
                                bytes_up: 0,
                                bytes_down: 0,
                            };
                            (pieces.items(chunk), Flight::Piece(landing), begun)
                        }
                    };
                    let meta = Meta {
                        chunk,
                        items,
                        orphan,
                        taken,
                        begun,
                    };
                    in_flight.push_back(Pending { meta, flight });
                    held.clear();
                }
                queue_took_latest(&mut in_flight)?;
                let finishing: Vec<Pending<'_, R::Flight>> =
                    in_flight.drain(..batch.min(in_flight.len())).collect();
                if finishing.is_empty() {
                    return Ok(());
                }
                held = finishing.iter().map(|p| p.meta.chunk).collect();
                let finished =
                    self.finish_pending(dev, runner, &job, prepared.as_ref(), finishing)?;
                held.clear();
                for (meta, done) in finished {
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
                    if let Some(r) = &self.recording {
                        r.chunk(dev, &meta, &done, last_done);
                    }
                    last_done = done.copied;
                    self.scheduler.done();
                }
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
        // Counted here, where the chunks of every path (split, fast, resident) finish.
        if self.counted {
            dev.counters.add_busy(report.busy_s);
        }
        let mut unfinished: Vec<usize> = held.into_iter().collect();
        unfinished.extend(in_flight.iter().map(|p| p.meta.chunk));
        // What the device may still be using (after a failure, or chunks left to it when
        // the call was interrupted): never pooled for a next call to write or map.
        // A resident piece's output is dropped with it (its buffer goes back to the pool:
        // later work on the device's queue runs after the piece).
        let flights: Vec<R::Flight> = in_flight
            .drain(..)
            .filter_map(|p| match p.flight {
                Flight::Chunk(flight) => Some(flight),
                Flight::Piece(_) => None,
            })
            .collect();
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
            Err(error) if call_error || matches!(error, Error::KernelCompile(_)) => {
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

impl Run<'_> {
    /// Runs the call on `workers`, one thread each (worker slot = index); returns each
    /// worker's report. A lone worker runs on the calling thread: a thread of its own
    /// would only add a hand-off (tens of µs, more than a small call's kernel).
    pub(crate) fn on(&self, workers: &[&GpuDevice]) -> Vec<WorkerReport> {
        if let [dev] = workers {
            return vec![self.work(0, dev)];
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = workers
                .iter()
                .enumerate()
                .map(|(slot, dev)| scope.spawn(move || self.work(slot, dev)))
                .collect();
            // `work` catches panics of its own; a join error would be one in its
            // bookkeeping, reported like a failure of the device.
            handles
                .into_iter()
                .zip(workers)
                .map(|(h, dev)| {
                    h.join().unwrap_or_else(|panic| WorkerReport {
                        failure: Some(Error::from_panic(
                            &format!("the worker of device {}", dev.id),
                            panic.as_ref(),
                        )),
                        ..WorkerReport::default()
                    })
                })
                .collect()
        })
    }

    /// Completes `pending`: a resident piece, or chunks of host inputs (together when
    /// there are several, see [`Runner::finish_batch`]); each with its finish.
    fn finish_pending<'s, R: Runner>(
        &self,
        dev: &GpuDevice,
        runner: &R,
        job: &Job<'_>,
        prepared: Option<&R::Prepared>,
        pending: Vec<Pending<'s, R::Flight>>,
    ) -> Result<Vec<(Meta, Finished)>> {
        let mut done = Vec::with_capacity(pending.len());
        let mut chunks = Vec::with_capacity(pending.len());
        for Pending { meta, flight } in pending {
            match flight {
                Flight::Chunk(flight) => chunks.push((meta, flight)),
                Flight::Piece(landing) => {
                    let wait_start = Instant::now();
                    landing.land(dev, self.timeout)?;
                    let landed = Instant::now();
                    let finished = Finished {
                        wait_start,
                        wait_end: landed,
                        copied: landed,
                        ticks: None,
                        staged: false,
                    };
                    done.push((meta, finished));
                }
            }
        }
        if !chunks.is_empty() {
            done.extend(self.finish_chunks(dev, runner, job, prepared, chunks)?);
        }
        Ok(done)
    }

    /// Completes chunks of host inputs into their output slices: all of them, or none (a
    /// chunk that fails fails the device, and every chunk of the batch stays unfinished,
    /// its output slice left for whichever device takes it over).
    fn finish_chunks<R: Runner>(
        &self,
        dev: &GpuDevice,
        runner: &R,
        job: &Job<'_>,
        prepared: Option<&R::Prepared>,
        chunks: Vec<(Meta, R::Flight)>,
    ) -> Result<Vec<(Meta, Finished)>> {
        let (Some(ready), Work::Host { outputs, .. }) = (prepared, &self.work) else {
            return Err(Error::Internal("a chunk began unprepared".into()));
        };
        let mut slots: Vec<_> = chunks
            .iter()
            .map(|(meta, _)| {
                outputs[meta.chunk]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            })
            .collect();
        let mut metas = Vec::with_capacity(chunks.len());
        let mut batch = Vec::with_capacity(chunks.len());
        for ((meta, flight), slot) in chunks.into_iter().zip(slots.iter_mut()) {
            let Some(output) = slot.as_deref_mut() else {
                return Err(Error::Internal(format!(
                    "chunk {} completed twice",
                    meta.chunk
                )));
            };
            metas.push(meta);
            batch.push((flight, output));
        }
        let finished = match <[_; 1]>::try_from(batch) {
            Ok([(flight, output)]) => vec![runner.finish(dev, job, ready, flight, output)],
            Err(batch) => runner.finish_batch(dev, job, ready, batch),
        };
        let finished = finished.into_iter().collect::<Result<Vec<Finished>>>()?;
        for slot in &mut slots {
            **slot = None;
        }
        Ok(metas.into_iter().zip(finished).collect())
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
