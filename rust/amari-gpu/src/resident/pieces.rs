//! A resident row-kernel call as pieces of the one worker loop: piece i is the rows of the
//! layout's shard i, queued on the device holding them (or, when that device has failed or
//! cannot run the kernel, on the substitute). Beginning a piece gathers its operands on the
//! device that took it (`assemble`: the shard itself where it lives, else rows brought over
//! or rebuilt from the lineage) and starts the kernel; landing it waits and keeps the new
//! shard. A device that fails mid-call hands its pieces to the others through the scheduler,
//! whose `assemble` rebuilds the lost rows: kernels are per row, so the result is the same
//! whichever device ran which rows.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::array::{ResidentArray, Snapshot};
use super::place::{record, Recording};
use crate::context::shard::{self, shards_of, Shard, Storage};
use crate::context::MultiGpuContext;
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::kernel::{Input, Kernel};
use crate::profile::Kind;
use crate::runner::Unfinished;
use crate::scheduler::Scheduler;
use crate::worker::{self, Landing, Pieces, Run, Work};

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
pub(super) struct Repair {
    pub(super) operand: usize,
    pub(super) rows: Range<usize>,
    pub(super) device: usize,
    pub(super) storage: Arc<Storage>,
}

/// The pieces of one resident row-kernel call, and what they made.
pub(super) struct RowPieces<'c> {
    ctx: &'c MultiGpuContext,
    kernel: &'c Kernel,
    operands: &'c [(&'c str, Operand<'c>)],
    /// By operand: the resident one's shards at the call's start.
    snapshots: Vec<Option<Snapshot>>,
    layout: &'c [Placed],
    recording: &'c Recording,
    /// Host inputs bound whole, uploaded once per (operand, device).
    whole: Mutex<HashMap<(usize, usize), Arc<Storage>>>,
    /// By piece: the new shard, once landed.
    made: Vec<Mutex<Option<Shard>>>,
    /// Rebuilt rows of the operands, from landed pieces.
    repairs: Mutex<Vec<Repair>>,
}

/// A piece begun on a device: the new shard and what is left to wait for.
struct Landed<'p, 'c> {
    pieces: &'p RowPieces<'c>,
    piece: usize,
    out: Storage,
    unfinished: Option<Box<dyn Unfinished>>,
    repairs: Vec<Repair>,
}

impl<'c> RowPieces<'c> {
    /// The pieces of `kernel` on `operands` with the result's shards on `layout`.
    pub(super) fn new(
        ctx: &'c MultiGpuContext,
        kernel: &'c Kernel,
        operands: &'c [(&'c str, Operand<'c>)],
        layout: &'c [Placed],
        recording: &'c Recording,
    ) -> Result<Self> {
        let snapshots = operands
            .iter()
            .map(|(name, op)| match op {
                Operand::Resident(a) => a.snapshot(&ctx.resident, name).map(Some),
                Operand::Host(_) => Ok(None),
            })
            .collect::<Result<_>>()?;
        Ok(RowPieces {
            ctx,
            kernel,
            operands,
            snapshots,
            layout,
            recording,
            whole: Mutex::new(HashMap::new()),
            made: layout.iter().map(|_| Mutex::new(None)).collect(),
            repairs: Mutex::new(Vec::new()),
        })
    }

    /// Runs every piece through the worker loop; returns the new shards (in the layout's
    /// order) and the rebuilt rows of the operands.
    pub(super) fn run(self) -> Result<(Vec<Shard>, Vec<Repair>)> {
        let (ctx, kernel) = (self.ctx, self.kernel);
        let homes: Vec<usize> = self.layout.iter().map(|(device, _, _)| *device).collect();
        ctx.run_pieces(kernel, &self, &homes, self.recording)?;
        let mut shards = Vec::with_capacity(self.made.len());
        for made in self.made {
            let shard = made.into_inner().unwrap_or_else(PoisonError::into_inner);
            shards.push(shard.ok_or_else(|| Error::Internal("a piece never landed".into()))?);
        }
        let repairs = self
            .repairs
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Ok((shards, repairs))
    }

    /// Operand `i`'s rows `rows` on `dev`, with the rebuilt rows to keep if its shard there
    /// was lost.
    fn input(
        &self,
        dev: &GpuDevice,
        i: usize,
        rows: &Range<usize>,
        repairs: &mut Vec<Repair>,
    ) -> Result<Arc<Storage>> {
        let ctx = self.ctx;
        let (op, spec) = (self.operands[i].1, self.kernel.inputs[i]);
        match (op, self.snapshots[i].as_ref(), spec) {
            (_, Some(snapshot), Input::PerItem(w)) => {
                let (storage, _) = ctx.assemble(dev, snapshot, rows, w, self.recording)?;
                let lost = snapshot
                    .shards
                    .iter()
                    .any(|(d, r, _)| r == rows && !ctx.devices[*d].health.is_healthy());
                if lost {
                    repairs.push(Repair {
                        operand: i,
                        rows: rows.clone(),
                        device: dev.id,
                        storage: Arc::clone(&storage),
                    });
                }
                Ok(storage)
            }
            (Operand::Host(words), _, Input::PerItem(w)) => {
                let part = &words[rows.start * w..rows.end * w];
                Ok(Arc::new(self.upload(dev, part, rows.len())?))
            }
            (Operand::Host(words), _, Input::Whole(_)) => {
                let mut whole = self.whole.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(stored) = whole.get(&(i, dev.id)) {
                    return Ok(Arc::clone(stored));
                }
                let stored = Arc::new(self.upload(dev, words, 1)?);
                whole.insert((i, dev.id), Arc::clone(&stored));
                Ok(stored)
            }
            (Operand::Resident(_), _, _) => {
                Err(Error::Internal("resident operand without snapshot".into()))
            }
        }
    }

    /// `words` put on `dev`, recorded as an upload of `items` rows.
    fn upload(&self, dev: &GpuDevice, words: &[f32], items: usize) -> Result<Storage> {
        let started = Instant::now();
        let stored = shards_of(dev).put(dev, words)?;
        if let Some((p, call)) = self.recording {
            record(
                p,
                *call,
                dev.id,
                Kind::Upload,
                started,
                words.len() * 4,
                items,
            );
        }
        Ok(stored)
    }
}

impl Pieces for RowPieces<'_> {
    fn items(&self, piece: usize) -> usize {
        self.layout[piece].1.len()
    }

    fn begin(&self, dev: &GpuDevice, piece: usize) -> Result<(Box<dyn Landing + '_>, Instant)> {
        let rows = &self.layout[piece].1;
        let mut repairs = Vec::new();
        let inputs = (0..self.operands.len())
            .map(|i| self.input(dev, i, rows, &mut repairs))
            .collect::<Result<Vec<_>>>()?;
        let submitted = Instant::now();
        let words = rows.len() * self.kernel.output_words_per_item();
        let held = self.ctx.resident.held_bytes(dev.id);
        shard::check_room(dev, (words * 4) as u64, held)?;
        let (out, unfinished) = shards_of(dev).run_shard(dev, self.kernel, &inputs, rows.len())?;
        let landed = Landed {
            pieces: self,
            piece,
            out,
            unfinished,
            repairs,
        };
        Ok((Box::new(landed), submitted))
    }
}

impl Landing for Landed<'_, '_> {
    fn land(self: Box<Self>, dev: &GpuDevice, timeout: Option<Duration>) -> Result<()> {
        let rows = self.pieces.layout[self.piece].1.clone();
        if let Some(unfinished) = self.unfinished {
            unfinished.finish(dev, &rows, timeout)?;
        }
        let shard = Shard {
            device: dev.id,
            rows,
            storage: Arc::new(self.out),
        };
        *self.pieces.made[self.piece]
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(shard);
        self.pieces
            .repairs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(self.repairs);
        Ok(())
    }
}

impl MultiGpuContext {
    /// Runs `pieces` of a resident call of `kernel` through the worker loop, on every
    /// healthy device able to run it: piece i starts in the queue of device `homes[i]` (of
    /// the substitute when that one has failed or cannot run the kernel).
    pub(super) fn run_pieces(
        &self,
        kernel: &Kernel,
        pieces: &dyn Pieces,
        homes: &[usize],
        recording: &Recording,
    ) -> Result<()> {
        let workers: Vec<&GpuDevice> = (self.devices.iter())
            .filter(|d| d.health.is_healthy() && d.can_run(kernel))
            .map(Arc::as_ref)
            .collect();
        let slot_of = |device: usize| workers.iter().position(|w| w.id == device);
        let mut own: Vec<VecDeque<usize>> = vec![VecDeque::new(); workers.len()];
        for (piece, home) in homes.iter().enumerate() {
            let slot = match slot_of(*home) {
                Some(slot) => slot,
                None => slot_of(self.substitute(kernel)?.id)
                    .ok_or_else(|| Error::Internal("the substitute is no worker".into()))?,
            };
            own[slot].push_back(piece);
        }
        let run = Run {
            inline: false,
            kernel,
            work: Work::Resident(pieces),
            scheduler: Scheduler::new(own, VecDeque::new(), vec![false; workers.len()]),
            timeout: self.options.sync_timeout_ms.map(Duration::from_millis),
            counted: true,
            recording: recording
                .as_ref()
                .map(|(profiler, call)| worker::Recording {
                    profiler: Arc::clone(profiler),
                    call: *call,
                    gpu_timed: Vec::new(),
                }),
            interrupt: interrupt::current(),
        };
        let reports = run.on(&workers);
        if run.scheduler.remaining() == 0 {
            return Ok(());
        }
        interrupt::check()?;
        // A worker that stopped with its device healthy stopped the call: its error is the
        // call's (every device would fail alike).
        let failed = workers.iter().zip(&reports);
        if let Some(error) = failed
            .clone()
            .find_map(|(d, r)| r.failure.as_ref().filter(|_| d.health.is_healthy()))
        {
            return Err(error.clone());
        }
        let failed = failed
            .filter_map(|(d, r)| r.failure.as_ref().map(|e| (d.id, e.to_string())))
            .collect();
        Err(self.no_healthy_device_after(failed))
    }
}
