//! Every kernel family with a definition (`kernel::FamilyDefinition`, written in the
//! family's folder and listed by the crate root's `families!`), in measuring order:
//! calibration measures each one's reference kernel, and a family's measured items/s on it,
//! times the reference kernel's arithmetic per item, gives the device's arithmetic rate for
//! every kernel of that family. The names of the public operations map back to their
//! family here too ([`Family::of`]).

use std::collections::BTreeMap;

use crate::family::Family;
use crate::kernel::FamilyDefinition;

/// Every family that has a definition, in measuring order; the first one also sizes the
/// transfer and group-speedup runs.
pub fn families() -> &'static [&'static FamilyDefinition] {
    &Family::DEFINITIONS
}

/// The definition of `family`, if it has one.
pub fn definition(family: Family) -> Option<&'static FamilyDefinition> {
    families().iter().copied().find(|r| r.family == family)
}

impl Family {
    /// The family a workload named from outside the crate belongs to: a family name, a
    /// public operation's name (from the families' definitions), or a kernel label
    /// `family/kernel` as profiles show them. Other names belong to no family (the cost
    /// model then uses the mean measured rate).
    pub fn of(kernel: &str) -> Option<Family> {
        let family = match kernel.split_once('/') {
            Some((family, _)) => family,
            None => {
                let operation = families().iter().find(|d| (d.is_operation)(kernel));
                if let Some(definition) = operation {
                    return Some(definition.family);
                }
                kernel
            }
        };
        Family::ALL.into_iter().find(|f| f.name() == family)
    }
}

/// The arithmetic rate that measured items/s per family (`family_items_per_s` of a device's
/// measurements) give kernels of `family`: the family's rate, or for a family with no
/// reference kernel (or none measured) the mean over the measured families.
pub fn flops_per_s(m: &BTreeMap<String, f64>, family: Option<Family>) -> f64 {
    family
        .and_then(definition)
        .and_then(|r| rate(m, r))
        .unwrap_or_else(|| mean_flops_per_s(m))
}

fn rate(m: &BTreeMap<String, f64>, r: &FamilyDefinition) -> Option<f64> {
    m.get(r.name())
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

#[cfg(test)]
mod tests {
    use super::*;

    // The names are the keys of calibration caches and histories already on disk: every
    // family keeps its name, and no two share one.
    #[test]
    fn families_keep_their_names() {
        let named = [
            (Family::GeometricAlgebra, "geometric_algebra"),
            (Family::Tropical, "tropical"),
            (Family::InformationGeometry, "information_geometry"),
            (Family::Stencil, "stencil"),
            (Family::Probe, "calibration"),
            (Family::Rows, "map_rows"),
        ];
        for (family, name) in named {
            assert_eq!(family.name(), name);
            assert_eq!(family.to_string(), name);
            assert!(
                Family::ALL.contains(&family),
                "{name} is not in Family::ALL"
            );
        }
        let mut names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Family::ALL.len(), "two families share a name");
    }

    // Each definition is its own family's, and the measuring order starts as it did (the
    // first family sizes the transfer and group-speedup runs).
    #[test]
    fn definitions_are_listed_once() {
        for d in families() {
            assert_eq!(definition(d.family).map(|r| r.name()), Some(d.name()));
            assert!(Family::ALL.contains(&d.family));
        }
        let measured: Vec<&str> = families().iter().map(|d| d.name()).collect();
        assert!(
            measured.starts_with(&["geometric_algebra", "information_geometry", "tropical"]),
            "{measured:?}"
        );
    }

    #[test]
    fn names_map_back_to_their_family() {
        for family in Family::ALL {
            assert_eq!(Family::of(family.name()), Some(family));
            assert_eq!(Family::of(&format!("{family}/k")), Some(family));
        }
        assert_eq!(Family::of("sandwich"), Some(Family::GeometricAlgebra));
        assert_eq!(Family::of("shortest_paths"), Some(Family::Tropical));
        assert_eq!(
            Family::of("fisher_gaussian"),
            Some(Family::InformationGeometry)
        );
        assert_eq!(Family::of("not_a_kernel"), None);
    }
}
