//! What a grid run is asked to do: the update rule (and its kernel), the boundary condition
//! and the run options. Shared by the entry points and every part of the run.

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::kernel::Kernel;

/// The line of `shaders/heat.wgsl` naming the cells' type, the one line a dtype changes.
const HEAT_ELEMENT: &str = "alias Real = f32;";

/// `shaders/heat.wgsl` computing in `dtype`: the file itself for float32; for float64 the
/// same text with the cells' type aliased to `f64` (made once per process), so both kernels
/// are one source with one arithmetic. Grids compute only in float32 and float64.
fn heat_source(dtype: Dtype) -> Cow<'static, str> {
    static F64: OnceLock<String> = OnceLock::new();
    match dtype {
        Dtype::F64 => Cow::Borrowed(
            F64.get_or_init(|| crate::shaders::HEAT.replacen(HEAT_ELEMENT, "alias Real = f64;", 1))
                .as_str(),
        ),
        Dtype::F16 | Dtype::F32 => Cow::Borrowed(crate::shaders::HEAT),
    }
}

/// The update rule of a grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// u ← u + α(u_up + u_down + u_left + u_right − 4u), cells of `dtype`.
    Heat {
        /// Diffusion number, stable for 0 ≤ α ≤ 1/4, a value of `dtype` (a float32 one
        /// held exactly in float64).
        alpha: f64,
        /// What the cells are and the steps compute in: float32 or float64.
        dtype: Dtype,
    },
    /// Conway's Game of Life, cells 0 or 1, always on a torus.
    Life,
}

impl Rule {
    pub(super) fn name(self) -> &'static str {
        match self {
            Rule::Heat { .. } => "domain/heat",
            Rule::Life => "domain/life",
        }
    }

    /// What the cells are: Life's packed words count as float32 (every device runs them).
    pub(super) fn dtype(self) -> Dtype {
        match self {
            Rule::Heat { dtype, .. } => dtype,
            Rule::Life => Dtype::F32,
        }
    }

    pub(super) fn kernel(self) -> Kernel {
        let source = match self {
            Rule::Heat { dtype, .. } => heat_source(dtype),
            Rule::Life => Cow::Borrowed(crate::shaders::LIFE),
        };
        Kernel {
            dtype: self.dtype(),
            ..Kernel::map(self.name(), Family::Stencil, source)
        }
    }

    /// Operations a step does per cell as the shaders and host kernels write it. Heat: three
    /// adds of the neighbours, `4u`, the difference and a multiply-add (7). Life: the
    /// neighbour count adds four packed cells a word at a time (7 word adds per 4 cells),
    /// then per cell 2 shifts, 2 masks, 3 compares, a select, a shift and an or (about 12).
    pub(super) fn ops_per_cell(self) -> f64 {
        match self {
            Rule::Heat { .. } => 7.0,
            Rule::Life => 12.0,
        }
    }

    /// Bytes a step reads and writes per cell at the least (for the plan's estimates).
    pub(super) fn bytes_per_cell(self) -> f64 {
        match self {
            Rule::Heat { dtype, .. } => 2.0 * dtype.bytes() as f64,
            Rule::Life => 2.0,
        }
    }
}

/// What lies beyond the grid's edges (heat; Life is always periodic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The outermost rows and columns keep their initial values.
    Dirichlet,
    /// The grid wraps in both directions.
    Periodic,
}

impl Boundary {
    /// Every boundary condition, in documentation order.
    pub const ALL: [Boundary; 2] = [Boundary::Dirichlet, Boundary::Periodic];

    /// The public name.
    pub fn name(self) -> &'static str {
        match self {
            Boundary::Dirichlet => "dirichlet",
            Boundary::Periodic => "periodic",
        }
    }

    /// Parses "dirichlet" or "periodic".
    pub fn parse(name: &str) -> Result<Self> {
        Boundary::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| {
                Error::invalid(
                    "boundary",
                    format!("expected \"dirichlet\" or \"periodic\", got {name:?}"),
                )
            })
    }
}

/// How to run a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Steps to run.
    pub steps: u64,
    /// Steps between exchanges (ghost rows on each side of a band).
    pub halo: usize,
    /// Whether bands move between devices as round times are measured.
    pub rebalance: bool,
    /// Rows per device id for the first layout (0 for a device without rows); `None`
    /// splits by the devices' measured streaming bandwidth.
    pub split: Option<Vec<usize>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The float64 heat kernel is `shaders/heat.wgsl` with one line changed, and validates
    /// with float64 only (the float32 one without).
    #[test]
    fn the_heat_kernel_validates_in_each_dtype_from_one_source() {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let valid = |dtype, caps| {
            let kernel = Rule::Heat { alpha: 0.2, dtype }.kernel();
            assert_eq!(kernel.dtype, dtype);
            let module = naga::front::wgsl::parse_str(&kernel.source).expect("parses");
            Validator::new(ValidationFlags::all(), caps)
                .validate(&module)
                .is_ok()
        };
        assert!(valid(Dtype::F32, Capabilities::empty()));
        assert!(valid(Dtype::F64, Capabilities::FLOAT64));
        assert!(
            !valid(Dtype::F64, Capabilities::empty()),
            "f64 cells need FLOAT64"
        );
        let f64 = heat_source(Dtype::F64);
        assert_eq!(
            f64.replace("alias Real = f64;", HEAT_ELEMENT),
            crate::shaders::HEAT
        );
        assert!(f64.contains("fma(vec4<Real>(p.alpha), s - 4.0 * u, u)"));
        assert_eq!(
            Rule::Heat {
                alpha: 0.2,
                dtype: Dtype::F64
            }
            .bytes_per_cell(),
            16.0
        );
    }
}
