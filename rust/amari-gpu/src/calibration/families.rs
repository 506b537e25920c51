//! The reference kernel each calibrated family is measured with. A family's measured items/s
//! on its reference kernel, times the reference kernel's arithmetic per item, gives the
//! device's arithmetic rate for every kernel of that family.

use std::collections::BTreeMap;

use crate::family::Family;
use crate::kernel::Kernel;

/// One kernel family's calibration reference.
pub struct Reference {
    /// The family's name ([`Family::name`]): the key of its measured items/s.
    pub name: &'static str,
    /// Builds the reference kernel.
    pub reference: fn() -> Kernel,
    /// Arithmetic operations per item of the reference kernel.
    pub reference_flops_per_item: f64,
    /// Items of the first calibration dispatch; calibration grows the size from there until
    /// a dispatch takes long enough to time well on the device at hand.
    pub calibration_min_items: usize,
}

/// Every family that has a reference kernel, in measuring order; the first one also sizes
/// the transfer and group-speedup runs.
pub fn families() -> &'static [Reference] {
    &FAMILIES
}

static FAMILIES: [Reference; 3] = [
    Reference {
        name: Family::GeometricAlgebra.name(),
        reference: crate::ga::cl3::geometric_cl3_kernel,
        // 64 products and 56 sums per Cl(3,0) geometric product.
        reference_flops_per_item: 120.0,
        calibration_min_items: 1 << 14,
    },
    Reference {
        name: Family::InformationGeometry.name(),
        // Tiled empirical-Fisher SYRK, 128 score columns: one multiply-add (2 flops) per
        // upper-triangle entry and row.
        reference: crate::fisher::syrk::reference_kernel,
        reference_flops_per_item: crate::fisher::syrk::REFERENCE_FLOPS_PER_ITEM,
        calibration_min_items: 1 << 10,
    },
    Reference {
        name: Family::Tropical.name(),
        // Tiled max-plus product of 64-row blocks of 256-wide rows by a 256 x 256
        // matrix: one add and one max per step.
        reference: crate::tropical::kernels::reference,
        reference_flops_per_item: crate::tropical::kernels::REFERENCE_FLOPS_PER_ITEM,
        calibration_min_items: 1,
    },
];

/// The calibration reference of `family`, if it has one.
pub fn reference(family: Family) -> Option<&'static Reference> {
    families().iter().find(|r| r.name == family.name())
}

/// The arithmetic rate that measured items/s per family (`family_items_per_s` of a device's
/// measurements) give kernels of `family`: the family's rate, or for a family with no
/// reference kernel (or none measured) the mean over the measured families.
pub fn flops_per_s(m: &BTreeMap<String, f64>, family: Option<Family>) -> f64 {
    family
        .and_then(reference)
        .and_then(|r| rate(m, r))
        .unwrap_or_else(|| mean_flops_per_s(m))
}

fn rate(m: &BTreeMap<String, f64>, r: &Reference) -> Option<f64> {
    m.get(r.name)
        .map(|items| items * r.reference_flops_per_item)
}

/// Arithmetic rate averaged over the measured families: the estimate for a family that has
/// no reference kernel yet.
fn mean_flops_per_s(m: &BTreeMap<String, f64>) -> f64 {
    let rates: Vec<f64> = families().iter().filter_map(|r| rate(m, r)).collect();
    if rates.is_empty() {
        1e9
    } else {
        rates.iter().sum::<f64>() / rates.len() as f64
    }
}
