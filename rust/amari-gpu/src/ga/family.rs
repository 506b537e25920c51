//! The geometric-algebra family, as the engine knows it: its operations, and the static
//! Cl(3,0) product it is calibrated with.

use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// The family's definition.
pub static DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::GeometricAlgebra,
    operations: &[
        "geometric_product",
        "outer_product",
        "inner_product",
        "scalar_product",
        "reverse",
        "grade_involution",
        "grade_projection",
        "sandwich",
        "normalize",
        "dual",
    ],
    reference: super::cl3::geometric_cl3_kernel,
    // 64 products and 56 sums per Cl(3,0) geometric product.
    reference_flops_per_item: 120.0,
    calibration_min_items: 1 << 14,
};
