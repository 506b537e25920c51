//! The tropical products on float64 host operands as callers holding plain `f64` slices
//! take them: the one entry of each product (`product`, which owns the checks and the run,
//! in float64 here) on the engine's words of the values, on the devices that run float64
//! kernels. A resident (DeviceArray) `a` of float64 goes to that entry directly.

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};
use crate::resident::{Destination, Operand, Ready};
use crate::tropical::product::{self, Operands};
use crate::tropical::scalar::Scalar;
use crate::tropical::semiring::Semiring;

/// A product's host operands in `T` as the caller gave them: `a` of shape `(m, k)` or
/// `(batch, m, k)`, `b` of shape `(k, n)` / `(batch, k, n)` (`(k,)` / `(batch, k)` for a
/// matrix-vector product), flat row-major.
#[derive(Clone, Copy)]
pub struct HostOperands<'a, T> {
    /// The semiring.
    pub semiring: Semiring,
    /// The left operand.
    pub a: &'a [T],
    /// The caller's shape of `a`.
    pub a_shape: &'a [usize],
    /// The right operand (or vector).
    pub b: &'a [T],
    /// The caller's shape of `b`.
    pub b_shape: &'a [usize],
}

impl<'a, T: Scalar> HostOperands<'a, T> {
    /// The operands as the products' entry takes them.
    fn operands(self) -> Operands<'a, T> {
        Operands {
            semiring: self.semiring,
            a: Operand::Host(T::words(self.a)),
            a_shape: self.a_shape,
            b: self.b,
            b_shape: self.b_shape,
        }
    }
}

/// `a[p] ⊗ b[p]` for every batch p on float64 host operands into `out` (of the result's
/// shape, `(m, n)` or `(batch, m, n)`), as `tropical::tropical_matmul` computes it:
/// exact, a finite term beyond float64 that decides an entry an error.
pub fn tropical_matmul_f64(
    ctx: &MultiGpuContext,
    operands: HostOperands<'_, f64>,
    out: &mut [f64],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    run(ctx, product::tropical_matmul(ctx, operands.operands())?, out, strategy)
}

/// `a[p] ⊗ x[p]` for every batch p on float64 host operands into `out` (`(m,)` or
/// `(batch, m)`), as [`tropical_matmul_f64`] otherwise.
pub fn tropical_matvec_f64(
    ctx: &MultiGpuContext,
    operands: HostOperands<'_, f64>,
    out: &mut [f64],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    run(ctx, product::tropical_matvec(ctx, operands.operands())?, out, strategy)
}

/// Runs a checked product into host `out`, giving its plan.
fn run(
    ctx: &MultiGpuContext,
    ready: Ready<'_>,
    out: &mut [f64],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    ready
        .run(ctx, Destination::Host(f64::words_mut(out)), strategy)?
        .plan
        .ok_or_else(|| Error::Internal("a product of host operands gave no plan".into()))
}
