//! Device-resident arrays: rows sharded over a context's devices as a plan placed them,
//! each shard a buffer on the device that holds it (a `Vec<f32>` on the host device). Row
//! kernels run on the shards where they live and produce new resident arrays with the same
//! sharding; nothing crosses to the host until [`MultiGpuContext::gather`]. Shards lost with
//! a device are rebuilt from the array's lineage ([`lineage`]).
//!
//! An array is a handle ([`ResidentArray`]) on an entry of the context's [`Ledger`]; dropping
//! the handle or closing the context releases the shards.

mod ledger;
mod lineage;
mod place;
mod run;
mod shard;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use ledger::Ledger;
pub use run::Operand;

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::plan::Strategy;
use crate::profile::Kind;
use crate::workload::Workload;
use ledger::Entry;
use lineage::Lineage;
use shard::{Shard, Storage};

/// A handle on a resident array of `rows` × `cols` f32 words. Dropping it releases the
/// array's shards.
pub struct ResidentArray {
    id: u64,
    rows: usize,
    cols: usize,
    ledger: Arc<Ledger>,
}

impl Drop for ResidentArray {
    fn drop(&mut self) {
        self.ledger.remove(self.id);
    }
}

impl std::fmt::Debug for ResidentArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ResidentArray({}, {})", self.rows, self.cols)
    }
}

impl ResidentArray {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// f32 words per row.
    pub fn cols(&self) -> usize {
        self.cols
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
    fn snapshot(&self, ledger: &Arc<Ledger>, argument: &str) -> Result<Snapshot> {
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

impl MultiGpuContext {
    /// Uploads `data` (`cols` words per row) into row shards placed by `strategy` (the
    /// context's default when `None`) as a geometric-algebra map over the rows would be.
    /// The array keeps a host copy of `data` as its lineage (to rebuild lost shards).
    pub fn upload(
        &self,
        data: &[f32],
        cols: usize,
        strategy: Option<Strategy>,
    ) -> Result<ResidentArray> {
        if cols == 0 || data.len() % cols != 0 {
            return Err(Error::Shape {
                argument: "x".into(),
                expected: format!("(N, {cols}) with {cols} > 0"),
                actual: format!("{} floats", data.len()),
            });
        }
        let rows = data.len() / cols;
        let mut source: Vec<f32> = crate::alloc::zeroed("x (lineage copy)", data.len())?;
        source.copy_from_slice(data);
        let source = Arc::new(source);
        let mut shards = Vec::new();
        if rows > 0 {
            let workload = Workload {
                kernel: "geometric_algebra/resident".into(),
                family: Some(Family::GeometricAlgebra),
                items: rows as u64,
                bytes_in_per_item: 4.0 * cols as f64,
                bytes_out_per_item: 4.0 * cols as f64,
                flops_per_item: 2.0 * (cols * cols) as f64,
            };
            let plan = self.distribute_workload(&workload, strategy)?;
            let recording = self.resident_call("resident/upload", rows);
            for a in &plan.assignments {
                let range = a.start as usize..a.stop as usize;
                let dev = self.device(a.device)?;
                let words = &data[range.start * cols..range.end * cols];
                shard::check_room(
                    dev,
                    (words.len() * 4) as u64,
                    self.resident.held_bytes(dev.id),
                )?;
                let started = Instant::now();
                let storage = shard::put(dev, words)?;
                if let Some((p, call)) = &recording {
                    place::record(
                        p,
                        *call,
                        dev.id,
                        Kind::Upload,
                        started,
                        words.len() * 4,
                        range.len(),
                    );
                }
                shards.push(Shard {
                    device: dev.id,
                    rows: range,
                    storage: Arc::new(storage),
                });
            }
        }
        let id = self.resident.insert(Entry {
            cols,
            shards,
            lineage: Arc::new(Lineage::Source { data: source, cols }),
        });
        Ok(ResidentArray {
            id,
            rows,
            cols,
            ledger: Arc::clone(&self.resident),
        })
    }

    /// Copies every row of `array` into `out` (`rows × cols` words), shard by shard, each
    /// straight from its device. Shards on failed devices are rebuilt from the lineage.
    pub fn gather(&self, array: &ResidentArray, out: &mut [f32]) -> Result<()> {
        let snapshot = array.snapshot(&self.resident, "x")?;
        let cols = array.cols;
        if out.len() != array.rows * cols {
            return Err(Error::Shape {
                argument: "out".into(),
                expected: format!("({}, {cols})", array.rows),
                actual: format!("{} floats", out.len()),
            });
        }
        let timeout = self.options.sync_timeout_ms.map(Duration::from_millis);
        let recording = self.resident_call("resident/gather", array.rows);
        let mut rest = out;
        for (device, rows, storage) in &snapshot.shards {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(rows.len() * cols);
            rest = tail;
            let dev = self.device(*device)?;
            let started = Instant::now();
            let read = if dev.health.is_healthy() {
                shard::read(dev, storage, 0..head.len(), head, timeout)
            } else {
                Err(Error::DeviceLost {
                    device: dev.id,
                    reason: dev.health.reason().unwrap_or_default(),
                })
            };
            if let Err(error) = read {
                if !matches!(error, Error::DeviceLost { .. }) {
                    return Err(error);
                }
                dev.health.mark_failed(&error.to_string());
                head.copy_from_slice(&snapshot.lineage.replay(self, rows.clone())?);
                continue;
            }
            if let Some((p, call)) = &recording {
                place::record(
                    p,
                    *call,
                    dev.id,
                    Kind::Readback,
                    started,
                    head.len() * 4,
                    rows.len(),
                );
            }
        }
        Ok(())
    }

    /// Bytes held by live resident arrays on each device, by device id.
    pub fn resident_bytes(&self) -> Vec<u64> {
        self.devices
            .iter()
            .map(|d| self.resident.held_bytes(d.id))
            .collect()
    }
}
