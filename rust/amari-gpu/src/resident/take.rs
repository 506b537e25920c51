//! A run of an array's rows as a new array (`x[a:b]` and `x[i]` of a DeviceArray): a
//! resident copy, not a view, so it outlives the array it came from and no kernel needs to
//! know of offsets. Each shard's part of the run stays on the shard's device: the shard
//! itself when it holds exactly those rows (shared storage: shards are never written after
//! they are made, so nothing is copied), else a copy made on that device. Rows of a failed
//! device are read from the lineage onto a healthy one; the new array's lineage is its
//! parent's, offset, so rows it later loses are computed again the same way.

use std::ops::Range;
use std::sync::Arc;

use super::array::ResidentArray;
use crate::context::ledger::Entry;
use crate::context::lineage::Lineage;
use crate::context::shard::Shard;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};

impl MultiGpuContext {
    /// Rows `rows` of `array` as a new resident array, each shard's part on its device.
    pub fn take_rows(&self, array: &ResidentArray, rows: Range<usize>) -> Result<ResidentArray> {
        let snapshot = array.snapshot(&self.resident, "x")?;
        if rows.start > rows.end || rows.end > array.rows {
            return Err(Error::invalid(
                "rows",
                format!(
                    "expected a range within 0..{}, got {}..{}",
                    array.rows, rows.start, rows.end
                ),
            ));
        }
        let cols = array.cols;
        let recording = if rows.is_empty() {
            None
        } else {
            self.resident_call("resident/take_rows", rows.len(), None)
        };
        let mut shards = Vec::with_capacity(snapshot.shards.len());
        for (device, have, _) in &snapshot.shards {
            let overlap = have.start.max(rows.start)..have.end.min(rows.end);
            if overlap.is_empty() {
                continue;
            }
            let held = self.device(*device)?;
            // A failed device's rows go to a healthy device that runs the array's dtype
            // (any kernel of that dtype can read them there).
            let dev = if held.health.is_healthy() {
                held
            } else {
                self.devices
                    .iter()
                    .map(Arc::as_ref)
                    .filter(|d| d.health.is_healthy() && d.runs(array.dtype))
                    .min_by_key(|d| (self.resident.held_bytes(d.id), d.id))
                    .ok_or_else(|| self.no_healthy_device())?
            };
            let (storage, _) = self.assemble(dev, &snapshot, &overlap, cols, &recording)?;
            shards.push(Shard {
                device: dev.id,
                rows: overlap.start - rows.start..overlap.end - rows.start,
                storage,
            });
        }
        let entry = Entry {
            cols,
            shards,
            lineage: Arc::new(Lineage::Offset {
                inner: Arc::clone(&snapshot.lineage),
                start: rows.start,
            }),
        };
        drop(snapshot);
        let id = self.resident.insert(entry);
        Ok(ResidentArray {
            id,
            rows: rows.len(),
            cols,
            dtype: array.dtype,
            ledger: Arc::clone(&self.resident),
        })
    }
}
