//! The tropical family, as the engine knows it: its operations, and the tiled max-plus
//! product it is calibrated with.

use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// The family's definition.
pub static DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::Tropical,
    is_operation: |name| {
        matches!(
            name,
            "tropical_matmul" | "tropical_matvec" | "shortest_paths"
        )
    },
    // Tiled max-plus product of 64-row blocks of 256-wide rows by a 256 x 256 matrix: one
    // add and one max per step.
    reference: super::kernels::reference,
    reference_flops_per_item: super::kernels::REFERENCE_FLOPS_PER_ITEM,
    calibration_min_items: 1,
};
