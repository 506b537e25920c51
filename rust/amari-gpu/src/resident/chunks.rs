//! Reductions over a resident array: a kernel with one partial per chunk (`Output::PerChunk`)
//! run on the problem's chunk grid (chunks of `chunk_items` rows counted from row 0, as the
//! engine cuts a numpy input), each chunk on the device holding its rows, so the partials
//! are the ones the numpy path computes, bit for bit, and the caller's sum in chunk order
//! is too. A shard's chunks are the device's to run (`Shards::reduce_shard`: one submission
//! on a wgpu device, in place on the host device); every device's submission goes out
//! before any is waited for. A chunk cut by a shard boundary, or whose device fails or
//! cannot bind it, is run by the engine on its rows brought to the host: read from their
//! shards, or rebuilt from the lineage when their device failed. Shards already on a failed
//! device when the call starts are first rebuilt on a substitute and kept there. Only those
//! rows, and the partials, cross to the host.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::array::{ResidentArray, Snapshot};
use super::place::record;
use crate::context::shard::{self, shards_of};
use crate::context::{MultiGpuContext, Target};
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel, Output};
use crate::profile::Kind;
use crate::runner::ShardChunks;
use crate::worker::ready_for_chunk;

impl MultiGpuContext {
    /// The partials, in chunk order, of `kernel` over the rows of `array` (named `argument`
    /// in errors) cut into chunks of `chunk_items` rows: the kernel's inputs are the rows,
    /// then (when given) `per_row`, one word per row, which is uploaded.
    pub(crate) fn run_resident_chunks(
        &self,
        kernel: &Kernel,
        array: &ResidentArray,
        argument: &str,
        per_row: Option<&[f32]>,
        chunk_items: usize,
    ) -> Result<Vec<f32>> {
        let Output::PerChunk(words) = kernel.output else {
            return Err(Error::Internal(format!(
                "kernel {} has no per-chunk output",
                kernel.id
            )));
        };
        let (n, cols) = (array.rows, array.cols);
        let mut expected = vec![Input::PerItem(cols)];
        if let Some(w) = per_row {
            if w.len() != n {
                return Err(Error::Internal("per-row input of the wrong length".into()));
            }
            expected.push(Input::PerItem(1));
        }
        if kernel.inputs != expected || chunk_items == 0 {
            return Err(Error::Internal(format!(
                "kernel {} does not reduce rows of {cols} words",
                kernel.id
            )));
        }
        crate::interrupt::check()?;
        self.heal(array, kernel, argument)?;
        let snapshot = array.snapshot(&self.resident, argument)?;
        let chunks = n.div_ceil(chunk_items);
        let mut partials = crate::alloc::zeroed("partials", chunks * words)?;
        let mut done = vec![false; chunks];
        let timeout = self.options.sync_timeout_ms.map(Duration::from_millis);
        let recording = self.resident_call(&format!("resident/{}", kernel.id), n);
        // Every wgpu shard's chunks are submitted before any is waited for, so the devices
        // work side by side; host shards run meanwhile; then the partials are read back.
        let mut pending = Vec::new();
        // Shards a device runs asynchronously first: the host device's shards then run
        // (in place) while the devices work.
        let mut order: Vec<_> = snapshot.shards.iter().collect();
        order.sort_by_key(|(device, _, _)| {
            self.device(*device)
                .is_ok_and(|dev| shards_of(dev).runs_in_place())
        });
        for (device, rows, storage) in order {
            // Chunks wholly inside the shard (the last chunk may be short).
            let first = rows.start.div_ceil(chunk_items);
            let last = if rows.end == n {
                chunks
            } else {
                rows.end / chunk_items
            };
            if first >= last {
                continue;
            }
            let dev = self.device(*device)?;
            if !dev.health.is_healthy() || !dev.can_run(kernel) {
                continue;
            }
            let span = ShardChunks {
                shard_start: rows.start,
                chunks: first..last,
                per_row: per_row.map(|w| &w[rows.clone()]),
                chunk_items,
                n,
                cols,
                words,
            };
            // Ctrl-C between shards: what was submitted finishes on its own.
            crate::interrupt::check()?;
            let started = Instant::now();
            let submitted = match ready_for_chunk(dev, true) {
                Ok(()) => shards_of(dev).reduce_shard(dev, kernel, storage, &span),
                Err(error) => Err(error),
            };
            match submitted {
                Ok(Some(results)) => pending.push((dev, span.chunks, results, started)),
                Ok(None) => {}
                Err(error @ Error::DeviceLost { .. }) => dev.health.mark_failed(&error.to_string()),
                Err(error) => return Err(error),
            }
        }
        for (dev, range, results, started) in pending {
            let out = &mut partials[range.start * words..range.end * words];
            match results.collect(dev, out, timeout) {
                Ok(()) => {
                    done[range.clone()].fill(true);
                    if let Some((p, call)) = &recording {
                        let covered = (range.end * chunk_items).min(n) - range.start * chunk_items;
                        record(
                            p,
                            *call,
                            dev.id,
                            Kind::Kernel,
                            started,
                            out.len() * 4,
                            covered,
                        );
                    }
                }
                Err(error @ Error::DeviceLost { .. }) => dev.health.mark_failed(&error.to_string()),
                Err(error) => return Err(error),
            }
        }
        // Runs of chunks left over, through the engine on their rows.
        let mut c = 0;
        while c < chunks {
            if done[c] {
                c += 1;
                continue;
            }
            let mut end = c + 1;
            while end < chunks && !done[end] {
                end += 1;
            }
            let rows = c * chunk_items..(end * chunk_items).min(n);
            let host_rows = self.read_rows(&snapshot, cols, rows.clone(), timeout)?;
            let mut inputs: Vec<&[f32]> = vec![&host_rows];
            if let Some(w) = per_row {
                inputs.push(&w[rows.clone()]);
            }
            let ran = self.run_on_grid(
                kernel,
                &inputs,
                Target::Chunks,
                rows.len(),
                Some(chunk_items),
                None,
            )?;
            partials[c * words..end * words].copy_from_slice(&ran.partials);
            c = end;
        }
        Ok(partials)
    }

    /// Rebuilds the shards of `array` that sit on failed devices (or on one that cannot run
    /// `kernel`) on substitutes, from the lineage, and keeps them there: the call then runs
    /// their chunks where they now live, and later calls find them in place.
    fn heal(&self, array: &ResidentArray, kernel: &Kernel, argument: &str) -> Result<()> {
        let snapshot = array.snapshot(&self.resident, argument)?;
        for (device, rows, storage) in &snapshot.shards {
            let dev = self.device(*device)?;
            if dev.health.is_healthy() && dev.can_run(kernel) {
                continue;
            }
            let words = snapshot.lineage.replay(&self.replayer(), rows.clone())?;
            let to = self.substitute(kernel)?;
            shard::check_room(
                to,
                (words.len() * 4) as u64,
                self.resident.held_bytes(to.id),
            )?;
            let rebuilt = Arc::new(shards_of(to).put(to, &words)?);
            let mut entries = self.resident.lock();
            // Unless another call repaired or freed it meanwhile.
            if let Some(entry) = entries.get_mut(&array.id) {
                let lost = entry
                    .shards
                    .iter_mut()
                    .find(|s| s.rows == *rows && Arc::ptr_eq(&s.storage, storage));
                if let Some(shard) = lost {
                    shard.device = to.id;
                    shard.storage = rebuilt;
                }
            }
        }
        Ok(())
    }

    /// Rows `rows` of a resident array (`cols` words per row) on the host: read from the
    /// shards holding them, rebuilt from the lineage where their device failed.
    pub(crate) fn read_rows(
        &self,
        snapshot: &Snapshot,
        cols: usize,
        rows: Range<usize>,
        timeout: Option<Duration>,
    ) -> Result<Vec<f32>> {
        let mut out = crate::alloc::zeroed("resident rows", rows.len() * cols)?;
        for (device, held, storage) in &snapshot.shards {
            let (start, end) = (rows.start.max(held.start), rows.end.min(held.end));
            if start >= end {
                continue;
            }
            let target = &mut out[(start - rows.start) * cols..(end - rows.start) * cols];
            let dev = self.device(*device)?;
            let words = (start - held.start) * cols..(end - held.start) * cols;
            let read = if dev.health.is_healthy() {
                shards_of(dev).read(dev, storage, words, target, timeout)
            } else {
                Err(Error::DeviceLost {
                    device: dev.id,
                    reason: dev.health.reason().unwrap_or_default(),
                })
            };
            match read {
                Ok(()) => {}
                Err(error @ Error::DeviceLost { .. }) => {
                    dev.health.mark_failed(&error.to_string());
                    target.copy_from_slice(&snapshot.lineage.replay(&self.replayer(), start..end)?);
                }
                Err(error) => return Err(error),
            }
        }
        Ok(out)
    }
}
