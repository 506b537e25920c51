//! Kernel families as a type. Every kernel names its family, so the cost model finds the
//! family's measured rate without parsing names; the family's name is the key of its rate in
//! `capabilities.throughput`, in the calibration cache and in the model's history, and a
//! family is nothing but that name. A kernel family declares its own `Family` constant and
//! its definition (`kernel::FamilyDefinition`: operations, reference kernel) in its folder's
//! `mod.rs`, and is registered by one line of the crate root's `families!` list, which
//! declares its module and makes [`Family::ALL`] and the list calibration measures. The
//! families here are the engine's own, with no definition: calibration does not measure
//! them. `Family::of` is with the list of definitions in `calibration::families`.

use std::fmt;

/// A family of kernels that share a calibration reference and a cost model, identified by
/// its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Family(&'static str);

/// Declares families: `Family` constants, each `Variant = "name";` with its doc. They are
/// named like the enum variants the families were, so code that names one (`Family::Rows`,
/// in this crate and its users') reads as before. A kernel family declares its own in its
/// folder; two families must not share a name (`calibration::families`' tests check it).
macro_rules! declare_family {
    ($($(#[$doc:meta])* $family:ident = $name:literal;)+) => {
        #[allow(non_upper_case_globals)]
        impl $crate::family::Family {
            $(
                $(#[$doc])*
                pub const $family: $crate::family::Family = $crate::family::Family::named($name);
            )+
        }
    };
}
pub(crate) use declare_family;

declare_family! {
    /// Grid steps (heat, Game of Life), run by the domain engine rather than the planner.
    Stencil = "stencil";
    /// Calibration's own micro-benchmarks (arithmetic peak, streaming copy).
    Probe = "calibration";
    /// Users' own row kernels (`map_rows`): no reference kernel, so the cost model uses
    /// the mean of the measured families' rates.
    Rows = "map_rows";
}

impl Family {
    /// The family named `name`: what `declare_family!` declares a constant with.
    pub(crate) const fn named(name: &'static str) -> Family {
        Family(name)
    }

    /// The family's name: the key of its figures in capabilities, cache and history.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
