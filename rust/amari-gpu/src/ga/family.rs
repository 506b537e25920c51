//! The geometric-algebra family, as the engine knows it: its operations, and the static
//! Cl(3,0) product it is calibrated with.

use super::operation::Operation;
use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// The family's definition.
pub static DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::GeometricAlgebra,
    // The operations' names have one owner: the parser of the Python method names.
    is_operation: |name| Operation::parse(name, 0).is_ok(),
    reference: super::cl3::geometric_cl3_kernel,
    // 64 products and 56 sums per Cl(3,0) geometric product.
    reference_flops_per_item: 120.0,
    calibration_min_items: 1 << 14,
};
