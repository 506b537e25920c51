//! Geometric-algebra kernels: batches of multivectors of Cl(p, q, r), p + q + r ≤ 6, in
//! bitmask blade order. The kernels are generated at run time from the algebra's
//! multiplication table ([`codegen`]), one per algebra, operation and broadcast, and run
//! through the engine like any other ([`apply`]). The static Cl(3,0) product in
//! `shaders/geometric_cl3.wgsl` stays as the family's calibration reference.

pub mod algebra;
pub(crate) mod cl3;
pub mod codegen;
pub mod family;
pub mod host;
pub mod host_apply;
mod host_cl3;
mod host_normalize;
mod host_program;
pub mod kernels;
pub mod operation;
mod run;

pub use algebra::Algebra;
pub use cl3::{geometric_cl3_kernel, geometric_product_cl3_reference, CL3_BLADES};
pub use codegen::{generate, Broadcast};
pub use kernels::kernel;
pub use operation::Operation;
pub use run::{apply, check, geometric_product_cl3, shape};
