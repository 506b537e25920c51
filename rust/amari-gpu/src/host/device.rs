//! The host CPU as a device of a context: its thread pool, the fma rounding its kernels
//! reproduce, and one chunk run in place (the kernel reads the caller's input slices and
//! writes straight into the chunk's output slice; nothing is staged). A panic inside a host
//! kernel is caught here and becomes a device failure, like a lost wgpu device.

use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use super::affinity::{self, Binding, Placement};
use super::simd::Level;
use crate::alloc::Spare;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::kernel::{FmaMode, HostImpl};

/// The host's worker threads (a rayon pool of a given size).
#[derive(Debug)]
pub struct HostPool {
    pool: rayon::ThreadPool,
    /// Its threads bound one to a CPU while the machine is quiet (a pool with one thread per
    /// CPU, unless `AMARI_GPU_HOST_PIN` pins it always or never).
    binding: Option<Binding>,
}

impl HostPool {
    /// A pool of `threads` threads (at least one); with as many CPUs, one to a CPU always or
    /// while the machine is quiet, as [`super::affinity`] says.
    pub fn new(threads: usize) -> Result<HostPool> {
        Self::placed(threads, affinity::placement())
    }

    /// A pool of `threads` threads placed as `how` asks (when there are as many CPUs).
    pub fn placed(threads: usize, how: Placement) -> Result<HostPool> {
        let threads = threads.max(1);
        let mut builder = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("amari-host-{i}"));
        let mut binding = None;
        match (affinity::cpus_for(threads, how), how) {
            (Some(cpus), Placement::Pinned) => {
                builder = builder.start_handler(move |i| affinity::pin_current(cpus[i]));
            }
            (Some(cpus), _) => binding = Some(Binding::new(cpus)),
            (None, _) => {}
        }
        builder
            .build()
            .map(|pool| HostPool { pool, binding })
            .map_err(|e| Error::invalid("host_threads", e.to_string()))
    }

    /// Threads in the pool.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f` on the pool's threads (for host versions of whole calls, like
    /// `tropical::host_paths::shortest_paths_host`), every thread woken first
    /// ([`HostPool::wake`]).
    pub fn run_with<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.wake();
        self.pool.install(f)
    }

    /// Wakes every thread of the pool while the calling thread still runs, before handing
    /// it the call (`install` wakes one thread and puts the caller to sleep; that thread
    /// wakes the next when it splits the work). Woken while the caller keeps its CPU busy,
    /// a free thread lands on a CPU that is idle; the threads spin a while before sleeping
    /// again, so they take the call's jobs where they are. Measured on the 2-vCPU Xeon VM
    /// of `docs/benchmarks.md`, calls 0.3 s after the last: a 1024² × 16 heat call
    /// 4.5-5.5 → 3.0-3.6 ms (median of nine). That was not enough for every call: the
    /// threads still often shared one CPU for a whole call, so a pool bound while the
    /// machine is quiet ([`Binding`]) is bound or freed here, each thread by itself before
    /// it takes the call's jobs. From a pool thread (a nested call) there is nothing to wake.
    fn wake(&self) {
        if self.pool.current_num_threads() < 2 || self.pool.current_thread_index().is_some() {
            return;
        }
        self.rebind(self.binding.as_ref().and_then(Binding::decide));
    }

    /// Wakes every thread, each binding itself to its CPU first (`Some(true)`), or freeing
    /// itself (`Some(false)`), where the pool is bound while the machine is quiet.
    pub fn rebind(&self, bind: Option<bool>) {
        if let (Some(binding), Some(bound)) = (&self.binding, bind) {
            binding.set(bound);
        }
        match (&self.binding, bind) {
            (Some(binding), Some(true)) => {
                let cpus = binding.cpus();
                self.pool
                    .spawn_broadcast(move |t| affinity::pin_current(cpus[t.index()]));
            }
            (Some(binding), Some(false)) => {
                let cpus = binding.cpus();
                self.pool
                    .spawn_broadcast(move |_| affinity::free_current(&cpus));
            }
            _ => self.pool.spawn_broadcast(|_| {}),
        }
    }

    /// The CPUs each of the pool's threads may run on now, thread by thread (each asked
    /// after what was handed to it before).
    pub fn allowed_cpus(&self) -> Vec<Vec<usize>> {
        self.pool.broadcast(|_| affinity::allowed_cpus())
    }

    /// Runs `kernel` over items `range` of a problem whose inputs are `inputs` (bound as
    /// the WGSL kernel binds them), writing `output`: the chunk's per-item words, or its
    /// partial.
    pub fn run(
        &self,
        kernel: &dyn HostImpl,
        inputs: &[&[f32]],
        range: Range<usize>,
        output: &mut [f32],
    ) {
        self.run_with(|| kernel.run(inputs, range, output));
    }
}

/// When one chunk's kernel started and ended, or why it failed.
pub(crate) type ChunkRun = Result<(Instant, Instant)>;

/// The host device: a rayon pool and the fma modes of the wgpu devices it runs beside.
#[derive(Debug)]
pub struct HostDevice {
    /// Worker threads of the device's kernels.
    pub pool: HostPool,
    /// How the context's wgpu devices round WGSL `fma` in float32 (`Fused` when the host is
    /// alone).
    pub fma: FmaMode,
    /// How they round it in float64 (measured apart: a driver may fuse one and not the
    /// other).
    pub fma_f64: FmaMode,
    /// The vector instructions the kernels run with.
    pub simd: Level,
    /// Grid band buffers handed back by the last grid call, for the next one's bands.
    pub(crate) spare: Spare,
}

impl HostDevice {
    /// A host device with `threads` kernel threads reproducing `fma` in every dtype (see
    /// [`HostDevice::with_fma_f64`]).
    pub fn new(threads: usize, fma: FmaMode) -> Result<HostDevice> {
        Ok(HostDevice {
            pool: HostPool::new(threads)?,
            fma,
            fma_f64: fma,
            simd: Level::detect(),
            spare: Spare::default(),
        })
    }

    /// The device reproducing `fma` in float64.
    pub fn with_fma_f64(self, fma: FmaMode) -> HostDevice {
        HostDevice {
            fma_f64: fma,
            ..self
        }
    }

    /// The fma rounding its kernels of `dtype` reproduce (float16 kernels accumulate in
    /// float32).
    pub fn fma_for(&self, dtype: Dtype) -> FmaMode {
        match dtype {
            Dtype::F64 => self.fma_f64,
            Dtype::F16 | Dtype::F32 => self.fma,
        }
    }

    /// The kernel to run here: `kernel`, of `dtype`, with this device's fma rounding in it.
    pub fn prepare(&self, kernel: &dyn HostImpl, dtype: Dtype) -> Arc<dyn HostImpl> {
        kernel.with_fma(self.fma_for(dtype))
    }

    /// Runs items `range` of `kernel` (prepared with [`HostDevice::prepare`]) into
    /// `output` on the pool, or on the calling thread when `here` (a fast-path call, whose
    /// work is shorter than the hand-off to the pool) and the kernel runs the range as one
    /// piece ([`HostImpl::splits`]): a split from the calling thread would run on rayon's
    /// global pool, beside the host device's threads. A panic in the kernel is returned as
    /// a failure of device `id`.
    pub fn run(
        &self,
        id: usize,
        kernel: &dyn HostImpl,
        inputs: &[&[f32]],
        (range, output): (Range<usize>, &mut [f32]),
        here: bool,
    ) -> Result<()> {
        catch_unwind(AssertUnwindSafe(|| match here {
            true if !kernel.splits(range.len()) => kernel.run(inputs, range, output),
            _ => self.pool.run(kernel, inputs, range, output),
        }))
        .map_err(|panic| lost_in_kernel(id, panic.as_ref()))
    }

    /// Runs `kernel` over every chunk of `chunks` (items, output words) on the pool, side
    /// by side: each chunk's kernel a task the threads take as they come free, so none
    /// waits for the slowest part of another. Each chunk's start and end, or a panic in it
    /// as a failure of device `id` (the other chunks' outcomes stand), or
    /// [`Error::Cancelled`] for a chunk not yet begun when `stop` was cancelled (a batch
    /// can be a whole call's chunks). From a thread of the pool, as the worker loop runs
    /// the host's chunks.
    pub(crate) fn run_each(
        &self,
        id: usize,
        kernel: &dyn HostImpl,
        inputs: &[&[f32]],
        chunks: Vec<(Range<usize>, &mut [f32])>,
        stop: Option<&Interrupt>,
    ) -> Vec<ChunkRun> {
        let mut runs: Vec<Option<ChunkRun>> = chunks.iter().map(|_| None).collect();
        self.pool.run_with(|| {
            rayon::scope(|s| {
                for ((range, output), run) in chunks.into_iter().zip(runs.iter_mut()) {
                    s.spawn(move |_| {
                        if stop.is_some_and(Interrupt::is_cancelled) {
                            *run = Some(Err(Error::Cancelled));
                            return;
                        }
                        let start = Instant::now();
                        let ran =
                            catch_unwind(AssertUnwindSafe(|| kernel.run(inputs, range, output)));
                        *run = Some(match ran {
                            Ok(()) => Ok((start, Instant::now())),
                            Err(panic) => Err(lost_in_kernel(id, panic.as_ref())),
                        });
                    });
                }
            })
        });
        runs.into_iter()
            .map(|run| run.unwrap_or_else(|| Err(Error::Internal("a chunk did not run".into()))))
            .collect()
    }
}

/// A panic in a host kernel, as a failure of device `id`.
fn lost_in_kernel(id: usize, panic: &(dyn std::any::Any + Send)) -> Error {
    let what = Error::from_panic("a host kernel", panic);
    Error::DeviceLost {
        device: id,
        reason: what.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk kernel that cancels its call as it begins, then takes a while: every chunk
    /// after the first ones on the pool's threads begins after the cancel.
    #[derive(Debug)]
    struct CancelsItsCall(Arc<Interrupt>);

    impl HostImpl for CancelsItsCall {
        fn run(&self, _: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
            self.0.cancel();
            std::thread::sleep(std::time::Duration::from_millis(20));
            output.fill(range.start as f32 + 1.0);
        }
        fn with_fma(&self, _: FmaMode) -> Arc<dyn HostImpl> {
            Arc::new(CancelsItsCall(Arc::clone(&self.0)))
        }
    }

    /// A batch of a whole call's chunks stops beginning chunks once the call is cancelled:
    /// the chunks begun before finish (one per thread at most), the rest are
    /// [`Error::Cancelled`] and their output is left as it was.
    #[test]
    fn a_batch_begins_no_chunk_after_its_call_is_cancelled() {
        let threads = 2;
        let host = HostDevice::new(threads, FmaMode::Fused).expect("a host device");
        let stop = Interrupt::new();
        let kernel = CancelsItsCall(Arc::clone(&stop));
        let mut out = vec![0.0f32; 64];
        let chunks = out
            .chunks_mut(1)
            .enumerate()
            .map(|(i, o)| (i..i + 1, o))
            .collect();
        let runs = host.run_each(0, &kernel, &[], chunks, Some(&stop));
        let ran: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].is_ok()).collect();
        assert!(
            !ran.is_empty() && ran.len() <= threads,
            "chunks run: {ran:?}"
        );
        for (i, run) in runs.iter().enumerate() {
            match run {
                Ok(_) => assert_eq!(out[i], i as f32 + 1.0),
                Err(e) => {
                    assert_eq!(*e, Error::Cancelled, "chunk {i}");
                    assert_eq!(out[i], 0.0, "chunk {i} was written");
                }
            }
        }
    }
}
