//! The host CPU device as a [`Runner`] and a [`Shards`] holder: nothing is staged, the
//! kernel reads the caller's inputs and writes the chunk's output slice in place on the
//! device's thread pool. A chunk is begun by noting its range and run when it is finished,
//! a few at a time side by side (`BATCH`), so a worker never holds a chunk it is not about
//! to run. Shards are host vectors, limited by memory only; a row kernel over one runs at
//! once. A panicking kernel is a failure of the device (see `HostDevice::run`).

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    Begun, Finished, Job, Partials, Piece, Reduced, Run, Runner, Shard, ShardChunks, Shards,
    Storage,
};
use crate::alloc;
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::host::device::HostDevice;
use crate::kernel::{HostImpl, Kernel};

/// The host implementation of `kernel`, with this device's fma rounding.
fn prepared(host: &HostDevice, kernel: &Kernel) -> Result<Arc<dyn HostImpl>> {
    match kernel.host.as_ref() {
        Some(implementation) => Ok(host.prepare(implementation.as_ref(), kernel.dtype)),
        None => Err(Error::Internal(format!(
            "kernel {} has no host implementation but was given to the host device",
            kernel.id
        ))),
    }
}

impl Shards for HostDevice {
    fn largest_shard(&self, _dev: &GpuDevice) -> Option<u64> {
        None
    }

    fn copies_within(&self) -> bool {
        false
    }

    fn copy_within(&self, _dev: &GpuDevice, target: &mut Storage, pieces: &[Piece]) -> Result<()> {
        let Storage::Host(target) = target else {
            return Err(Error::Internal("a wgpu shard on the host device".into()));
        };
        for (source, from, into) in pieces {
            let source = source.words()?;
            target[into.clone()].copy_from_slice(&source[from.clone()]);
        }
        Ok(())
    }

    fn allocate(&self, _dev: &GpuDevice, words: usize) -> Result<Storage> {
        Ok(Storage::Host(alloc::zeroed("resident shard", words)?))
    }

    fn put(&self, _dev: &GpuDevice, data: &[f32]) -> Result<Storage> {
        let mut copy: Vec<f32> = alloc::zeroed("resident shard", data.len())?;
        copy.copy_from_slice(data);
        Ok(Storage::Host(copy))
    }

    fn run_shard(&self, dev: &GpuDevice, kernel: &Kernel, inputs: &[Shard], items: usize) -> Run {
        let kernel_here = prepared(self, kernel)?;
        let slices = inputs
            .iter()
            .map(|storage| storage.words())
            .collect::<Result<Vec<_>>>()?;
        let mut out = alloc::zeroed("resident output", items * kernel.output_words_per_item())?;
        self.run(
            dev.id,
            kernel_here.as_ref(),
            &slices,
            (0..items, &mut out),
            false,
        )?;
        Ok((Storage::Host(out), None))
    }

    fn reduce_shard(&self, dev: &GpuDevice, kernel: &Kernel, span: &ShardChunks<'_>) -> Reduced {
        let rows = span.storage.words()?;
        let kernel_here = prepared(self, kernel)?;
        let mut inputs: Vec<&[f32]> = vec![rows];
        inputs.extend(span.per_row);
        let mut partials = alloc::zeroed("partials", span.chunks.len() * span.words)?;
        for (c, partial) in span
            .chunks
            .clone()
            .zip(partials.chunks_exact_mut(span.words))
        {
            self.run(
                dev.id,
                kernel_here.as_ref(),
                &inputs,
                (span.local(c), partial),
                false,
            )?;
        }
        Ok(Some(Box::new(Ready(partials))))
    }
}

/// Partials the host device has computed.
struct Ready(Vec<f32>);

impl Partials for Ready {
    fn collect(self: Box<Self>, _: &GpuDevice, out: &mut [f32], _: Option<Duration>) -> Result<()> {
        out.copy_from_slice(&self.0);
        Ok(())
    }
}

impl Runner for HostDevice {
    type Prepared = Arc<dyn HostImpl>;
    type Flight = Range<usize>;
    type Held = ();
    const DEPTH: usize = 1;
    // Four chunks at a time: one after another, every chunk ended in a fork-join whose
    // threads waited for the slowest of them before the next chunk began (a Cl(3,0)
    // product of 2^20 rows in 64 chunks took 0.3 ms longer than in one on the 2-vCPU VM).
    // More would hold chunks a faster device pulling from a shared queue could take; a
    // call the host runs alone takes all its chunks in one batch (the worker decides).
    const BATCH: usize = 4;

    fn prepare(&self, _dev: &GpuDevice, kernel: &Kernel) -> Result<Arc<dyn HostImpl>> {
        prepared(self, kernel)
    }

    fn begin(
        &self,
        _dev: &GpuDevice,
        _job: &Job<'_>,
        _prepared: &Arc<dyn HostImpl>,
        range: Range<usize>,
        _held: &mut (),
    ) -> Result<(Range<usize>, Begun)> {
        let begun = Begun {
            submitted: Instant::now(),
            bytes_up: 0,
            bytes_down: 0,
        };
        Ok((range, begun))
    }

    fn wait_submitted(&self, _: &GpuDevice, _: &Job<'_>, _: &mut Range<usize>) -> Result<()> {
        Ok(())
    }

    fn finish(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        prepared: &Arc<dyn HostImpl>,
        range: Range<usize>,
        output: &mut [f32],
    ) -> Result<Finished> {
        let start = Instant::now();
        let here = job.inline;
        self.run(dev.id, prepared.as_ref(), job.inputs, (range, output), here)?;
        let done = Instant::now();
        Ok(Finished {
            wait_start: start,
            wait_end: done,
            copied: done,
            ticks: None,
            staged: false,
        })
    }

    fn finish_batch(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        prepared: &Arc<dyn HostImpl>,
        batch: Vec<(Range<usize>, &mut [f32])>,
    ) -> Vec<Result<Finished>> {
        self.run_each(dev.id, prepared.as_ref(), job.inputs, batch, job.stop)
            .into_iter()
            .map(|ran| {
                ran.map(|(start, done)| Finished {
                    wait_start: start,
                    wait_end: done,
                    copied: done,
                    ticks: None,
                    staged: false,
                })
            })
            .collect()
    }

    fn abandon(&self, _flights: Vec<Range<usize>>, _held: Option<()>, _later: bool) {}
}
