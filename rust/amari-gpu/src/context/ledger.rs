//! Where a context keeps its resident arrays: each live array's shards and lineage, under
//! an id its handles carry. Held bytes per device are summed from here; closing the context
//! clears it, which releases every shard before the devices go.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::lineage::Lineage;
use super::shard::{Shard, Storage};
use crate::error::Error;

/// What the context holds of one resident array.
pub(crate) struct Entry {
    /// f32 words per row.
    pub(crate) cols: usize,
    /// Its shards, in row order, covering every row once.
    pub(crate) shards: Vec<Shard>,
    /// How to compute it again from host data.
    pub(crate) lineage: Arc<Lineage>,
}

/// The resident arrays of one context.
#[derive(Default)]
pub struct Ledger {
    entries: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
}

impl Ledger {
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `entry`; returns its id.
    pub(crate) fn insert(&self, entry: Entry) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, entry);
        id
    }

    /// Drops array `id`'s shards (nothing if already gone).
    pub(crate) fn remove(&self, id: u64) {
        let removed = self.lock().remove(&id);
        drop(removed);
    }

    /// Drops every array's shards (the context is closing).
    pub fn clear(&self) {
        let all: Vec<Entry> = self.lock().drain().map(|(_, e)| e).collect();
        drop(all);
    }

    /// Bytes held by live resident arrays on device `device`.
    pub fn held_bytes(&self, device: usize) -> u64 {
        self.held(device, |_| true)
    }

    /// The part of [`Ledger::held_bytes`] kept in host memory (shards of the host device),
    /// which no buffer pool counts.
    pub fn host_held_bytes(&self, device: usize) -> u64 {
        self.held(device, |s| matches!(*s.storage, Storage::Host(_)))
    }

    fn held(&self, device: usize, counts: impl Fn(&Shard) -> bool) -> u64 {
        self.lock()
            .values()
            .flat_map(|e| e.shards.iter().map(move |s| (s, e.cols)))
            .filter(|(s, _)| s.device == device && counts(s))
            .map(|(s, cols)| s.bytes(cols))
            .sum()
    }

    /// The error of a handle whose array is gone: freed, or its context closed.
    pub(crate) fn gone(argument: &str) -> Error {
        Error::invalid(
            argument,
            "expected a live DeviceArray, got one that was freed (or whose context was closed)",
        )
    }
}
