//! Kernel families and the reference kernel each is calibrated with. A family's measured
//! items/s on its reference kernel, times the reference kernel's arithmetic per item, gives
//! the device's arithmetic rate for every kernel of that family.

use crate::kernel::Kernel;

/// One kernel family's calibration reference.
pub struct Family {
    /// Family name, as used in `capabilities.throughput`.
    pub name: &'static str,
    /// Builds the reference kernel.
    pub reference: fn() -> Kernel,
    /// Arithmetic operations per item of the reference kernel.
    pub reference_flops_per_item: f64,
    /// Items of the first calibration dispatch; calibration grows the size from there until
    /// a dispatch takes long enough to time well on the device at hand.
    pub calibration_min_items: usize,
}

/// Every family that has a reference kernel.
pub fn families() -> &'static [Family] {
    &[
        Family {
            name: "geometric_algebra",
            reference: crate::ga::geometric_cl3_kernel,
            // 64 products and 56 sums per Cl(3,0) geometric product.
            reference_flops_per_item: 120.0,
            calibration_min_items: 1 << 14,
        },
        Family {
            name: "information_geometry",
            // Tiled empirical-Fisher SYRK, 128 score columns: one multiply-add (2 flops) per
            // upper-triangle entry and row.
            reference: crate::fisher::reference_kernel,
            reference_flops_per_item: crate::fisher::REFERENCE_FLOPS_PER_ITEM,
            calibration_min_items: 1 << 10,
        },
        Family {
            name: "tropical",
            // Tiled max-plus product of 64-row blocks of 256-wide rows by a 256 x 256
            // matrix: one add and one max per step.
            reference: crate::tropical::kernels::reference,
            reference_flops_per_item: crate::tropical::kernels::REFERENCE_FLOPS_PER_ITEM,
            calibration_min_items: 1,
        },
    ]
}

/// The family a workload's kernel belongs to: engine workloads are named
/// `family/kernel`; a bare name is a family name or a public method name.
pub fn family_of(kernel: &str) -> Option<&'static Family> {
    let family = match kernel.split_once('/') {
        Some((family, _)) => family,
        None => match kernel {
            "geometric_product" | "outer_product" | "inner_product" | "scalar_product"
            | "reverse" | "grade_involution" | "grade_projection" | "sandwich" | "normalize"
            | "dual" => "geometric_algebra",
            "tropical_matmul" | "tropical_matvec" | "shortest_paths" => "tropical",
            "fisher_information" | "fisher_categorical" | "fisher_gaussian" => {
                "information_geometry"
            }
            other => other,
        },
    };
    families().iter().find(|f| f.name == family)
}
