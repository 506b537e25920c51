//! The host CPU as a device: native kernels for every family, each reproducing its WGSL
//! kernel's arithmetic exactly (the same fused multiply-add chains in the same order, the
//! same per-slice partials, the same comparisons), so a chunk computed here is the chunk a
//! wgpu device computes, bit for bit, wherever the device's arithmetic is IEEE's. Where a
//! driver's own approximations decide the bits (`exp`, and on hardware GPUs `sqrt` and
//! division), the host computes the correctly rounded float32 and the kernel's doc says so.
//!
//! [`HostKernel`] is what the executor runs per chunk, with the chunk contract of
//! `kernel.rs`: per-item inputs sliced by the chunk's range, whole inputs bound whole, per-item
//! outputs or one partial per chunk. Threads come from a [`HostPool`]; vector code from
//! [`simd`] (AVX-512, AVX2+FMA or NEON, chosen at run time).

pub mod arith;
pub mod fisher;
pub mod ga;
pub mod ga_program;
pub mod grid;
pub mod maps;
pub mod normalize;
pub mod paths;
pub mod simd;
pub mod tropical;

use std::ops::Range;

pub use arith::FmaMode;
pub use fisher::FisherSyrk;
pub use ga::GaKernel;
pub use maps::FisherMap;
pub use simd::Level;
pub use tropical::{TropicalMatvec, TropicalProduct};

/// The host's worker threads (a rayon pool of a given size).
#[derive(Debug)]
pub struct HostPool {
    pool: rayon::ThreadPool,
}

impl HostPool {
    /// A pool of `threads` threads (at least one).
    pub fn new(threads: usize) -> crate::error::Result<HostPool> {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("amari-host-{i}"))
            .build()
            .map(|pool| HostPool { pool })
            .map_err(|e| crate::error::Error::invalid("host_threads", e.to_string()))
    }

    /// Threads in the pool.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f` on the pool's threads (for host versions of whole calls, like
    /// [`paths::shortest_paths_host`]).
    pub fn run_with<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    /// Runs `kernel` over items `range` of a problem whose inputs are `inputs` (bound as
    /// the WGSL kernel binds them), writing `output`: the chunk's per-item words, or its
    /// partial.
    pub fn run(
        &self,
        kernel: &HostKernel,
        inputs: &[&[f32]],
        range: Range<usize>,
        output: &mut [f32],
    ) {
        self.pool.install(|| kernel.run(inputs, range, output));
    }
}

/// A kernel the host device runs per chunk: the host twin of one WGSL [`crate::kernel::Kernel`],
/// built from the same description.
#[derive(Debug, Clone)]
pub enum HostKernel {
    /// A generated geometric-algebra kernel.
    Ga(GaKernel),
    /// A tropical matrix product over row blocks (`tropical::kernels::tiled`).
    TropicalProduct(TropicalProduct),
    /// A tropical matrix-vector product over rows (`tropical::kernels::matvec`).
    TropicalMatvec(TropicalMatvec),
    /// The empirical-Fisher SYRK, one partial per chunk (`fisher::shaped_kernel`).
    FisherSyrk(FisherSyrk),
    /// A per-sample Fisher map (softmax, categorical, Gaussian).
    FisherMap(FisherMap),
}

impl HostKernel {
    /// Runs items `range` on the current rayon pool (see [`HostPool::run`]).
    pub fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        match self {
            HostKernel::Ga(k) => k.run(inputs, range, output),
            HostKernel::TropicalProduct(k) => k.run(inputs, range, output),
            HostKernel::TropicalMatvec(k) => k.run(inputs, range, output),
            HostKernel::FisherSyrk(k) => k.run(inputs, range, output),
            HostKernel::FisherMap(k) => k.run(inputs, range, output),
        }
    }
}
