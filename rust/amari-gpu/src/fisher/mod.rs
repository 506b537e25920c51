//! Information geometry: empirical Fisher information from per-sample scores, and the
//! Fisher information of categorical and Gaussian families.
//!
//! The empirical Fisher matrix is a weighted SYRK over rows of scores: rows are the items the
//! engine splits across devices, every chunk writes one partial matrix, and the host sums
//! the partials in chunk order in float64, so the result is the same bits whatever the
//! devices or the strategy. The categorical and Gaussian kernels are maps over samples.
//! Every kernel is an entry point of `shaders/fisher.wgsl`.

mod categorical;
mod checks;
mod entry;
mod gaussian;
pub mod host_checks;
pub mod host_maps;
mod host_resident;
pub mod host_syrk;
mod information;
mod information64;
mod maps_wgsl;
mod reduce;
pub mod reference;
mod resident;
mod resident64;
mod resident_maps;
mod scale;
mod scan;
pub(crate) mod shape;
pub mod split;
pub(crate) mod syrk;
pub mod syrk64;
mod syrk_block;
mod syrk_pack;
#[cfg(target_arch = "x86_64")]
mod syrk_simd;
mod syrk_tile;
#[cfg(target_arch = "x86_64")]
mod syrk_vector;
#[cfg(test)]
mod syrk_tests;

pub use categorical::{
    categorical_outer_kernel, check_categorical_operands, fisher_categorical_logits,
    fisher_categorical_probs, softmax_kernel, MAX_CATEGORIES, PROBS_SUM_TOLERANCE,
};
pub use entry::{
    categorical_shapes, check_gaussian, fisher_categorical, fisher_categorical_f64,
    fisher_gaussian, fisher_gaussian_f64, fisher_information_of, gaussian_shapes,
    host_shape_f64, information_shapes,
};
pub use host_maps::Value;
pub use gaussian::{
    check_gaussian_operands, fisher_gaussian_diag, gaussian_diag_kernel, MAX_GAUSSIAN_DIMENSIONS,
};
pub use information::{fisher_information, fisher_information_by, FisherMatrix, SyrkVariant};
pub use information64::{
    finish_f64, fisher_information_f64, information_shapes_f64, ones_f64, partials_f64, prepare_f64,
    Prepared64,
};
pub use resident::{
    column_max_kernel, fisher_information_resident, prepare_kernel, SOURCE as RESIDENT_SOURCE,
};
pub use resident64::fisher_information_resident_f64;
pub use resident_maps::{
    fisher_categorical_resident, fisher_gaussian_resident, flag_kernel, CHECKS_SOURCE,
};
pub use syrk::{
    naive_kernel, reference_kernel, shaped_kernel, tiled_kernel, SyrkShape, BLOCK,
    MAX_SCORE_COLUMNS, NARROW_COLUMNS, REFERENCE_COLUMNS, REFERENCE_FLOPS_PER_ITEM, SHADER, TILE,
};

use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// The family's definition: its operations, and the tiled empirical-Fisher SYRK it is
/// calibrated with.
pub const DEFINITION: FamilyDefinition = FamilyDefinition {
    family: Family::InformationGeometry,
    is_operation: |name| {
        matches!(
            name,
            "fisher_information" | "fisher_categorical" | "fisher_gaussian"
        )
    },
    // Tiled empirical-Fisher SYRK, 128 score columns: one multiply-add (2 flops) per
    // upper-triangle entry and row.
    reference: syrk::reference_kernel,
    reference_flops_per_item: syrk::REFERENCE_FLOPS_PER_ITEM,
    calibration_min_items: 1 << 10,
};

crate::family::declare_family! {
    /// Fisher information matrices.
    InformationGeometry = "information_geometry";
}
