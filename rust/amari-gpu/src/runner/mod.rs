//! The one interface the engine's loops drive a device through. Both kinds implement
//! [`Runner`]: a wgpu device (in `executor`: upload, dispatch, readback, two chunks in
//! flight) and the host CPU device (in `runner::host`: the kernel runs in place when the
//! chunk is finished, so its "flight" is one chunk begun and not yet run). The worker loop,
//! its profile events, counters, fault injection and re-queueing are written once against
//! the trait; [`drive`] is the one place that looks at which kind a device is.

mod host;

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::device::{DeviceKind, GpuDevice};
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::kernel::Kernel;

/// What a call's chunks share on every device: the kernel, the whole problem's inputs, and
/// how long (and until what) a wait may last.
pub(crate) struct Job<'a> {
    /// The kernel.
    pub(crate) kernel: &'a Kernel,
    /// Inputs, whole problem.
    pub(crate) inputs: &'a [&'a [f32]],
    /// Whether the kernel is timed with GPU timestamps (where the device has them).
    pub(crate) timed: bool,
    /// Per-chunk wait limit.
    pub(crate) timeout: Option<Duration>,
    /// The call's interrupt: a wait gives up once it is set.
    pub(crate) stop: Option<&'a Interrupt>,
}

/// What beginning a chunk measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Begun {
    /// When the chunk was handed to the device (after its upload, on a wgpu device).
    pub(crate) submitted: Instant,
    /// Bytes uploaded for it.
    pub(crate) bytes_up: u64,
    /// Bytes read back for it.
    pub(crate) bytes_down: u64,
}

/// What finishing a chunk measured.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    /// Host time the wait for the device began (on the host device: the kernel began).
    pub wait_start: Instant,
    /// Host time the device had finished (the wait returned; the host kernel returned).
    pub wait_end: Instant,
    /// Host time the results were in the output.
    pub copied: Instant,
    /// The kernel's begin and end timestamps in GPU ticks, when recorded.
    pub ticks: Option<(u64, u64)>,
    /// Whether the chunk was staged: uploaded, waited for and read back (a wgpu device).
    /// A host chunk ran in place, so its profile shows the kernel step alone.
    pub staged: bool,
}

/// A kind of device as the engine's loops see it. Methods take the [`GpuDevice`] the kind
/// belongs to for what every kind shares (id, health, pool, counters, limits).
pub(crate) trait Runner {
    /// A kernel made ready to run on the device once per call (a compiled pipeline; the host
    /// kernel with the device's fma rounding).
    type Prepared;
    /// A chunk begun and not yet finished.
    type Flight;
    /// What a worker keeps across its chunks (inputs bound whole, uploaded once).
    type Held: Default;
    /// Chunks a worker keeps begun, the one it finishes next included.
    const DEPTH: usize;

    /// Makes `kernel` ready to run on `dev`.
    fn prepare(&self, dev: &GpuDevice, kernel: &Kernel) -> Result<Self::Prepared>;

    /// Begins items `range` of `job` on `dev`.
    fn begin(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        prepared: &Self::Prepared,
        range: Range<usize>,
        held: &mut Self::Held,
    ) -> Result<(Self::Flight, Begun)>;

    /// Waits until the device has taken `flight` (a driver may hold a submit until earlier
    /// work is done); a worker calls it on its latest chunk before any other call on `dev`.
    fn wait_submitted(&self, dev: &GpuDevice, job: &Job<'_>, flight: &mut Self::Flight)
        -> Result<()>;

    /// Completes `flight` into `output` (the chunk's output words). On error `output` is
    /// untouched.
    fn finish(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        prepared: &Self::Prepared,
        flight: Self::Flight,
        output: &mut [f32],
    ) -> Result<Finished>;

    /// Lets go of what a worker that stopped still holds: chunks begun and not finished,
    /// and `held` when the worker failed (the device may still be using it). `later`: on a
    /// thread of its own, so that an interrupted call returns at once.
    fn abandon(&self, flights: Vec<Self::Flight>, held: Option<Self::Held>, later: bool);
}

/// A loop written once against [`Runner`], run on a device of either kind by [`drive`].
pub(crate) trait Drive {
    /// What the loop returns.
    type Out;
    /// Runs the loop on `dev`, whose kind is `runner`.
    fn run<R: Runner>(self, dev: &GpuDevice, runner: &R) -> Self::Out;
}

/// Runs `looped` on `dev` with the device's kind as its [`Runner`].
pub(crate) fn drive<D: Drive>(dev: &GpuDevice, looped: D) -> D::Out {
    match &dev.kind {
        DeviceKind::Wgpu(gpu) => looped.run(dev, gpu),
        DeviceKind::Host(host) => looped.run(dev, host),
    }
}
