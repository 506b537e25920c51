//! The handle on a resident array ([`ResidentArray`]): its shape, sharding and lifetime; the
//! shards themselves are in the context's [`Ledger`].

use std::sync::Arc;

use crate::context::ledger::Ledger;
use crate::context::lineage::Lineage;
use crate::context::shard::Storage;
use crate::dtype::Dtype;
use crate::error::{Error, Result};

/// A handle on a resident array of `rows` × `cols` 4-byte words holding values of `dtype`
/// (see `crate::dtype`: a float64 value is two words, float16 values two to a word).
/// Dropping it releases the array's shards.
pub struct ResidentArray {
    pub(crate) id: u64,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) dtype: Dtype,
    pub(crate) ledger: Arc<Ledger>,
}

impl Drop for ResidentArray {
    fn drop(&mut self) {
        self.ledger.remove(self.id);
    }
}

impl std::fmt::Debug for ResidentArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ResidentArray({}, {}, {})",
            self.rows, self.cols, self.dtype
        )
    }
}

impl ResidentArray {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// 4-byte words per row.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// The dtype of its values: kernels of that dtype read it, and it lives only on
    /// devices that run that dtype.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// Whether its shards are still held (not freed, context not closed).
    pub fn is_live(&self) -> bool {
        self.ledger.lock().contains_key(&self.id)
    }
    /// Releases its shards now; the handle stays, and using it is an error.
    pub fn free(&self) {
        self.ledger.remove(self.id);
    }
    /// `(device, start_row, stop_row)` of every shard, in row order; an error naming
    /// `argument` if the array is gone.
    pub fn sharding(&self, argument: &str) -> Result<Vec<(usize, usize, usize)>> {
        let entries = self.ledger.lock();
        let entry = entries
            .get(&self.id)
            .ok_or_else(|| Ledger::gone(argument))?;
        Ok(entry
            .shards
            .iter()
            .map(|s| (s.device, s.rows.start, s.rows.end))
            .collect())
    }
    /// Bytes of host memory its lineage keeps to rebuild lost shards.
    pub fn lineage_host_bytes(&self) -> u64 {
        self.ledger
            .lock()
            .get(&self.id)
            .map_or(0, |e| e.lineage.host_bytes())
    }
    /// The array's shards (device, rows, storage) and lineage, if it is live and belongs to
    /// `ledger`; otherwise an error naming `argument`.
    pub(crate) fn snapshot(&self, ledger: &Arc<Ledger>, argument: &str) -> Result<Snapshot> {
        if !Arc::ptr_eq(&self.ledger, ledger) {
            return Err(Error::invalid(
                argument,
                "expected a DeviceArray of this context, got one of another context",
            ));
        }
        let entries = self.ledger.lock();
        let entry = entries
            .get(&self.id)
            .ok_or_else(|| Ledger::gone(argument))?;
        Ok(Snapshot {
            shards: entry
                .shards
                .iter()
                .map(|s| (s.device, s.rows.clone(), Arc::clone(&s.storage)))
                .collect(),
            lineage: Arc::clone(&entry.lineage),
        })
    }
}

/// A resident array's shards at one moment: (device, rows, storage), in row order.
pub(crate) struct Snapshot {
    pub(crate) shards: Vec<(usize, std::ops::Range<usize>, Arc<Storage>)>,
    pub(crate) lineage: Arc<Lineage>,
}
