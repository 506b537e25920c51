//! Waiting for a device: submits handed to a thread of their own, waits in slices under the
//! timeout rule that give up on an interrupt, and buffers mapped for reading.

use std::sync::{mpsc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::faults::{check_alive, lost};
use crate::device::{GpuDevice, WgpuDevice};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;

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
    let gpu = dev.gpu();
    in_slices(dev, limit, stop, |slice| {
        // A submit holding the device (lavapipe's can last a chunk) is waited for here in
        // short steps, so that an interrupt or the limit is still seen within the slice.
        let _held = held_within(&gpu.maintain, slice)?;
        let waited = gpu.device.poll(wgpu::PollType::Wait {
            submission_index: submission.clone(),
            timeout: Some(slice),
        });
        match waited {
            Ok(_) => Some(Ok(())),
            Err(wgpu::PollError::Timeout) => None,
            Err(other) => Some(Err(lost(dev.id, other.to_string()))),
        }
    })
}

/// Tries `attempt` with slices of at most [`WAIT_SLICE`] until it has an outcome (`None`:
/// not yet), within `limit`; gives up with [`Error::Cancelled`] within one slice of `stop`
/// being set, and with the device lost once `limit` is exceeded.
fn in_slices<T>(
    dev: &GpuDevice,
    limit: Limit,
    stop: Option<&Interrupt>,
    mut attempt: impl FnMut(Duration) -> Option<Result<T>>,
) -> Result<T> {
    let deadline = limit.duration().map(|d| Instant::now() + d);
    loop {
        if stop.is_some_and(Interrupt::is_cancelled) {
            return Err(Error::Cancelled);
        }
        let slice = deadline.map_or(WAIT_SLICE, |d| {
            d.saturating_duration_since(Instant::now()).min(WAIT_SLICE)
        });
        // An injected hold (`inject_fault(hold=True)`): the device does not answer.
        if dev.health.hold_due() {
            std::thread::sleep(slice);
        } else if let Some(outcome) = attempt(slice) {
            return outcome;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(lost(dev.id, limit.exceeded()));
        }
    }
}

/// Work given to a device's queue (see [`submit_handed`]): taken already, or handed to a
/// thread of its own that submits it, with its submission index once the queue took it.
pub(crate) enum Handed {
    /// Submitted on the caller's thread.
    Taken(wgpu::SubmissionIndex),
    /// On its way on a submitting thread.
    Pending(mpsc::Receiver<wgpu::SubmissionIndex>),
}

/// Submits `commands` to `dev`'s queue and returns at once. Some drivers block in the
/// submit itself until earlier work is done (lavapipe, for as long as a chunk runs), and
/// wgpu holds the device's locks meanwhile: with earlier work still on the queue the
/// submit runs on a thread of its own, and the caller, instead of being stuck there, waits
/// for [`Handed::submitted`], which gives up on an interrupt. With the queue empty nothing
/// can hold the submit, so it runs here: a thread per submit costs more than a tiny
/// chunk's whole kernel. Until [`Handed::submitted`] returns the caller must make no
/// other call on the device (it would block on those locks). An error of the submit
/// itself reaches the device's uncaptured-error handler, which marks it lost.
pub(crate) fn submit_handed(dev: &GpuDevice, commands: wgpu::CommandBuffer) -> Result<Handed> {
    let gpu = dev.gpu();
    // `Poll` only reads the fence (and completes finished work): it never waits. A device
    // held by another thread's poll or submit has work on its queue.
    if let Ok(held) = gpu.maintain.try_lock() {
        if let Ok(wgpu::PollStatus::QueueEmpty) = gpu.device.poll(wgpu::PollType::Poll) {
            let index = gpu.queue.submit(Some(commands));
            drop(held);
            return Ok(Handed::Taken(index));
        }
    }
    let (sender, submitted) = mpsc::sync_channel(1);
    let (queue, maintain) = (gpu.queue.clone(), gpu.maintain.clone());
    std::thread::Builder::new()
        .name(format!("amari-gpu submit {}", dev.id))
        .spawn(move || {
            let held = maintain.lock().unwrap_or_else(PoisonError::into_inner);
            let index = queue.submit(Some(commands));
            drop(held);
            // The receiver is gone only if the caller gave up on this work.
            let _ = sender.send(index);
        })
        .map_err(|e| Error::Internal(format!("could not start a submitting thread: {e}")))?;
    Ok(Handed::Pending(submitted))
}

impl Handed {
    /// Whether the queue took the work on the caller's thread (no submitting thread).
    #[cfg(feature = "bench-support")]
    pub(crate) fn inline(&self) -> bool {
        matches!(self, Handed::Taken(_))
    }

    /// Waits until the queue has taken the work, within `limit`; gives up with
    /// [`Error::Cancelled`] within one slice of `stop` being set (the submit goes ahead).
    pub(crate) fn submitted(
        &self,
        dev: &GpuDevice,
        limit: Limit,
        stop: Option<&Interrupt>,
    ) -> Result<wgpu::SubmissionIndex> {
        let receiver = match self {
            Handed::Taken(index) => return check_alive(dev).map(|()| index.clone()),
            Handed::Pending(receiver) => receiver,
        };
        in_slices(dev, limit, stop, |slice| {
            match receiver.recv_timeout(slice) {
                Ok(index) => Some(check_alive(dev).map(|()| index)),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => Some(Err(lost(
                    dev.id,
                    dev.lost_reason()
                        .unwrap_or_else(|| "the submit never returned".into()),
                ))),
            }
        })
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
pub(super) fn wait_mapped_or_stop(
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

/// `lock`, once no other thread holds it, waiting for that in steps of a millisecond for
/// at most `within` (`None` if it is still held then).
fn held_within(lock: &Mutex<()>, within: Duration) -> Option<MutexGuard<'_, ()>> {
    let until = Instant::now() + within;
    loop {
        match lock.try_lock() {
            Ok(held) => return Some(held),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

impl WgpuDevice {
    /// `queue.submit(commands)` with the device held (see [`WgpuDevice::maintain`]).
    pub(crate) fn submit(
        &self,
        commands: impl IntoIterator<Item = wgpu::CommandBuffer>,
    ) -> wgpu::SubmissionIndex {
        let _held = self.maintain.lock().unwrap_or_else(PoisonError::into_inner);
        self.queue.submit(commands)
    }

    /// `device.poll(poll)` with the device held (see [`WgpuDevice::maintain`]).
    #[cfg(feature = "bench-support")]
    pub(crate) fn poll(
        &self,
        poll: wgpu::PollType,
    ) -> std::result::Result<wgpu::PollStatus, wgpu::PollError> {
        let _held = self.maintain.lock().unwrap_or_else(PoisonError::into_inner);
        self.device.poll(poll)
    }
}
