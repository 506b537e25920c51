//! The one interface the engine's loops drive a device through. Both kinds implement it: a
//! wgpu device (chunks in `executor`: upload, dispatch, readback, two chunks in flight;
//! shards in `runner::gpu`) and the host CPU device (`runner::host`: a chunk's kernel runs
//! in place when the chunk is finished, so its "flight" is one chunk begun and not yet run;
//! shards are host vectors). [`Runner`] is what the worker loop needs (written once against
//! it, with its profile events, counters, fault injection and re-queueing); its supertrait
//! [`Shards`] is what resident arrays need (shard storage, a row kernel over a shard, a
//! reduction over a shard's chunks).
//! Grid bands are the third side ([`bands::Bands`], made by [`bands_on`]).
//! [`drive`], [`shards_of`] and [`bands_on`] are the only places that look at which kind a
//! device is.

pub(crate) mod bands;
mod bands_gpu;
mod bands_host;
pub(crate) mod executor;
mod gpu;
mod host;

#[cfg(test)]
pub(crate) use bands_host::{WATCHED, WRITTEN};

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::device::{DeviceKind, GpuDevice};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::kernel::Kernel;
use crate::pool::Pooled;
use bands::Bands;
use bands_gpu::GpuBands;
use bands_host::HostBands;

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
    /// Whether the call took the fast path (the host device runs it on the calling thread).
    pub(crate) inline: bool,
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

/// Where a device holds a shard's words.
pub(crate) enum Storage {
    /// A pooled storage buffer on a wgpu device (row 0 of the shard at byte 0).
    Wgpu(Pooled),
    /// Host memory, for the host device.
    Host(Vec<f32>),
}

impl Storage {
    /// The buffer of a shard on a wgpu device.
    pub(crate) fn buffer(&self) -> Result<&Pooled> {
        match self {
            Storage::Wgpu(buffer) => Ok(buffer),
            Storage::Host(_) => Err(Error::Internal("a host shard on a wgpu device".into())),
        }
    }

    /// The words of a shard on the host device.
    pub(crate) fn words(&self) -> Result<&[f32]> {
        match self {
            Storage::Host(words) => Ok(words),
            Storage::Wgpu(_) => Err(Error::Internal("a wgpu shard on the host device".into())),
        }
    }

    /// Copies `out.len()` words of the shard (on `dev`) from word `at` into `out`, waiting
    /// for the device within `timeout`.
    pub(crate) fn read(
        &self,
        dev: &GpuDevice,
        at: usize,
        out: &mut [f32],
        timeout: Option<Duration>,
    ) -> Result<()> {
        match self {
            Storage::Wgpu(buffer) => gpu::read(dev, buffer, at, out, timeout),
            Storage::Host(words) => {
                let words = words.get(at..at + out.len()).ok_or_else(|| {
                    Error::Internal(format!("words {at}.. read past a shard's end"))
                })?;
                out.copy_from_slice(words);
                Ok(())
            }
        }
    }
}

/// A shard's storage, shared by the arrays and pieces that hold it.
pub(crate) type Shard = Arc<Storage>;

/// Words `from` of a shard to copy to words `into` of another on the same device.
pub(crate) type Piece = (Shard, Range<usize>, Range<usize>);

/// A shard run on a device: the new shard and, when the device runs it asynchronously,
/// what is left to wait for.
pub(crate) type Run = Result<(Storage, Option<Box<dyn Unfinished>>)>;

/// A reduction over a shard's chunks: its partials, or `None` when a chunk cannot be bound
/// on the device.
pub(crate) type Reduced = Result<Option<Box<dyn Partials>>>;

/// What a shard run on a device still has to do before its rows are there (a wgpu device's
/// submission to wait for, its loop checks to verify).
pub(crate) trait Unfinished {
    /// Waits for it on `dev` within `timeout`; `rows` are the shard's rows, for errors.
    fn finish(
        self: Box<Self>,
        dev: &GpuDevice,
        rows: &Range<usize>,
        timeout: Option<Duration>,
    ) -> Result<()>;
}

/// The chunks of a reduction over one shard: chunks of the problem's grid (`chunk_items`
/// rows each, counted from row 0 of the array) that lie wholly inside the shard, and the
/// widths.
pub(crate) struct ShardChunks<'a> {
    /// The shard's rows.
    pub(crate) storage: &'a Storage,
    /// The shard's first row in the array.
    pub(crate) shard_start: usize,
    /// The chunks to run (indices in the whole grid).
    pub(crate) chunks: Range<usize>,
    /// The kernel's second input for the shard's rows, when it takes one (uploaded): its
    /// `Input::PerItem` words for every row.
    pub(crate) per_row: Option<&'a [f32]>,
    /// Rows per chunk.
    pub(crate) chunk_items: usize,
    /// Rows of the array.
    pub(crate) n: usize,
    /// Words per row.
    pub(crate) cols: usize,
    /// Words per partial.
    pub(crate) words: usize,
}

impl ShardChunks<'_> {
    /// Rows of chunk `c`, relative to the shard (the array's last chunk may be short).
    pub(crate) fn local(&self, c: usize) -> Range<usize> {
        c * self.chunk_items - self.shard_start
            ..(c * self.chunk_items + self.chunk_items).min(self.n) - self.shard_start
    }
}

/// A shard's partials, computed or on their way from the device.
pub(crate) trait Partials {
    /// Copies the partials into `out` (`words` per chunk, in chunk order), waiting for the
    /// device `dev` within `timeout`.
    fn collect(
        self: Box<Self>,
        dev: &GpuDevice,
        out: &mut [f32],
        timeout: Option<Duration>,
    ) -> Result<()>;
}

/// A kind of device as resident arrays see it: shard storage and a row kernel over a shard.
/// Methods take the [`GpuDevice`] the kind belongs to for what every kind shares.
pub(crate) trait Shards {
    /// The largest shard (bytes) the device can hold, when it has a limit beside memory.
    fn largest_shard(&self, dev: &GpuDevice) -> Option<u64>;

    /// Whether a shard assembled on the device takes rows from its other shards there by
    /// [`Shards::copy_within`]; otherwise they are read like another device's shards (the
    /// host device: its shards are host memory, so reading one is the copy).
    fn copies_within(&self) -> bool;

    /// Copies words into `target` from shards on `dev`: for each `(source, from, into)` of
    /// `pieces`, words `from` of `source` to words `into` of `target`, done before any later
    /// work on the device.
    fn copy_within(&self, dev: &GpuDevice, target: &mut Storage, pieces: &[Piece]) -> Result<()>;

    /// An uninitialised shard of `words` words on `dev` (a kernel or copy fills it).
    fn allocate(&self, dev: &GpuDevice, words: usize) -> Result<Storage>;

    /// A shard on `dev` holding `data` (whole rows).
    fn put(&self, dev: &GpuDevice, data: &[f32]) -> Result<Storage>;

    /// Runs `kernel` over the `items` rows of one shard on `dev`: `inputs[i]` is the
    /// shard's rows of input i (or the whole input).
    fn run_shard(&self, dev: &GpuDevice, kernel: &Kernel, inputs: &[Shard], items: usize) -> Run;

    /// Runs `kernel` (one partial per chunk) over the chunks of `span` of one shard on
    /// `dev`: the kernel's inputs are the shard's rows, then `span.per_row` when given.
    /// `None`, having done nothing, when a chunk cannot be bound on the device.
    fn reduce_shard(&self, dev: &GpuDevice, kernel: &Kernel, span: &ShardChunks<'_>) -> Reduced;
}

/// The device's kind as a [`Shards`] holder.
pub(crate) fn shards_of(dev: &GpuDevice) -> &dyn Shards {
    match &dev.kind {
        DeviceKind::Wgpu(gpu) => gpu,
        DeviceKind::Host(host) => host,
    }
}

/// A kind of device as the engine's loops see it. Methods take the [`GpuDevice`] the kind
/// belongs to for what every kind shares (id, health, pool, counters, limits).
pub(crate) trait Runner: Shards {
    /// A kernel made ready to run on the device once per call (a compiled pipeline; the host
    /// kernel with the device's fma rounding).
    type Prepared;
    /// A chunk begun and not yet finished.
    type Flight;
    /// What a worker keeps across its chunks (inputs bound whole, uploaded once).
    type Held: Default;
    /// Chunks a worker keeps begun, the one it finishes next included.
    const DEPTH: usize;
    /// Chunks of host inputs a worker takes at once and finishes together
    /// ([`Runner::finish_batch`]); 1 takes them one by one.
    const BATCH: usize = 1;

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
    fn wait_submitted(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        flight: &mut Self::Flight,
    ) -> Result<()>;

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

    /// Completes every flight of `batch` into its output words, together; each chunk's
    /// outcome in the batch's order. By default one after another ([`Runner::finish`]).
    fn finish_batch(
        &self,
        dev: &GpuDevice,
        job: &Job<'_>,
        prepared: &Self::Prepared,
        batch: Vec<(Self::Flight, &mut [f32])>,
    ) -> Vec<Result<Finished>> {
        batch
            .into_iter()
            .map(|(flight, output)| self.finish(dev, job, prepared, flight, output))
            .collect()
    }

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

/// Empty band storage on `dev` for grid bands running `kernel` (compiled on a wgpu device;
/// the host device steps its bands with their [`bands::Program`]s' host steps).
pub(crate) fn bands_on<'d>(dev: &'d GpuDevice, kernel: &Kernel) -> Result<Box<dyn Bands + 'd>> {
    Ok(match &dev.kind {
        DeviceKind::Wgpu(gpu) => Box::new(GpuBands::new(dev, gpu, dev.pipeline(kernel)?)),
        DeviceKind::Host(host) => Box::new(HostBands::new(dev, host)),
    })
}
