//! The tropical products on float64 host operands: the checks of the float32 products
//! (shapes in the caller's terms, NaN at its position, the whole-bound operand's size, the
//! exact overflow check when a term could leave float64) and the run through the engine in
//! float64 (`blocks`), on the devices that run float64 kernels. A resident (DeviceArray) `a`
//! is float32 only, so these take host operands alone.

use crate::context::MultiGpuContext;
use crate::error::Result;
use crate::plan::{Plan, Strategy};
use crate::tropical::blocks::{host_run, BatchShape, Kind, Product, Variant};
use crate::tropical::checks::{self, may_overflow, nan_error, unravel};
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

/// `a[p] ⊗ b[p]` for every batch p on float64 host operands into `out` (of the result's
/// shape, `(m, n)` or `(batch, m, n)`), as `tropical::tropical_matmul` computes it in
/// float32: exact, a finite term beyond float64 that decides an entry an error.
pub fn tropical_matmul_f64(
    ctx: &MultiGpuContext,
    operands: HostOperands<'_, f64>,
    out: &mut [f64],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let shape = checks::matmul_shape(operands.a_shape, operands.b_shape)?;
    run(ctx, (Kind::Matmul(Variant::Tiled), shape), operands, out, strategy)
}

/// `a[p] ⊗ x[p]` for every batch p on float64 host operands into `out` (`(m,)` or
/// `(batch, m)`), as [`tropical_matmul_f64`] otherwise.
pub fn tropical_matvec_f64(
    ctx: &MultiGpuContext,
    operands: HostOperands<'_, f64>,
    out: &mut [f64],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let shape = checks::matvec_shape(operands.a_shape, operands.b_shape)?;
    run(ctx, (Kind::Matvec, shape), operands, out, strategy)
}

/// The checks of [`tropical_matmul_f64`] that need no context (shapes, NaN), in the words
/// of the product's own: a cluster's driver runs them on the whole call before it splits it.
pub fn check_matmul_f64_operands(operands: HostOperands<'_, f64>) -> Result<()> {
    checks::matmul_shape(operands.a_shape, operands.b_shape)?;
    operand_checks(Kind::Matmul(Variant::Tiled), operands).map(drop)
}

/// The checks of [`tropical_matvec_f64`] that need no context (as
/// [`check_matmul_f64_operands`]).
pub fn check_matvec_f64_operands(operands: HostOperands<'_, f64>) -> Result<()> {
    checks::matvec_shape(operands.a_shape, operands.b_shape)?;
    operand_checks(Kind::Matvec, operands).map(drop)
}

/// The operands' lengths against their shapes and their first NaN; returns the largest
/// finite magnitude of `a` and of `b` (for the overflow check).
fn operand_checks<T: Scalar>(kind: Kind, operands: HostOperands<'_, T>) -> Result<(f64, f64)> {
    let right = kind.right();
    checks::check_len("a", operands.a.len(), operands.a_shape)?;
    checks::check_len(right, operands.b.len(), operands.b_shape)?;
    let top_a = scan("a", operands.a, operands.a_shape)?;
    Ok((top_a, scan(right, operands.b, operands.b_shape)?))
}

/// The first NaN of `data` (of shape `dims`) as the error naming `argument`, and otherwise
/// the largest finite magnitude.
fn scan<T: Scalar>(argument: &str, data: &[T], dims: &[usize]) -> Result<f64> {
    if let Some(flat) = data.iter().position(|v| v.is_nan()) {
        return Err(nan_error(argument, &unravel(flat, dims), dims));
    }
    Ok(data
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.to_f64().abs())))
}

/// Checks and runs one product (every check before anything is written).
fn run<T: Scalar>(
    ctx: &MultiGpuContext,
    (kind, shape): (Kind, BatchShape),
    operands: HostOperands<'_, T>,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let HostOperands {
        semiring,
        a,
        a_shape,
        b,
        ..
    } = operands;
    let right = kind.right();
    let (top_a, top_b) = operand_checks(kind, operands)?;
    checks::check_whole_binding(ctx, right, T::words(b).len())?;
    let mut dims = a_shape[..a_shape.len() - 1].to_vec();
    if let Kind::Matmul(_) = kind {
        dims.push(shape.n);
    }
    checks::check_len("out", out.len(), &dims)?;
    let product = Product {
        semiring,
        shape,
        a,
        b,
    };
    let plan = host_run(ctx, kind, product, out, strategy)?;
    if may_overflow(top_a, top_b, T::MAX) {
        checks::check_overflow(product, out)?;
    }
    Ok(plan)
}
