//! Putting an operand's rows where a kernel needs them: the shard itself when it already
//! sits on that device with those rows; otherwise a new shard assembled from the overlapping
//! shards — copied on the device when they share it, moved through the host when they do
//! not, replayed from the lineage when their device failed (or fails as they are read). Also: which device takes the
//! rows of a failed one, and the profile events of resident calls.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::array::Snapshot;
use crate::context::shard::{self, shards_of, Storage};
use crate::context::MultiGpuContext;
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::profile::{CallRecord, Clock, Event, Kind, Profiler};

/// The active profile and the index of a resident call in it.
pub(crate) type Recording = Option<(Arc<Profiler>, u64)>;

impl MultiGpuContext {
    /// Opens a call record named `label` in the active profile, if any, with the cost model
    /// of the `kernel` it runs (none for an upload or a gather).
    pub(crate) fn resident_call(
        &self,
        label: &str,
        rows: usize,
        kernel: Option<&Kernel>,
    ) -> Recording {
        let profiler = self.active_profile()?;
        let call = profiler.call(CallRecord {
            kernel: label.to_string(),
            items: rows as u64,
            flops_per_item: kernel.map_or(0.0, |k| k.flops_per_item),
            bytes_per_item: kernel.map_or(0.0, |k| k.bytes_per_item() as f64),
            lower_bound_s: 0.0,
            estimated_makespan_s: 0.0,
            strategy: "resident".into(),
        });
        Some((profiler, call))
    }

    /// The device that takes rows whose device failed (or cannot run `kernel`): the healthy
    /// device able to run it that holds the fewest resident bytes (lowest id on ties).
    pub(crate) fn substitute(&self, kernel: &Kernel) -> Result<&GpuDevice> {
        self.devices
            .iter()
            .filter(|d| d.health.is_healthy() && d.can_run(kernel))
            .min_by_key(|d| (self.resident.held_bytes(d.id), d.id))
            .map(Arc::as_ref)
            .ok_or_else(|| {
                if self.devices.iter().any(|d| d.health.is_healthy()) {
                    self.no_device_runs(kernel)
                } else {
                    self.no_healthy_device()
                }
            })
    }

    /// Rows `rows` of the array `from` (`cols` words per row) on `dev`: its own shard when
    /// one holds exactly those rows there on a healthy device, else a new one assembled from
    /// the overlapping shards. Returns the storage and the bytes that crossed the host.
    pub(crate) fn assemble(
        &self,
        dev: &GpuDevice,
        from: &Snapshot,
        rows: &Range<usize>,
        cols: usize,
        recording: &Recording,
    ) -> Result<(Arc<Storage>, u64)> {
        let healthy = |id: usize| self.devices[id].health.is_healthy();
        if let Some((_, _, storage)) = from
            .shards
            .iter()
            .find(|(d, r, _)| *d == dev.id && r == rows && healthy(*d))
        {
            return Ok((Arc::clone(storage), 0));
        }
        let timeout = self.options.sync_timeout_ms.map(Duration::from_millis);
        let words = rows.len() * cols;
        shard::check_room(dev, (words * 4) as u64, self.resident.held_bytes(dev.id))?;
        let mut staged: Vec<f32> = crate::alloc::zeroed("resharded rows", words)?;
        let mut on_device = Vec::new();
        let mut moved = 0;
        for shard in &from.shards {
            let (device, have, storage) = shard;
            let overlap = have.start.max(rows.start)..have.end.min(rows.end);
            if overlap.is_empty() {
                continue;
            }
            let src = &self.devices[*device];
            let into = (overlap.start - rows.start) * cols..(overlap.end - rows.start) * cols;
            let local = (overlap.start - have.start) * cols..(overlap.end - have.start) * cols;
            let same_device = *device == dev.id && shards_of(dev).copies_within();
            if same_device && healthy(*device) {
                on_device.push((Arc::clone(storage), local, into));
                continue;
            }
            let started = Instant::now();
            let target = &mut staged[into.clone()];
            self.shard_rows(from, shard, cols, overlap.clone(), target, timeout)?;
            moved += (into.len() * 4) as u64;
            if let Some((p, call)) = recording {
                record(
                    p,
                    *call,
                    src.id,
                    Kind::Readback,
                    started,
                    into.len() * 4,
                    overlap.len(),
                );
            }
        }
        let started = Instant::now();
        let mut storage = shards_of(dev).put(dev, &staged)?;
        if moved > 0 {
            if let Some((p, call)) = recording {
                record(
                    p,
                    *call,
                    dev.id,
                    Kind::Upload,
                    started,
                    moved as usize,
                    rows.len(),
                );
            }
        }
        shards_of(dev).copy_within(dev, &mut storage, &on_device)?;
        Ok((Arc::new(storage), moved))
    }

    /// Rows `overlap` of `from`, held by its `shard` (device, rows, storage; `cols` words
    /// per row), into `out` on the host: read from the shard, or rebuilt from the lineage
    /// when its device failed (before the read or during it: it is then marked failed).
    pub(crate) fn shard_rows(
        &self,
        from: &Snapshot,
        shard: &(usize, Range<usize>, Arc<Storage>),
        cols: usize,
        overlap: Range<usize>,
        out: &mut [f32],
        timeout: Option<Duration>,
    ) -> Result<()> {
        let (device, have, storage) = shard;
        let src = self.device(*device)?;
        let read = if src.health.is_healthy() {
            storage.read(src, (overlap.start - have.start) * cols, out, timeout)
        } else {
            Err(Error::DeviceLost {
                device: src.id,
                reason: src.health.reason().unwrap_or_default(),
            })
        };
        match read {
            Err(error @ Error::DeviceLost { .. }) => {
                src.health.mark_failed(&error.to_string());
                out.copy_from_slice(&from.lineage.replay(&self.replayer(), overlap)?);
                Ok(())
            }
            other => other,
        }
    }
}

/// Records one step of a resident call on device `device`, timed on the host from `started`
/// to now.
pub(crate) fn record(
    p: &Profiler,
    call: u64,
    device: usize,
    kind: Kind,
    started: Instant,
    bytes: usize,
    items: usize,
) {
    p.push(Event {
        device: Some(device),
        kind,
        chunk: None,
        call,
        start_s: p.at(started),
        duration_s: started.elapsed().as_secs_f64(),
        bytes: bytes as u64,
        items: items as u64,
        clock: Clock::Host,
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::context::shard::shards_of;
    use crate::context::MultiGpuContext;

    /// A shard takes words from shards on its own device through the device interface, on a
    /// wgpu device and on the host device alike.
    #[test]
    fn a_shard_copies_words_from_shards_on_its_own_device() {
        let ctx = MultiGpuContext::on(&["vulkan", "host"]);
        for dev in ctx.devices() {
            let kind = shards_of(dev);
            let a = Arc::new(kind.put(dev, &[1.0, 2.0, 3.0, 4.0]).expect("put"));
            let b = Arc::new(kind.put(dev, &[5.0, 6.0]).expect("put"));
            let mut target = kind.put(dev, &[0.0; 6]).expect("put");
            let pieces = [(a, 1..4, 0..3), (b, 0..2, 4..6)];
            kind.copy_within(dev, &mut target, &pieces).expect("copied");
            let mut out = [9.0f32; 6];
            target.read(dev, 0, &mut out, None).expect("read");
            assert_eq!(out, [2.0, 3.0, 4.0, 0.0, 5.0, 6.0], "device {}", dev.id);
        }
    }
}
