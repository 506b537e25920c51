//! Running a row kernel (any [`Kernel`] with a per-item output) on resident operands: for
//! each shard of the first resident operand, the kernel runs on the device holding those
//! rows and writes a new shard there. Host operands are uploaded to match; resident ones
//! sharded differently are brought over by [`MultiGpuContext::assemble`]. A device that
//! fails (or whose injected fault is due) is marked failed and the call starts again on the
//! others, lost rows rebuilt from their lineage: kernels are per row, so the result is the
//! same whichever device ran which rows.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::array::{ResidentArray, Snapshot};
use super::place::{record, Recording};
use crate::context::ledger::Entry;
use crate::context::lineage::{Lineage, Origin};
use crate::context::shard::{self, shards_of, Shard, Storage};
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel, Output};
use crate::profile::Kind;
use crate::runner::Unfinished;
use crate::worker::ready_for_chunk;

/// A shard as a snapshot lists it: device, rows, words.
pub(super) type Placed = (usize, Range<usize>, Arc<Storage>);

/// One operand of a resident call.
#[derive(Clone, Copy)]
pub enum Operand<'a> {
    /// A resident array of this context.
    Resident(&'a ResidentArray),
    /// Host words: per-item rows (uploaded to match the sharding) or an input bound whole
    /// (uploaded once to each device).
    Host(&'a [f32]),
}

/// Rows of operand `operand` rebuilt on `device` because their own device failed: kept in
/// place of the lost shard once the call succeeds, so later calls do not rebuild them again.
struct Repair {
    operand: usize,
    rows: Range<usize>,
    device: usize,
    storage: Arc<Storage>,
}

/// What an attempt made (the new shards, and rebuilt rows of its operands), or the device to
/// blame (if a device failed) and the error.
type Attempt = std::result::Result<(Vec<Shard>, Vec<Repair>), (Option<usize>, Error)>;

/// A shard dispatched in this attempt, waiting for its device.
struct Dispatched {
    device: usize,
    rows: Range<usize>,
    out: Storage,
    /// What is left to wait for (a wgpu shard's submission and loop checks).
    unfinished: Option<Box<dyn Unfinished>>,
    started: Instant,
}

impl MultiGpuContext {
    /// Runs `kernel` (per-item output) on `operands`, named for errors: one per kernel input,
    /// at least one of them resident. The result has the first resident operand's sharding
    /// (rows of a failed device, or of one that cannot run the kernel, go to another) and
    /// stays on the devices.
    pub fn run_resident(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
    ) -> Result<ResidentArray> {
        let (rows, reference) = self.check_operands(kernel, operands)?;
        let Operand::Resident(first) = operands[reference].1 else {
            return Err(Error::Internal("reference operand is not resident".into()));
        };
        let layout = first
            .snapshot(&self.resident, operands[reference].0)?
            .shards;
        let entry = self.run_on_layout(kernel, operands, rows, &layout)?;
        let cols = entry.cols;
        let id = self.resident.insert(entry);
        Ok(ResidentArray {
            id,
            rows,
            cols,
            ledger: Arc::clone(&self.resident),
        })
    }

    /// [`run_resident`](Self::run_resident) writing into `out`, a resident array of the
    /// result's shape: the result takes `out`'s sharding (operands sharded otherwise are
    /// brought over as for any call), then replaces `out`'s shards and lineage. Its old
    /// buffers go back to their devices' pools (the next call's output reuses them); the
    /// result's are taken from the pools, so a loop writing into one `out` allocates nothing
    /// new after its first two calls. Nothing in `out` changes if the call fails.
    pub fn run_resident_into(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
        out: &ResidentArray,
    ) -> Result<()> {
        let (rows, _) = self.check_operands(kernel, operands)?;
        let snapshot = out.snapshot(&self.resident, "out")?;
        let cols = kernel.output_words_per_item();
        if (out.rows, out.cols) != (rows, cols) {
            return Err(Error::Shape {
                argument: "out".into(),
                expected: format!("({rows}, {cols}) (the result's)"),
                actual: format!("({}, {})", out.rows, out.cols),
            });
        }
        let entry = self.run_on_layout(kernel, operands, rows, &snapshot.shards)?;
        drop(snapshot);
        self.replace_entry(out, entry)
    }

    /// Puts `entry` (a call's result) in place of `out`'s shards and lineage.
    pub(super) fn replace_entry(&self, out: &ResidentArray, entry: Entry) -> Result<()> {
        let old = {
            let mut entries = self.resident.lock();
            match entries.get_mut(&out.id) {
                Some(held) => std::mem::replace(held, entry),
                // Freed while the call ran: the result has nowhere to go.
                None => return Err(crate::context::ledger::Ledger::gone("out")),
            }
        };
        // Released outside the ledger's lock (dropping buffers takes the pool's).
        drop(old);
        Ok(())
    }

    /// Runs `kernel` on `operands` with the result's shards on `layout` (rows a device
    /// cannot hold move elsewhere); retries on the other devices when one fails. Returns the
    /// result's ledger entry.
    pub(super) fn run_on_layout(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
        rows: usize,
        layout: &[Placed],
    ) -> Result<Entry> {
        crate::interrupt::check()?;
        let origins = operands
            .iter()
            .map(|(name, op)| match op {
                Operand::Resident(a) => Ok(Origin::Rows(a.snapshot(&self.resident, name)?.lineage)),
                Operand::Host(words) => Ok(Origin::Host(Arc::new(words.to_vec()))),
            })
            .collect::<Result<Vec<_>>>()?;
        let recording = self.resident_call(&format!("{}/{}", kernel.family, kernel.id), rows);
        let mut attempts = 0;
        let (shards, repairs) = loop {
            attempts += 1;
            match self.attempt(kernel, operands, layout, &recording) {
                Ok(done) => break done,
                // A user's kernel the driver refuses: the user's error, not the device's.
                Err((_, error @ Error::KernelCompile(_))) => return Err(error),
                Err((Some(device), error)) if attempts <= self.devices.len() => {
                    log::warn!("device {device} failed a resident call: {error}; rebuilding its rows elsewhere");
                    self.devices[device].health.mark_failed(&error.to_string());
                }
                Err((_, error)) => return Err(error),
            }
        };
        self.keep_repairs(operands, repairs);
        Ok(Entry {
            cols: kernel.output_words_per_item(),
            shards,
            lineage: Arc::new(Lineage::Op {
                kernel: Box::new(kernel.clone()),
                inputs: origins,
            }),
        })
    }

    /// Puts rebuilt rows in place of the lost shards they replace (when those are still
    /// there: another call may have repaired or freed them meanwhile).
    fn keep_repairs(&self, operands: &[(&str, Operand<'_>)], repairs: Vec<Repair>) {
        let mut entries = self.resident.lock();
        for repair in repairs {
            let Operand::Resident(array) = operands[repair.operand].1 else {
                continue;
            };
            let Some(entry) = entries.get_mut(&array.id) else {
                continue;
            };
            let lost = entry
                .shards
                .iter_mut()
                .find(|s| s.rows == repair.rows && !self.devices[s.device].health.is_healthy());
            if let Some(shard) = lost {
                shard.device = repair.device;
                shard.storage = repair.storage;
            }
        }
    }

    /// Checks operand count, kinds and shapes before any work; returns the rows and the
    /// index of the first resident operand.
    pub(super) fn check_operands(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
    ) -> Result<(usize, usize)> {
        if !matches!(kernel.output, Output::PerItem(_)) {
            return Err(Error::invalid(
                "kernel",
                format!("{} writes per chunk, not per row", kernel.id),
            ));
        }
        if operands.len() != kernel.inputs.len() {
            return Err(Error::invalid(
                "operands",
                format!(
                    "expected {} operands, got {}",
                    kernel.inputs.len(),
                    operands.len()
                ),
            ));
        }
        let mut rows: Option<(usize, &str)> = None;
        let mut reference = None;
        for (i, ((name, op), spec)) in operands.iter().zip(&kernel.inputs).enumerate() {
            let (have, width) = match (op, *spec) {
                (Operand::Resident(a), Input::PerItem(w)) => {
                    a.snapshot(&self.resident, name)?;
                    reference.get_or_insert(i);
                    ((a.rows, a.cols), w)
                }
                (Operand::Resident(_), Input::Whole(_)) => return Err(Error::invalid(
                    *name,
                    "expected a host array for an operand applied to every row, got a DeviceArray",
                )),
                (Operand::Host(words), Input::PerItem(w)) => {
                    if !words.len().is_multiple_of(w) {
                        return Err(Error::Shape {
                            argument: name.to_string(),
                            expected: format!("(N, {w})"),
                            actual: format!("{} floats", words.len()),
                        });
                    }
                    ((words.len() / w, w), w)
                }
                (Operand::Host(words), Input::Whole(w)) => {
                    if words.len() != w {
                        return Err(Error::Shape {
                            argument: name.to_string(),
                            expected: format!("({w},)"),
                            actual: format!("{} floats", words.len()),
                        });
                    }
                    continue;
                }
            };
            if have.1 != width {
                return Err(Error::Shape {
                    argument: name.to_string(),
                    expected: format!("(N, {width})"),
                    actual: format!("({}, {})", have.0, have.1),
                });
            }
            match rows {
                None => rows = Some((have.0, name)),
                Some((n, first)) if n != have.0 => {
                    return Err(Error::Shape {
                        argument: name.to_string(),
                        expected: format!("({n}, {width}) like {first}"),
                        actual: format!("({}, {width})", have.0),
                    })
                }
                Some(_) => {}
            }
        }
        match (rows, reference) {
            (Some((n, _)), Some(r)) => Ok((n, r)),
            _ => Err(Error::invalid(
                "operands",
                "expected at least one DeviceArray batch operand, got none",
            )),
        }
    }

    /// One attempt at a resident call: every shard dispatched, then every device waited
    /// for. On failure, the device to blame (if a device failed) and the error.
    fn attempt(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
        layout: &[Placed],
        recording: &Recording,
    ) -> Attempt {
        let plain = |e: Error| (None, e);
        let snapshots: Vec<Option<Snapshot>> = operands
            .iter()
            .map(|(name, op)| match op {
                Operand::Resident(a) => a.snapshot(&self.resident, name).map(Some),
                Operand::Host(_) => Ok(None),
            })
            .collect::<Result<_>>()
            .map_err(plain)?;
        let out_cols = kernel.output_words_per_item();
        let mut whole: HashMap<(usize, usize), Arc<Storage>> = HashMap::new();
        let mut dispatched = Vec::with_capacity(layout.len());
        let mut repairs = Vec::new();
        let mut targets = Vec::with_capacity(layout.len());
        for (device, rows, _) in layout {
            let own = &self.devices[*device];
            let dev = if own.health.is_healthy() && own.can_run(kernel) {
                own.as_ref()
            } else {
                self.substitute(kernel).map_err(plain)?
            };
            targets.push((dev, rows));
        }
        // Shards a device runs asynchronously first: they are submitted and run while the
        // devices that run in place (the host) compute their own in this thread.
        targets.sort_by_key(|(dev, rows)| (shards_of(dev).runs_in_place(), rows.start));
        for (dev, rows) in targets {
            let blame = |e: Error| match e {
                Error::DeviceLost { device, .. } => (Some(device), e),
                other => (None, other),
            };
            let mut inputs = Vec::with_capacity(operands.len());
            for (i, ((_, op), spec)) in operands.iter().zip(&kernel.inputs).enumerate() {
                let storage = match (op, snapshots[i].as_ref(), *spec) {
                    (_, Some(snapshot), Input::PerItem(w)) => {
                        let (storage, _) = self
                            .assemble(dev, snapshot, rows, w, recording)
                            .map_err(blame)?;
                        let lost = snapshot
                            .shards
                            .iter()
                            .any(|(d, r, _)| r == rows && !self.devices[*d].health.is_healthy());
                        if lost {
                            repairs.push(Repair {
                                operand: i,
                                rows: rows.clone(),
                                device: dev.id,
                                storage: Arc::clone(&storage),
                            });
                        }
                        storage
                    }
                    (Operand::Host(words), _, Input::PerItem(w)) => {
                        let started = Instant::now();
                        let part = &words[rows.start * w..rows.end * w];
                        let stored = shards_of(dev).put(dev, part).map_err(blame)?;
                        if let Some((p, call)) = recording {
                            record(
                                p,
                                *call,
                                dev.id,
                                Kind::Upload,
                                started,
                                part.len() * 4,
                                rows.len(),
                            );
                        }
                        Arc::new(stored)
                    }
                    (Operand::Host(words), _, Input::Whole(_)) => match whole.get(&(i, dev.id)) {
                        Some(s) => Arc::clone(s),
                        None => {
                            let started = Instant::now();
                            let stored = Arc::new(shards_of(dev).put(dev, words).map_err(blame)?);
                            if let Some((p, call)) = recording {
                                record(p, *call, dev.id, Kind::Upload, started, words.len() * 4, 1);
                            }
                            whole.insert((i, dev.id), Arc::clone(&stored));
                            stored
                        }
                    },
                    (Operand::Resident(_), _, _) => {
                        return Err(plain(Error::Internal(
                            "resident operand without snapshot".into(),
                        )))
                    }
                };
                inputs.push(storage);
            }
            ready_for_chunk(dev, true).map_err(blame)?;
            let started = Instant::now();
            let words = rows.len() * out_cols;
            shard::check_room(dev, (words * 4) as u64, self.resident.held_bytes(dev.id))
                .map_err(plain)?;
            let (out, unfinished) = shards_of(dev)
                .run_shard(dev, kernel, &inputs, rows.len())
                .map_err(blame)?;
            dispatched.push(Dispatched {
                device: dev.id,
                rows: rows.clone(),
                out,
                unfinished,
                started,
            });
        }
        let timeout = self.options.sync_timeout_ms.map(Duration::from_millis);
        dispatched.sort_by_key(|d| d.rows.start);
        let mut made = Vec::with_capacity(dispatched.len());
        for d in dispatched {
            let dev = &self.devices[d.device];
            if let Some(unfinished) = d.unfinished {
                // A driver that cut the user's loops short: the user's error.
                unfinished
                    .finish(dev, &d.rows, timeout)
                    .map_err(|e| match e {
                        error @ Error::KernelCompile(_) => (None, error),
                        other => (Some(dev.id), other),
                    })?;
            }
            dev.counters.chunk_done(d.rows.len() as u64, 0, 0);
            dev.health.chunk_completed();
            if let Some((p, call)) = recording {
                record(p, *call, dev.id, Kind::Kernel, d.started, 0, d.rows.len());
            }
            made.push(Shard {
                device: d.device,
                rows: d.rows,
                storage: Arc::new(d.out),
            });
        }
        Ok((made, repairs))
    }
}
