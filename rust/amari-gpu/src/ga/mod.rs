//! Geometric-algebra kernels: batches of multivectors of Cl(p, q, r), p + q + r ≤ 6, in
//! bitmask blade order. The kernels are generated at run time from the algebra's
//! multiplication table ([`codegen`]), one per algebra, operation and broadcast, and run
//! through the engine like any other ([`apply`]). The static Cl(3,0) product in
//! `shaders/geometric_cl3.wgsl` stays as the family's calibration reference.

pub mod algebra;
pub mod blades;
pub(crate) mod cl3;
mod cl3_table;
pub mod codegen;
mod codegen_map;
mod codegen_normalize;
pub mod host;
pub mod host_apply;
mod host_f16;
mod host_cl3;
#[cfg(target_arch = "x86_64")]
mod host_cl3_avx2;
#[cfg(target_arch = "x86_64")]
mod host_cl3_avx512;
mod host_normalize;
mod host_program;
pub mod kernels;
mod map_chains;
#[cfg(target_arch = "x86_64")]
mod map_groups;
pub mod operation;
mod run;
pub mod sandwich_map;
mod wgsl;

pub use algebra::Algebra;
pub use blades::Blades;
pub use cl3::{geometric_cl3_kernel, geometric_product_cl3_reference, CL3_BLADES};
pub use codegen::{generate, Broadcast};
pub use kernels::kernel;
pub use operation::Operation;
pub use host_cl3::{stream_past_bytes, use_stream_past};
pub use run::{apply, apply_in, check, geometric_product_cl3, shape};

use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// The family's definition: its operations, and the static Cl(3,0) product it is
/// calibrated with.
pub const DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::GeometricAlgebra,
    // The operations' names have one owner: the parser of the Python method names.
    is_operation: |name| Operation::parse(name, 0).is_ok(),
    reference: cl3::geometric_cl3_kernel,
    // 64 products and 56 sums per Cl(3,0) geometric product.
    reference_flops_per_item: 120.0,
    calibration_min_items: 1 << 14,
};

crate::family::declare_family! {
    /// Geometric-algebra products and maps over batches of multivectors.
    GeometricAlgebra = "geometric_algebra";
}
