//! Kernel families as a type. Every kernel names its family, so the cost model finds the
//! family's measured rate without parsing names; the family's name is the key of its rate in
//! `capabilities.throughput`, in the calibration cache and in the model's history.

use std::fmt;

/// A family of kernels that share a calibration reference and a cost model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Geometric-algebra products and maps over batches of multivectors.
    GeometricAlgebra,
    /// Max-plus and min-plus products and shortest paths.
    Tropical,
    /// Fisher information matrices.
    InformationGeometry,
    /// Grid steps (heat, Game of Life), run by the domain engine rather than the planner.
    Stencil,
    /// Calibration's own micro-benchmarks (arithmetic peak, streaming copy).
    Probe,
    /// Users' own row kernels (`map_rows`): no reference kernel, so the cost model uses
    /// the mean of the measured families' rates.
    Rows,
}

impl Family {
    /// Every family.
    pub const ALL: [Family; 6] = [
        Family::GeometricAlgebra,
        Family::Tropical,
        Family::InformationGeometry,
        Family::Stencil,
        Family::Probe,
        Family::Rows,
    ];

    /// The family's name: the key of its figures in capabilities, cache and history.
    pub const fn name(self) -> &'static str {
        match self {
            Family::GeometricAlgebra => "geometric_algebra",
            Family::Tropical => "tropical",
            Family::InformationGeometry => "information_geometry",
            Family::Stencil => "stencil",
            Family::Probe => "calibration",
            Family::Rows => "map_rows",
        }
    }

    /// The family a workload named from outside the crate belongs to: a family name, a
    /// public method name, or a kernel label `family/kernel` as profiles show them. Other
    /// names belong to no family (the cost model then uses the mean measured rate).
    pub fn of(kernel: &str) -> Option<Family> {
        let family = match kernel.split_once('/') {
            Some((family, _)) => family,
            None => match kernel {
                "geometric_product" | "outer_product" | "inner_product" | "scalar_product"
                | "reverse" | "grade_involution" | "grade_projection" | "sandwich"
                | "normalize" | "dual" => return Some(Family::GeometricAlgebra),
                "tropical_matmul" | "tropical_matvec" | "shortest_paths" => {
                    return Some(Family::Tropical)
                }
                "fisher_information" | "fisher_categorical" | "fisher_gaussian" => {
                    return Some(Family::InformationGeometry)
                }
                other => other,
            },
        };
        Family::ALL.into_iter().find(|f| f.name() == family)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
