//! The worker loop of the host device: it pulls chunks from the same scheduler as the wgpu
//! workers and runs each one in place (the kernel reads the caller's inputs and writes the
//! chunk's output slice; no upload, no readback), one at a time on the device's thread pool.
//! Health, fault injection, counters, re-queueing on failure and profile events are the
//! wgpu worker's; a panicking kernel is a failure of the device (see `host::device`).

use std::sync::PoisonError;
use std::time::Instant;

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::host::device::HostDevice;
use crate::profile::{Clock, Event, Kind};
use crate::worker::{ready_for_chunk, Completed, Run, WorkerReport};

impl Run<'_> {
    /// Records one host chunk: its kernel (host clock) and, for an orphan, the retry.
    fn record_host_chunk(
        &self,
        dev: &GpuDevice,
        chunk: usize,
        items: usize,
        span: (Instant, Instant),
        orphan: bool,
    ) {
        let Some(r) = &self.recording else { return };
        let p = &r.profiler;
        let kinds: &[Kind] = if orphan {
            &[Kind::Kernel, Kind::Retry]
        } else {
            &[Kind::Kernel]
        };
        for &kind in kinds {
            p.push(Event {
                device: Some(dev.id),
                kind,
                chunk: Some(chunk as u64),
                call: r.call,
                start_s: p.at(span.0),
                duration_s: (span.1 - span.0).as_secs_f64(),
                bytes: 0,
                items: items as u64,
                clock: Clock::Host,
            });
        }
    }

    /// Works through chunks on the host device `dev` (worker `slot`) until none is left or
    /// the device fails.
    pub(crate) fn work_host(
        &self,
        slot: usize,
        dev: &GpuDevice,
        host: &HostDevice,
    ) -> WorkerReport {
        let mut report = WorkerReport::default();
        let started = Instant::now();
        let mut last_done = started;
        let mut held: Option<usize> = None;
        let cancelled = || self.interrupt.as_ref().is_some_and(|i| i.is_cancelled());
        let outcome = (|| -> Result<()> {
            let Some(kernel) = self.kernel.host.as_ref().map(|k| host.prepare(k.as_ref())) else {
                return Err(Error::Internal(format!(
                    "kernel {} has no host implementation but was given to the host device",
                    self.kernel.id
                )));
            };
            while !cancelled() {
                let Some((chunk, orphan)) = self.scheduler.next(slot) else {
                    break;
                };
                held = Some(chunk);
                ready_for_chunk(dev, self.counted)?;
                let taken = Instant::now();
                let range = self.ranges[chunk].clone();
                let items = range.len();
                let mut slot_guard = self.outputs[chunk]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let Some(output) = slot_guard.as_deref_mut() else {
                    return Err(Error::Internal(format!("chunk {chunk} completed twice")));
                };
                host.run(dev.id, kernel.as_ref(), self.inputs, range, output)?;
                *slot_guard = None;
                drop(slot_guard);
                held = None;
                let done = Instant::now();
                report.completed.push(Completed {
                    items,
                    seconds: (done - taken.max(last_done)).as_secs_f64(),
                });
                if self.counted {
                    dev.counters.chunk_done(items as u64, 0, 0);
                    dev.health.chunk_completed();
                }
                log::debug!("host device {} chunk {chunk} ({items} items) done", dev.id);
                self.record_host_chunk(dev, chunk, items, (taken, done), orphan);
                last_done = done;
                self.scheduler.done();
            }
            Ok(())
        })();
        report.busy_s = if report.completed.is_empty() {
            0.0
        } else {
            (last_done - started).as_secs_f64()
        };
        match outcome {
            Ok(()) => self.scheduler.exit(),
            Err(error) => {
                let unfinished: Vec<usize> = held.into_iter().collect();
                log::warn!(
                    "device {} ({}, host) failed: {error}; chunks {unfinished:?} re-queued on the other devices",
                    dev.id,
                    dev.adapter.name,
                );
                if self.counted {
                    dev.counters.chunks_failed(unfinished.len() as u64);
                }
                dev.health.mark_failed(&error.to_string());
                self.scheduler.fail(slot, unfinished);
                report.failure = Some(error);
            }
        }
        report
    }
}
