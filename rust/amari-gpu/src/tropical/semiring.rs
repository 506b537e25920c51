//! The two tropical semirings and their scalar operations on the host.

use super::scalar::Scalar;
use crate::error::{Error, Result};

/// Which tropical semiring a product is taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semiring {
    /// `⊕ = max`, `⊗ = +`, zero −inf.
    MaxPlus,
    /// `⊕ = min`, `⊗ = +`, zero +inf.
    MinPlus,
}

impl Semiring {
    /// Every semiring, in the order their names are listed in errors.
    pub const ALL: [Semiring; 2] = [Semiring::MaxPlus, Semiring::MinPlus];

    /// The public name ("max_plus" or "min_plus").
    pub fn name(self) -> &'static str {
        match self {
            Semiring::MaxPlus => "max_plus",
            Semiring::MinPlus => "min_plus",
        }
    }

    /// The semiring called `name`.
    pub fn parse(name: &str) -> Result<Semiring> {
        Semiring::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                Error::invalid(
                    "semiring",
                    format!("expected one of ['max_plus', 'min_plus'], got '{name}'"),
                )
            })
    }

    /// The tropical zero: the identity of ⊕, absorbing for ⊗.
    pub fn zero(self) -> f32 {
        self.zero_of()
    }

    /// The tropical zero in `T`.
    pub fn zero_of<T: Scalar>(self) -> T {
        match self {
            Semiring::MaxPlus => T::NEG_INFINITY,
            Semiring::MinPlus => T::INFINITY,
        }
    }

    /// +1 for max-plus, −1 for min-plus: the kernels compute min-plus as the negated
    /// max-plus product of negated operands, which is exact.
    pub fn sign(self) -> f32 {
        match self {
            Semiring::MaxPlus => 1.0,
            Semiring::MinPlus => -1.0,
        }
    }

    /// `x ⊗ y`, with the zero absorbing.
    pub fn mul<T: Scalar>(self, x: T, y: T) -> T {
        let zero = self.zero_of::<T>();
        if x == zero || y == zero {
            zero
        } else {
            x + y
        }
    }

    /// `x ⊕ y`.
    pub fn add(self, x: f32, y: f32) -> f32 {
        match self {
            Semiring::MaxPlus => x.max(y),
            Semiring::MinPlus => x.min(y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_absorbing_against_the_opposite_infinity() {
        assert_eq!(
            Semiring::MaxPlus.mul(f32::NEG_INFINITY, f32::INFINITY),
            f32::NEG_INFINITY
        );
        assert_eq!(
            Semiring::MinPlus.mul(f32::NEG_INFINITY, f32::INFINITY),
            f32::INFINITY
        );
        assert_eq!(Semiring::MinPlus.mul(1.5, 2.0), 3.5);
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for s in Semiring::ALL {
            assert_eq!(Semiring::parse(s.name()), Ok(s));
        }
        assert!(Semiring::parse("plus_times")
            .unwrap_err()
            .to_string()
            .starts_with("semiring:"));
    }
}
