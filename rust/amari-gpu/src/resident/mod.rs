//! Device-resident arrays: rows sharded over a context's devices as a plan placed them,
//! each shard a buffer on the device that holds it (a `Vec<f32>` on the host device). Row
//! kernels run on the shards where they live and produce new resident arrays with the same
//! sharding; nothing crosses to the host until [`MultiGpuContext::gather`]. Shards lost with
//! a device are rebuilt from the array's lineage ([`lineage`]).
//!
//! An array is a handle ([`ResidentArray`]) on an entry of the context's [`ledger::Ledger`];
//! dropping the handle or closing the context releases the shards.

mod array;
mod chunks;
mod output;
mod pieces;
mod place;
mod run;
mod split;
mod take;

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use array::ResidentArray;
pub use output::{Destination, Outcome, Ready};
pub use pieces::Operand;

// The storage of resident arrays belongs to the context that owns them (it frees them on
// close and counts their bytes); the operations on them are here.
use crate::context::{ledger, lineage, shard, MultiGpuContext};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::plan::{Plan, Strategy};
use crate::profile::Kind;
use crate::workload::Workload;
use ledger::Entry;
use lineage::Lineage;
use shard::{shards_of, Shard};

impl MultiGpuContext {
    /// Uploads `data` (`cols` float32 words per row) into row shards placed by `strategy`
    /// (the context's default when `None`): [`upload_in`](Self::upload_in) of float32.
    pub fn upload(
        &self,
        data: &[f32],
        cols: usize,
        strategy: Option<Strategy>,
    ) -> Result<ResidentArray> {
        self.upload_in(data, cols, Dtype::F32, strategy)
            .map(|(array, _)| array)
    }

    /// Uploads `data` (`cols` words per row, holding values of `dtype`) into row shards
    /// placed by `strategy` (the context's default when `None`) as a geometric-algebra map
    /// over the rows would be, on the devices that run `dtype` only. Returns the array and
    /// the placement (`None` for no rows), whose `left_out` names the devices skipped and
    /// why. The array keeps a host copy of `data` as its lineage (to rebuild lost shards).
    pub fn upload_in(
        &self,
        data: &[f32],
        cols: usize,
        dtype: Dtype,
        strategy: Option<Strategy>,
    ) -> Result<(ResidentArray, Option<Plan>)> {
        if cols == 0 || !data.len().is_multiple_of(cols) {
            return Err(Error::Shape {
                argument: "x".into(),
                expected: format!("(N, {cols}) with {cols} > 0"),
                actual: format!("{} floats", data.len()),
            });
        }
        if let Some(error) = self.no_device_runs_dtype(dtype) {
            return Err(error);
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
                dtype,
            };
            Some(self.distribute_workload(&workload, strategy)?)
        } else {
            None
        };
        let layout: Vec<(usize, Range<usize>)> = plan.as_ref().map_or_else(Vec::new, |p| {
            p.assignments
                .iter()
                .map(|a| (a.device, a.start as usize..a.stop as usize))
                .collect()
        });
        let array = self.put_rows(data, (cols, dtype), &layout)?;
        Ok((array, plan))
    }

    /// Uploads `data` (`cols` words per row, as many rows as `like`) into shards on the
    /// devices holding `like`'s rows, so a kernel reading both finds them side by side;
    /// rows of a failed device (or of one that cannot run `kernel`) go to a substitute.
    /// Errors name `argument`.
    pub fn upload_like(
        &self,
        data: &[f32],
        cols: usize,
        like: &ResidentArray,
        kernel: &crate::kernel::Kernel,
        argument: &str,
    ) -> Result<ResidentArray> {
        if cols == 0 || data.len() != like.rows * cols {
            return Err(Error::Shape {
                argument: argument.into(),
                expected: format!("({}, {cols}) with {cols} > 0", like.rows),
                actual: format!("{} floats", data.len()),
            });
        }
        let layout = self.layout_like(like, kernel, argument)?;
        self.put_rows(data, (cols, kernel.dtype), &layout)
    }

    /// Writes `data` (a result computed on the host, `out`'s rows and width) in place of
    /// `out`'s shards, on the devices holding them (as a run of `kernel` into `out` would:
    /// rows of a failed device go to a substitute). Nothing in `out` changes if it fails.
    pub(crate) fn put_into(
        &self,
        out: &ResidentArray,
        data: &[f32],
        kernel: &crate::kernel::Kernel,
    ) -> Result<()> {
        if data.len() != out.rows * out.cols {
            return Err(Error::Shape {
                argument: "out".into(),
                expected: format!("({}, {}) (the result's)", out.rows, out.cols),
                actual: format!("{} floats", data.len()),
            });
        }
        run::check_dtype("out", out, kernel)?;
        let layout = self.layout_like(out, kernel, "out")?;
        let entry = self.put_entry(data, out.cols, &layout)?;
        self.replace_entry(out, entry)
    }

    /// The (device, rows) of `like`'s shards, a substitute for each device that failed or
    /// cannot run `kernel`.
    fn layout_like(
        &self,
        like: &ResidentArray,
        kernel: &crate::kernel::Kernel,
        argument: &str,
    ) -> Result<Vec<(usize, Range<usize>)>> {
        let snapshot = like.snapshot(&self.resident, argument)?;
        let mut layout = Vec::with_capacity(snapshot.shards.len());
        for (device, rows, _) in &snapshot.shards {
            let dev = self.device(*device)?;
            let id = if dev.health.is_healthy() && dev.can_run(kernel) {
                dev.id
            } else {
                self.substitute(kernel)?.id
            };
            layout.push((id, rows.clone()));
        }
        Ok(layout)
    }

    /// A resident array of `data` (`cols` words per row, values of `dtype`) with the shards
    /// `layout` lists (device, rows), keeping a host copy as its lineage.
    fn put_rows(
        &self,
        data: &[f32],
        (cols, dtype): (usize, Dtype),
        layout: &[(usize, Range<usize>)],
    ) -> Result<ResidentArray> {
        let entry = self.put_entry(data, cols, layout)?;
        let id = self.resident.insert(entry);
        Ok(ResidentArray {
            id,
            rows: data.len() / cols,
            cols,
            dtype,
            ledger: Arc::clone(&self.resident),
        })
    }

    /// The ledger entry of [`put_rows`](Self::put_rows): the shards put, not yet held.
    fn put_entry(
        &self,
        data: &[f32],
        cols: usize,
        layout: &[(usize, Range<usize>)],
    ) -> Result<Entry> {
        let rows = data.len() / cols;
        // Every shard checked against its device's room before anything is copied.
        let mut asked = vec![0u64; self.devices.len()];
        for (device, range) in layout {
            let dev = self.device(*device)?;
            let bytes = range.len() as u64 * cols as u64 * 4;
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
        let recording = if layout.is_empty() {
            None
        } else {
            self.resident_call("resident/upload", rows, None)
        };
        let mut shards = Vec::with_capacity(layout.len());
        for (device, range) in layout {
            let dev = self.device(*device)?;
            let words = &data[range.start * cols..range.end * cols];
            let started = Instant::now();
            let storage = shards_of(dev).put(dev, words)?;
            if let Some((p, call)) = &recording {
                let bytes = words.len() * 4;
                place::record(p, *call, dev.id, Kind::Upload, started, bytes, range.len());
            }
            shards.push(Shard {
                device: dev.id,
                rows: range.clone(),
                storage: Arc::new(storage),
            });
        }
        Ok(Entry {
            cols,
            shards,
            lineage: Arc::new(Lineage::Source { data: source, cols }),
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
        let recording = self.resident_call("resident/gather", array.rows, None);
        let mut rest = out;
        for (device, rows, storage) in &snapshot.shards {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(rows.len() * cols);
            rest = tail;
            let dev = self.device(*device)?;
            let started = Instant::now();
            let read = if dev.health.is_healthy() {
                storage.read(dev, 0, head, timeout)
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
