//! Tropical (max-plus and min-plus) matrix products, matrix-vector products and all-pairs
//! shortest paths.
//!
//! Semantics, shared by every kernel and the host code: in max-plus, `a ⊕ b = max(a, b)` and
//! `a ⊗ b = a + b` with tropical zero −inf; in min-plus, `min` and +inf. The tropical zero
//! is absorbing for ⊗ even against the opposite infinity (in max-plus, −inf ⊗ +inf = −inf),
//! so no NaN ever appears; NaN inputs are refused. Each product has one entry for host and
//! resident left operands (`product`), which owns its checks (`checks`). A product with K = 0 is the tropical zero
//! matrix.
//!
//! Work is split by rows of the (stacked) left operand; the right operand is bound whole on
//! every device. Each output is reduced over k in a fixed order by one thread, so results are
//! bit-identical for any device count, chunk size or strategy.

pub mod blocks;
pub mod checks;
pub mod host;
mod host_drive;
pub mod host_kernel;
mod host_pack;
pub mod host_paths;
pub mod host_rows;
pub mod kernels;
pub mod paths;
pub mod product;
pub mod product64;
pub mod resident;
pub mod scalar;
pub mod semiring;
pub mod shape;

pub use blocks::{BatchShape, Product};
pub use paths::shortest_paths;
pub use product::{
    check_matmul_operands, check_matvec_operands, tropical_matmul, tropical_matvec, Operands,
};
pub use scalar::Scalar;
pub use product64::{tropical_matmul_f64, tropical_matvec_f64, HostOperands};
pub use semiring::Semiring;

use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// The family's definition: its operations, and the tiled max-plus product it is
/// calibrated with.
pub const DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::Tropical,
    is_operation: |name| {
        matches!(
            name,
            "tropical_matmul" | "tropical_matvec" | "shortest_paths"
        )
    },
    // Tiled max-plus product of 64-row blocks of 256-wide rows by a 256 x 256 matrix: one
    // add and one max per step.
    reference: kernels::reference,
    reference_flops_per_item: kernels::REFERENCE_FLOPS_PER_ITEM,
    calibration_min_items: 1,
};

crate::family::declare_family! {
    /// Max-plus and min-plus products and shortest paths.
    Tropical = "tropical";
}
