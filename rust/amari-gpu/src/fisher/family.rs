//! The information-geometry family, as the engine knows it: its operations, and the tiled
//! empirical-Fisher SYRK it is calibrated with.

use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// The family's definition.
pub static DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::InformationGeometry,
    is_operation: |name| {
        matches!(
            name,
            "fisher_information" | "fisher_categorical" | "fisher_gaussian"
        )
    },
    // Tiled empirical-Fisher SYRK, 128 score columns: one multiply-add (2 flops) per
    // upper-triangle entry and row.
    reference: super::syrk::reference_kernel,
    reference_flops_per_item: super::syrk::REFERENCE_FLOPS_PER_ITEM,
    calibration_min_items: 1 << 10,
};
