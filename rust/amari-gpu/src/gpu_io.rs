//! The wgpu calls every path to a device shares — the engine's chunks, a domain's rounds,
//! calibration and the raw baseline: how a device fault becomes this crate's error, error
//! scopes, bindings and bind groups, encoding a dispatch, uploads, the staging buffer a
//! submission is read back through (with the kernel's GPU timestamps after the results),
//! and waiting for a submission under the timeout rule. Timeout and fault handling are
//! defined here and nowhere else.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::kernel::Kernel;
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

/// The error of a device that failed or stopped answering.
pub(crate) fn lost(device: usize, reason: impl Into<String>) -> Error {
    Error::DeviceLost {
        device,
        reason: reason.into(),
    }
}

/// `Err` if the device is already known to be lost.
pub(crate) fn check_alive(dev: &GpuDevice) -> Result<()> {
    match dev.lost_reason() {
        Some(reason) => Err(lost(dev.id, reason)),
        None => Ok(()),
    }
}

/// Maps a wgpu error caught in a scope to the core error of device `device`.
fn scoped_error(device: usize, error: wgpu::Error) -> Error {
    match error {
        wgpu::Error::OutOfMemory { .. } => Error::OutOfMemory {
            device,
            reason: error.to_string(),
        },
        other => lost(device, other.to_string()),
    }
}

/// The error scopes around one submission's commands: out of memory outside validation.
pub(crate) struct Scopes {
    // Fields drop in declaration order, and an unclosed guard pops its scope when dropped:
    // the scope pushed last (validation) must come first, or an early return (`?` between
    // open and close) pops them out of order and wgpu panics.
    validation: wgpu::ErrorScopeGuard,
    oom: wgpu::ErrorScopeGuard,
}

impl Scopes {
    /// Opens both scopes on `dev` (on this thread: wgpu keeps error scopes per thread).
    pub(crate) fn open(dev: &GpuDevice) -> Self {
        let device = &dev.gpu().device;
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
        Scopes { oom, validation }
    }

    /// Closes both; the first error caught, as this crate's error. Native wgpu reports errors
    /// at the call, so the scopes can be closed as soon as the work is submitted.
    pub(crate) fn close(self, device: usize) -> Result<()> {
        if let Some(error) = pollster::block_on(self.validation.pop()) {
            return Err(scoped_error(device, error));
        }
        if let Some(error) = pollster::block_on(self.oom.pop()) {
            return Err(scoped_error(device, error));
        }
        Ok(())
    }
}

/// A whole-buffer-prefix binding of exactly `bytes`.
pub(crate) fn binding(index: u32, buffer: &wgpu::Buffer, bytes: u64) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding: index,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset: 0,
            size: wgpu::BufferSize::new(bytes),
        }),
    }
}

/// A bind group of `buffers`, each bound whole at its index.
pub(crate) fn bind_whole(
    dev: &GpuDevice,
    label: &str,
    layout: &wgpu::BindGroupLayout,
    buffers: &[wgpu::Buffer],
) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| binding(i as u32, b, b.size()))
        .collect();
    let device = &dev.gpu().device;
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(label),
        layout,
        entries: &entries,
    })
}

/// An unpooled buffer of `bytes`.
pub(crate) fn buffer(
    dev: &GpuDevice,
    label: &str,
    bytes: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    dev.gpu().device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes,
        usage,
        mapped_at_creation: false,
    })
}

/// A storage buffer of `bytes` that a kernel or copy writes, and the unpooled mappable
/// buffer of the same size it is read back through.
pub(crate) fn readback_buffers(
    dev: &GpuDevice,
    label: &str,
    bytes: u64,
) -> (wgpu::Buffer, wgpu::Buffer) {
    let source = buffer(
        dev,
        label,
        bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
    );
    let staging = buffer(
        dev,
        label,
        bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    (source, staging)
}

/// A pooled storage buffer holding `data` (at least one word), and its bytes.
pub(crate) fn upload(dev: &GpuDevice, data: &[f32]) -> (Pooled, u64) {
    let bytes = (data.len().max(1) * 4) as u64;
    let buffer = dev.pool.take(
        &dev.gpu().device,
        bytes,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    );
    let queue = &dev.gpu().queue;
    queue.write_buffer(&buffer, 0, bytemuck::cast_slice(data));
    (buffer, bytes)
}

/// The workgroup grid of `items` items of `kernel` on `dev` and the threads per row, or an
/// error naming `argument` when they do not fit one dispatch.
pub(crate) fn grid(
    dev: &GpuDevice,
    kernel: &Kernel,
    items: usize,
    argument: &str,
) -> Result<([u32; 3], u32)> {
    u32::try_from(items)
        .ok()
        .and_then(|n| kernel.grid(n, dev.limits.max_compute_workgroups_per_dimension))
        .ok_or_else(|| {
            Error::invalid(
                argument,
                format!("{items} items do not fit one dispatch on device {}", dev.id),
            )
        })
}

/// Records one compute pass that dispatches `pipeline` over `grid` with `bind_group`, its
/// begin and end written to `timestamps` when given.
pub(crate) fn dispatch(
    encoder: &mut wgpu::CommandEncoder,
    label: Option<&str>,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    grid: [u32; 3],
    timestamps: Option<&wgpu::QuerySet>,
) {
    let mut pass = begin_pass(encoder, label, timestamps);
    pass.set_pipeline(pipeline);
    pass.set_bind_group(0, bind_group, &[]);
    pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
}

/// Begins a compute pass whose begin and end are written to `timestamps` when given.
pub(crate) fn begin_pass<'e>(
    encoder: &'e mut wgpu::CommandEncoder,
    label: Option<&str>,
    timestamps: Option<&wgpu::QuerySet>,
) -> wgpu::ComputePass<'e> {
    encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label,
        timestamp_writes: timestamps.map(|query_set| wgpu::ComputePassTimestampWrites {
            query_set,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }),
    })
}

/// The outcome of mapping a buffer for reading, delivered once the device got there.
pub(crate) type Mapped = mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>;

/// Requests that `staging`'s first `bytes` be mapped for reading; the receiver gets the
/// outcome once the device has finished the work before it.
pub(crate) fn map_for_reading(staging: &wgpu::Buffer, bytes: u64) -> Mapped {
    let (sender, mapped) = mpsc::channel();
    staging
        .slice(..bytes)
        .map_async(wgpu::MapMode::Read, move |result| {
            // The receiver is gone only if the caller already gave up on this work.
            let _ = sender.send(result);
        });
    mapped
}

/// How long to wait for a device, and what to call that limit in the error.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Limit {
    /// The context's `sync_timeout_ms` (`None`: wait for as long as it takes).
    Sync(Option<Duration>),
    /// A fixed limit of the caller's own (calibration, the raw baseline).
    Fixed(Duration),
}

impl Limit {
    fn duration(self) -> Option<Duration> {
        match self {
            Limit::Sync(timeout) => timeout,
            Limit::Fixed(limit) => Some(limit),
        }
    }

    fn exceeded(self) -> String {
        match self {
            Limit::Sync(timeout) => format!(
                "no answer within sync_timeout_ms={}",
                timeout.map_or(0, |t| t.as_millis())
            ),
            Limit::Fixed(limit) => format!("no answer within {} ms", limit.as_millis()),
        }
    }
}

/// Longest single wait for a device. On GL, wgpu-hal holds the adapter's context lock for the
/// whole of a fence wait (up to 4.3 s per call), and every logical device of that adapter
/// shares the lock: one waiting for long work starved another, which wgpu-hal turns into a
/// panic after 6 s without it. Waiting in slices releases the lock between them.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Waits until `dev` has finished `submission` (all work when `None`), within `limit`.
pub(crate) fn wait(
    dev: &GpuDevice,
    submission: Option<wgpu::SubmissionIndex>,
    limit: Limit,
) -> Result<()> {
    wait_or_stop(dev, submission, limit, None)
}

/// [`wait`], giving up with [`Error::Cancelled`] within one slice of `stop` being set. The
/// device goes on with the submission: whoever gives up must keep every buffer it uses
/// alive until then or hand it to wgpu (dropping a buffer defers its release past the work
/// that uses it), and write nothing it was to read back.
pub(crate) fn wait_or_stop(
    dev: &GpuDevice,
    submission: Option<wgpu::SubmissionIndex>,
    limit: Limit,
    stop: Option<&Interrupt>,
) -> Result<()> {
    let deadline = limit.duration().map(|d| Instant::now() + d);
    loop {
        if stop.is_some_and(Interrupt::is_cancelled) {
            return Err(Error::Cancelled);
        }
        let slice = deadline.map_or(WAIT_SLICE, |d| {
            d.saturating_duration_since(Instant::now()).min(WAIT_SLICE)
        });
        let waited = dev.gpu().device.poll(wgpu::PollType::Wait {
            submission_index: submission.clone(),
            timeout: Some(slice),
        });
        match waited {
            Ok(_) => return Ok(()),
            Err(wgpu::PollError::Timeout) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(lost(dev.id, limit.exceeded()));
                }
            }
            Err(other) => return Err(lost(dev.id, other.to_string())),
        }
    }
}

/// Work handed to a thread of its own for submitting (see [`submit_handed`]); its
/// submission index once the queue has taken it.
pub(crate) struct Handed(mpsc::Receiver<wgpu::SubmissionIndex>);

/// Submits `commands` to `dev`'s queue on a thread of its own and returns at once. Some
/// drivers block in the submit itself until earlier work is done (lavapipe, for as long
/// as a chunk runs), and wgpu holds the device's locks meanwhile: the caller, instead of
/// being stuck there, waits for [`Handed::submitted`], which gives up on an interrupt.
/// Until it returns the caller must make no other call on the device (it would block on
/// those locks). An error of the submit itself reaches the device's uncaptured-error
/// handler, which marks it lost.
pub(crate) fn submit_handed(dev: &GpuDevice, commands: wgpu::CommandBuffer) -> Result<Handed> {
    let (sender, submitted) = mpsc::sync_channel(1);
    let queue = dev.gpu().queue.clone();
    std::thread::Builder::new()
        .name(format!("amari-gpu submit {}", dev.id))
        .spawn(move || {
            // The receiver is gone only if the caller gave up on this work.
            let _ = sender.send(queue.submit(Some(commands)));
        })
        .map_err(|e| Error::Internal(format!("could not start a submitting thread: {e}")))?;
    Ok(Handed(submitted))
}

impl Handed {
    /// Waits until the queue has taken the work, within `limit`; gives up with
    /// [`Error::Cancelled`] within one slice of `stop` being set (the submit goes ahead).
    pub(crate) fn submitted(
        &self,
        dev: &GpuDevice,
        limit: Limit,
        stop: Option<&Interrupt>,
    ) -> Result<wgpu::SubmissionIndex> {
        let deadline = limit.duration().map(|d| Instant::now() + d);
        loop {
            if stop.is_some_and(Interrupt::is_cancelled) {
                return Err(Error::Cancelled);
            }
            let slice = deadline.map_or(WAIT_SLICE, |d| {
                d.saturating_duration_since(Instant::now()).min(WAIT_SLICE)
            });
            match self.0.recv_timeout(slice) {
                Ok(index) => {
                    check_alive(dev)?;
                    return Ok(index);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(lost(dev.id, limit.exceeded()));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(lost(
                        dev.id,
                        dev.lost_reason()
                            .unwrap_or_else(|| "the submit never returned".into()),
                    ))
                }
            }
        }
    }
}

/// Waits for `submission` as [`wait`] does, then for the mapping it was followed by.
pub(crate) fn wait_mapped(
    dev: &GpuDevice,
    submission: wgpu::SubmissionIndex,
    mapped: &Mapped,
    limit: Limit,
) -> Result<()> {
    wait_mapped_or_stop(dev, submission, mapped, limit, None)
}

/// [`wait_mapped`], giving up as [`wait_or_stop`] does.
fn wait_mapped_or_stop(
    dev: &GpuDevice,
    submission: wgpu::SubmissionIndex,
    mapped: &Mapped,
    limit: Limit,
    stop: Option<&Interrupt>,
) -> Result<()> {
    wait_or_stop(dev, Some(submission), limit, stop)?;
    match mapped.recv_timeout(limit.duration().unwrap_or(Duration::from_secs(3600))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(lost(dev.id, format!("readback failed: {e}"))),
        Err(_) => Err(lost(
            dev.id,
            dev.lost_reason()
                .unwrap_or_else(|| "readback never completed".into()),
        )),
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
