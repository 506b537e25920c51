//! Running a row kernel (any [`Kernel`] with a per-item output) on resident operands: for
//! each shard of the first resident operand, the kernel runs on the device holding those
//! rows and writes a new shard there. Host operands are uploaded to match; resident ones
//! sharded differently are brought over by [`MultiGpuContext::assemble`]. The shards are
//! pieces of the one worker loop (`pieces`): a device that fails (or whose injected fault is
//! due) is marked failed and its pieces go to the others, lost rows rebuilt from their
//! lineage; kernels are per row, so the result is the same whichever device ran which rows.

use std::sync::Arc;

use super::array::ResidentArray;
use super::pieces::{Operand, Placed, Repair, RowPieces};
use crate::context::ledger::Entry;
use crate::context::lineage::{Lineage, Origin};
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel, Output};

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
            dtype: kernel.dtype,
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
        check_dtype("out", out, kernel)?;
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
    /// cannot hold move elsewhere), each shard's rows a piece of the worker loop (see
    /// `pieces`): a device that fails hands its pieces to the others. Returns the result's
    /// ledger entry.
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
        let recording = self.resident_call(
            &format!("{}/{}", kernel.family, kernel.id),
            rows,
            Some(kernel),
        );
        let (shards, repairs) =
            RowPieces::new(self, kernel, operands, layout, &recording)?.run()?;
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
    pub(super) fn keep_repairs(&self, operands: &[(&str, Operand<'_>)], repairs: Vec<Repair>) {
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
                    check_dtype(name, a, kernel)?;
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
}

/// Checks that resident array `array` (named `argument`) holds values of `kernel`'s dtype:
/// its words mean nothing to a kernel of another dtype.
pub(super) fn check_dtype(argument: &str, array: &ResidentArray, kernel: &Kernel) -> Result<()> {
    if array.dtype == kernel.dtype {
        return Ok(());
    }
    Err(Error::invalid(
        argument,
        format!(
            "expected a DeviceArray of {} (the dtype {} computes in), got one of {}",
            kernel.dtype, kernel.id, array.dtype
        ),
    ))
}
