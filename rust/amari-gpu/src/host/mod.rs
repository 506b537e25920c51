//! The host CPU as a device: its description ([`cpu`]), its thread pool and chunk runner
//! ([`device`]; its threads one to a CPU, [`affinity`]), and the vector helpers every family's host kernels are written with
//! ([`simd`]: AVX-512, AVX2+FMA or NEON, chosen at run time; [`arith`]: `fma` as the wgpu
//! devices beside the host round it; [`f16`]: float16 storage widened to and rounded from
//! float32).
//!
//! The kernels themselves live with their families (`ga::host`, `tropical::host`,
//! `fisher::host_syrk`, ...): each implements `kernel::HostImpl`, reproducing its WGSL
//! kernel's arithmetic exactly (the same fused multiply-add chains in the same order, the same
//! per-slice partials, the same comparisons), so a chunk computed here is the chunk a wgpu
//! device computes, bit for bit, wherever the device's arithmetic is IEEE's. Nothing here
//! names a family: adding one never edits this folder.

pub mod affinity;
pub mod arith;
pub mod cpu;
pub mod device;
pub mod f16;
pub(crate) mod rows;
pub mod simd;

pub use device::{HostDevice, HostPool};
pub use simd::Level;
