//! Kernel families as a type. Every kernel names its family, so the cost model finds the
//! family's measured rate without parsing names; the family's name is the key of its rate in
//! `capabilities.throughput`, in the calibration cache and in the model's history. What a
//! family is beyond its name (operations, reference kernel) is its definition in its own
//! folder (`kernel::FamilyDefinition`); `Family::of` is with the list of them in
//! `calibration::families`.

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
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
