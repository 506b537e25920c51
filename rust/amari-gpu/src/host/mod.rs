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
pub mod cl3;
pub mod cpu;
pub mod device;
pub mod fisher;
pub mod fisher_checks;
pub mod fisher_resident;
pub mod ga;
pub mod ga_apply;
pub mod ga_program;
pub mod grid;
pub mod kernel;
pub mod maps;
pub mod normalize;
pub mod paths;
pub mod simd;
pub mod tropical;
pub mod tropical_rows;

pub use arith::FmaMode;
pub use cl3::Cl3Product;
pub use device::{HostDevice, HostPool};
pub use fisher::FisherSyrk;
pub use ga::GaKernel;
pub use ga_apply::apply_host;
pub use kernel::HostKernel;
pub use maps::FisherMap;
pub use simd::Level;
pub use tropical::{TropicalMatvec, TropicalProduct};
