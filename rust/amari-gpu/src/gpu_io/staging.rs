//! The staging side of a submission: the mappable buffer its results are read back through,
//! with the kernel's GPU timestamps after them when it is timed (and when that is worth it).

use std::time::Duration;

use super::faults::{check_alive, lost};
use super::wait::{map_for_reading, wait_mapped_or_stop, Limit, Mapped};
use crate::device::GpuDevice;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::pool::Pooled;

/// The most a GPU timestamp may add to a kernel's time for profiled kernels to be timed with
/// timestamps unasked: some drivers (lavapipe among them) synchronise around every
/// timestamp, which would make the profile slow down the work it shows.
pub(crate) const TIMESTAMP_COST_SHARE: f64 = 0.03;

/// Whether profiled kernels of `kernel_s` seconds on a device are timed with GPU timestamps:
/// never without the feature (`supported`); as `forced` says when the caller set it; else
/// when a timestamp, as calibration measured it (`cost_s`, `None` when not measured), costs
/// under [`TIMESTAMP_COST_SHARE`] of the kernel.
pub(crate) fn timestamps_worth(
    supported: bool,
    forced: Option<bool>,
    cost_s: Option<f64>,
    kernel_s: f64,
) -> bool {
    match forced {
        Some(forced) => forced && supported,
        None => {
            supported && cost_s.is_some_and(|c| c >= 0.0 && c <= TIMESTAMP_COST_SHARE * kernel_s)
        }
    }
}

/// The staging side of one submission: a pooled mappable buffer that receives `out_bytes`
/// of results and, when the kernel is timed, its two GPU timestamps after them (8-byte
/// aligned), with the query set and resolve buffer that carry them there.
pub(crate) struct Staging {
    buffer: Pooled,
    out_bytes: u64,
    /// Bytes mapped: results and timestamps.
    bytes: u64,
    timestamps_at: Option<u64>,
    queries: Option<wgpu::QuerySet>,
    /// Kept until the submission completes.
    resolve: Option<Pooled>,
    mapped: Option<Mapped>,
}

impl Staging {
    /// Takes a staging buffer for `out_bytes` of results, with room for the timestamps when
    /// `stamped` and `dev` has them.
    pub(crate) fn new(dev: &GpuDevice, out_bytes: u64, stamped: bool) -> Self {
        let timestamps_at =
            (stamped && dev.timestamp_period_ns.is_some()).then(|| out_bytes.div_ceil(8) * 8);
        let bytes = timestamps_at.map_or(out_bytes, |at| at + 16).max(4);
        let buffer = dev.pool.take(
            &dev.gpu().device,
            bytes,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        Staging {
            buffer,
            out_bytes,
            bytes,
            timestamps_at,
            queries: timestamps_at.map(|_| dev.take_query_set()),
            resolve: None,
            mapped: None,
        }
    }

    /// The buffer results are copied into (from byte 0).
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Where the pass to time writes its timestamps, when timed.
    pub(crate) fn queries(&self) -> Option<&wgpu::QuerySet> {
        self.queries.as_ref()
    }

    /// Records the copy of the timed pass's two timestamps into the staging buffer, by way
    /// of a pooled resolve buffer. Call after the pass and its result copies.
    pub(crate) fn resolve_timestamps(
        &mut self,
        dev: &GpuDevice,
        encoder: &mut wgpu::CommandEncoder,
    ) {
        let (Some(query_set), Some(at)) = (&self.queries, self.timestamps_at) else {
            return;
        };
        let target = dev.pool.take(
            &dev.gpu().device,
            16,
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        );
        encoder.resolve_query_set(query_set, 0..2, &target, 0);
        encoder.copy_buffer_to_buffer(&target, 0, &self.buffer, at, 16);
        self.resolve = Some(target);
    }

    /// Requests the mapping for reading; call right after submitting.
    pub(crate) fn map(&mut self) {
        self.mapped = Some(map_for_reading(&self.buffer, self.bytes));
    }

    /// Waits for `submission` and the mapping under the context's `sync_timeout_ms`. On
    /// error discard the staging: the device may still write to it.
    pub(crate) fn wait(
        &self,
        dev: &GpuDevice,
        submission: wgpu::SubmissionIndex,
        timeout: Option<Duration>,
    ) -> Result<()> {
        self.wait_or_stop(dev, submission, timeout, None)
    }

    /// [`Staging::wait`], giving up with [`Error::Cancelled`] soon after `stop` is set (see
    /// [`wait_or_stop`]).
    pub(crate) fn wait_or_stop(
        &self,
        dev: &GpuDevice,
        submission: wgpu::SubmissionIndex,
        timeout: Option<Duration>,
        stop: Option<&Interrupt>,
    ) -> Result<()> {
        let mapped = self
            .mapped
            .as_ref()
            .ok_or_else(|| lost(dev.id, "readback was never requested"))?;
        wait_mapped_or_stop(dev, submission, mapped, Limit::Sync(timeout), stop)
    }

    /// Reads the mapped results with `read` and the kernel's begin and end in GPU ticks (when
    /// timed), then unmaps and gives the query set back; `Err` if the device was lost.
    pub(crate) fn read<T>(
        self,
        dev: &GpuDevice,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<(T, Option<(u64, u64)>)> {
        let (value, ticks) = {
            let view = self
                .buffer
                .slice(..self.bytes)
                .get_mapped_range()
                .map_err(|e| lost(dev.id, format!("readback mapping failed: {e}")))?;
            let value = read(&view[..self.out_bytes as usize]);
            let ticks = self.timestamps_at.map(|at| {
                let stamps: &[u64] = bytemuck::cast_slice(&view[at as usize..at as usize + 16]);
                (stamps[0], stamps[1])
            });
            (value, ticks)
        };
        self.buffer.unmap();
        drop(self.resolve);
        if let Some(queries) = self.queries {
            dev.give_back_query_set(queries);
        }
        check_alive(dev)?;
        Ok((value, ticks))
    }

    /// Destroys its buffers instead of pooling them: after a failure they may be in use.
    pub(crate) fn discard(self) {
        self.buffer.discard();
        if let Some(resolve) = self.resolve {
            resolve.discard();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_worth_it_under_the_share_or_when_forced() {
        assert!(timestamps_worth(true, None, Some(0.029), 1.0));
        assert!(!timestamps_worth(true, None, Some(0.031), 1.0));
        assert!(!timestamps_worth(true, None, None, 1.0));
        assert!(!timestamps_worth(true, None, Some(-1.0), 1.0));
        assert!(!timestamps_worth(false, None, Some(0.0), 1.0));
        assert!(timestamps_worth(true, Some(true), None, 0.0));
        assert!(!timestamps_worth(false, Some(true), None, 0.0));
        assert!(!timestamps_worth(true, Some(false), Some(0.0), 1.0));
    }
}
