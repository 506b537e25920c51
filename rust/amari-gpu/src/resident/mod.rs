//! Device-resident arrays: rows sharded over a context's devices as a plan placed them,
//! each shard a buffer on the device that holds it (a `Vec<f32>` on the host device). Row
//! kernels run on the shards where they live and produce new resident arrays with the same
//! sharding; nothing crosses to the host until [`MultiGpuContext::gather`]. Shards lost with
//! a device are rebuilt from the array's lineage ([`lineage`]).
//!
//! An array is a handle ([`ResidentArray`]) on an entry of the context's [`ledger::Ledger`]; dropping
//! the handle or closing the context releases the shards.

mod array;
mod chunks;
mod dispatch;
pub(crate) mod ledger;
mod lineage;
mod place;
mod run;
mod shard;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use array::ResidentArray;
pub use run::Operand;

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::plan::Strategy;
use crate::profile::Kind;
use crate::workload::Workload;
use ledger::Entry;
use lineage::Lineage;
use shard::Shard;

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
        if cols == 0 || !data.len().is_multiple_of(cols) {
            return Err(Error::Shape {
                argument: "x".into(),
                expected: format!("(N, {cols}) with {cols} > 0"),
                actual: format!("{} floats", data.len()),
            });
        }
        let rows = data.len() / cols;
        let plan = if rows > 0 {
            let workload = Workload {
                kernel: "geometric_algebra/resident".into(),
                family: Some(Family::GeometricAlgebra),
                items: rows as u64,
                bytes_in_per_item: 4.0 * cols as f64,
                bytes_out_per_item: 4.0 * cols as f64,
                flops_per_item: 2.0 * (cols * cols) as f64,
            };
            Some(self.distribute_workload(&workload, strategy)?)
        } else {
            None
        };
        let assignments = plan.as_ref().map_or(&[][..], |p| &p.assignments[..]);
        // Every shard checked against its device's room before anything is copied.
        let mut asked = vec![0u64; self.devices.len()];
        for a in assignments {
            let dev = self.device(a.device)?;
            let bytes = a.items * cols as u64 * 4;
            shard::check_room(dev, bytes, self.resident.held_bytes(dev.id) + asked[dev.id])?;
            asked[dev.id] += bytes;
        }
        // One pass: reserved (fallibly, the size is the caller's) and filled by the copy.
        let mut source: Vec<f32> = Vec::new();
        source
            .try_reserve_exact(data.len())
            .map_err(|_| Error::HostOutOfMemory {
                argument: "x (lineage copy)".into(),
                bytes: (data.len() * 4) as u128,
            })?;
        source.extend_from_slice(data);
        let source = Arc::new(source);
        let recording = plan
            .as_ref()
            .and_then(|_| self.resident_call("resident/upload", rows));
        let mut shards = Vec::with_capacity(assignments.len());
        for a in assignments {
            let range = a.start as usize..a.stop as usize;
            let dev = self.device(a.device)?;
            let words = &data[range.start * cols..range.end * cols];
            let started = Instant::now();
            let storage = shard::put(dev, words)?;
            if let Some((p, call)) = &recording {
                let bytes = words.len() * 4;
                place::record(p, *call, dev.id, Kind::Upload, started, bytes, range.len());
            }
            shards.push(Shard {
                device: dev.id,
                rows: range,
                storage: Arc::new(storage),
            });
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
                head.copy_from_slice(&snapshot.lineage.replay(&self.replayer(), rows.clone())?);
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

    /// The engine as lineage replay runs it: per-item kernels over host rows, on the healthy
    /// devices, with the context's default strategy.
    fn replayer(
        &self,
    ) -> impl Fn(&crate::kernel::Kernel, &[&[f32]], &mut [f32], usize) -> Result<()> + '_ {
        move |kernel, inputs, out, items| {
            self.run(
                kernel,
                inputs,
                crate::context::Target::Items(out),
                items,
                None,
            )
            .map(|_| ())
        }
    }

    /// Bytes held by live resident arrays on each device, by device id.
    pub fn resident_bytes(&self) -> Vec<u64> {
        self.devices
            .iter()
            .map(|d| self.resident.held_bytes(d.id))
            .collect()
    }
}
