//! The public tropical products, one entry per operation for host and resident left
//! operands alike: the checks (shapes as the caller gave them, NaN, binding sizes; the
//! `checks` module), then a run over host operands through the engine (the `blocks` module)
//! or where a resident `a`'s rows live (the `resident` module). The result is a host array
//! or a resident one by the rule every operation follows (`Destination`). Each computes in
//! the dtype of its values, float32 or float64 (`T`); a resident `a` must hold that dtype.

use crate::context::MultiGpuContext;
use crate::error::{shape_text, Error, Result};
use crate::plan::Strategy;
use crate::resident::{Destination, Operand, Outcome, Ready, ResidentArray};
pub use crate::tropical::blocks::Variant;
use crate::tropical::blocks::{host_run, BatchShape, Kind, Product};
use crate::tropical::checks::{self, checked_magnitude, may_overflow};
use crate::tropical::resident::{self, ResidentProduct};
use crate::tropical::scalar::Scalar;
use crate::tropical::semiring::Semiring;

/// A product's operands as the caller gave them: `a` of shape `(m, k)` or `(batch, m, k)`
/// (host words, or a resident array holding every axis but the last as rows), and the
/// right operand `b` of shape `(k, n)` / `(batch, k, n)` (`(k,)` / `(batch, k)` for a
/// matrix-vector product), bound whole on every device; values of `T` (a host `a` as the
/// engine's words of them).
#[derive(Clone, Copy)]
pub struct Operands<'a, T = f32> {
    /// The semiring.
    pub semiring: Semiring,
    /// The left operand.
    pub a: Operand<'a>,
    /// The caller's shape of `a`.
    pub a_shape: &'a [usize],
    /// The right operand (or vector), flat row-major.
    pub b: &'a [T],
    /// The caller's shape of `b`.
    pub b_shape: &'a [usize],
}

/// `a[p] ⊗ b[p]` for every batch p in `semiring`, the result of shape `(m, n)` or
/// `(batch, m, n)` as `a` is batched: the operands checked, and what runs the product
/// (`strategy` splits host operands; a resident `a` runs where its rows live). A finite
/// term `a + b` beyond the range of `T` that decides an entry is an error when it runs
/// (not a quiet ±inf); ±inf operands keep their tropical meaning.
pub fn tropical_matmul<'a, T: Scalar>(
    ctx: &MultiGpuContext,
    operands: Operands<'a, T>,
) -> Result<Ready<'a>> {
    tropical_matmul_with(ctx, Variant::Tiled, operands)
}

/// [`tropical_matmul`] with host operands run by the `variant` kernel (benchmarks and
/// tests compare them).
pub fn tropical_matmul_with<'a, T: Scalar>(
    ctx: &MultiGpuContext,
    variant: Variant,
    operands: Operands<'a, T>,
) -> Result<Ready<'a>> {
    let shape = checks::matmul_shape(operands.a_shape, operands.b_shape)?;
    check(ctx, Kind::Matmul(variant), shape, operands)
}

/// `a[p] ⊗ x[p]` for every batch p: `a` of shape `(m, k)` / `(batch, m, k)`, `x` of shape
/// `(k,)` / `(batch, k)`, the result of shape `(m,)` / `(batch, m)`; as [`tropical_matmul`]
/// otherwise, except that a resident `a` cannot write into a resident `out`.
pub fn tropical_matvec<'a, T: Scalar>(
    ctx: &MultiGpuContext,
    operands: Operands<'a, T>,
) -> Result<Ready<'a>> {
    let shape = checks::matvec_shape(operands.a_shape, operands.b_shape)?;
    check(ctx, Kind::Matvec, shape, operands)
}

/// The checks of [`tropical_matmul`] that need no context, on host operands only (in their
/// dtype `T`): the shapes as the caller gave them, the operands' words and NaN, in the words of the
/// context's call. A driver that splits one call over several contexts (a cluster) runs
/// them on the whole call first, so its errors name the caller's positions and shapes.
pub fn check_matmul_operands<T: Scalar>(operands: Operands<'_, T>) -> Result<()> {
    let shape = checks::matmul_shape(operands.a_shape, operands.b_shape)?;
    operand_checks(Kind::Matmul(Variant::Tiled), shape, operands, host_only).map(drop)
}

/// The checks of [`tropical_matvec`] that need no context (as [`check_matmul_operands`]).
pub fn check_matvec_operands<T: Scalar>(operands: Operands<'_, T>) -> Result<()> {
    let shape = checks::matvec_shape(operands.a_shape, operands.b_shape)?;
    operand_checks(Kind::Matvec, shape, operands, host_only).map(drop)
}

/// A resident `a`'s rows are checked where they live, through its context.
fn host_only(_: &ResidentArray) -> Result<f64> {
    Err(Error::invalid(
        "a",
        "expected a numpy array (a DeviceArray is checked through its context), got \
         DeviceArray",
    ))
}

/// The checks every product shares: the operands' words, NaN (a resident `a`'s from its
/// row statistics, computed where its rows live), the whole-bound operand's size.
fn check<'a, T: Scalar>(
    ctx: &MultiGpuContext,
    kind: Kind,
    shape: BatchShape,
    operands: Operands<'a, T>,
) -> Result<Ready<'a>> {
    // Host operands large enough for a parallel scan are read on the host device's threads.
    let large = matches!(operands.a, Operand::Host(_)) && checks::scanned_in_parallel(operands.b.len());
    let (top_a, top_b) = ctx.on_host_threads(large, || {
        operand_checks(kind, shape, operands, |a| {
            resident::checked_rows(ctx, a, operands.a_shape)
        })
    })?;
    checks::check_whole_binding(ctx, kind.right(), T::words(operands.b).len())?;
    // Whether a term could overflow `T` (the exact check then runs).
    let exact = may_overflow(top_a, top_b, T::MAX);
    Ok(Ready::new(move |ctx, out, strategy| {
        run(ctx, (kind, shape, exact), operands, out, strategy)
    }))
}

/// The checks of a product's operands that need no context but a resident `a`'s
/// (`resident_rows`: its NaN check, giving its largest finite magnitude): the words of
/// both operands, NaN in the caller's positions. Returns both operands' largest finite
/// magnitudes (one read of each operand gives its NaN check and its magnitude).
fn operand_checks<T: Scalar>(
    kind: Kind,
    shape: BatchShape,
    operands: Operands<'_, T>,
    resident_rows: impl FnOnce(&ResidentArray) -> Result<f64>,
) -> Result<(f64, f64)> {
    let Operands {
        a,
        a_shape,
        b,
        b_shape,
        ..
    } = operands;
    let right = kind.right();
    checks::check_operand("a", a, a_shape, T::DTYPE)?;
    checks::check_len(right, b.len(), b_shape)?;
    if matches!(a, Operand::Resident(_)) && shape.n == 0 {
        let mut want: Vec<String> = b_shape.iter().map(usize::to_string).collect();
        want.pop();
        return Err(Error::Shape {
            argument: "b".into(),
            expected: format!(
                "({}, n) with n >= 1 when a is a DeviceArray (a DeviceArray has no empty rows)",
                want.join(", ")
            ),
            actual: shape_text(b_shape),
        });
    }
    let top_a = match a {
        Operand::Host(a) => checked_magnitude("a", &T::values(a), a_shape)?,
        Operand::Resident(a) => resident_rows(a)?,
    };
    Ok((top_a, checked_magnitude(right, b, b_shape)?))
}

/// Runs a checked product into `out` (checked first): over host operands through the
/// engine, or where a resident `a`'s rows live.
fn run<T: Scalar>(
    ctx: &MultiGpuContext,
    (kind, shape, exact): (Kind, BatchShape, bool),
    operands: Operands<'_, T>,
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    check_output(kind, shape, operands, &out)?;
    let Operands { semiring, a, b, .. } = operands;
    match (a, out) {
        (Operand::Host(a), Destination::Host(out)) => {
            let a = T::values(a);
            let product = Product {
                semiring,
                shape,
                a: &a,
                b,
            };
            let mut ran = Ok(None);
            T::with_values_mut(out, |out| {
                ran = host_run(ctx, kind, product, out, strategy).and_then(|plan| {
                    if exact {
                        checks::check_overflow(product, out)?;
                    }
                    Ok(Some(plan))
                });
            });
            Ok(Outcome {
                plan: ran?,
                array: None,
            })
        }
        (Operand::Resident(a), out) => {
            let product = ResidentProduct {
                a,
                b,
                shape,
                semiring,
            };
            resident::run(ctx, kind, product, out, exact)
        }
        (Operand::Host(_), Destination::Resident(_)) => Err(Error::invalid(
            "out",
            "expected a numpy array or None (a DeviceArray out is taken when a is a \
             DeviceArray), got DeviceArray",
        )),
    }
}

/// Refuses an `out` that cannot take the result: host words of another size, or a resident
/// array for a matrix-vector product of a resident `a`.
fn check_output<T: Scalar>(
    kind: Kind,
    shape: BatchShape,
    operands: Operands<'_, T>,
    out: &Destination<'_>,
) -> Result<()> {
    let lead = &operands.a_shape[..operands.a_shape.len() - 1];
    let mut dims = lead.to_vec();
    if let Kind::Matmul(_) = kind {
        dims.push(shape.n);
    }
    let resident_a = matches!(operands.a, Operand::Resident(_));
    match out {
        Destination::Host(out) => {
            checks::check_len("out", out.len() * 4 / T::DTYPE.bytes(), &dims)?
        }
        Destination::Resident(Some(_)) if kind == Kind::Matvec && resident_a => {
            return Err(Error::invalid(
                "out",
                "expected a numpy array or None for tropical_matvec of a DeviceArray, got \
                 DeviceArray",
            ))
        }
        Destination::Resident(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_free_checks_speak_in_the_callers_terms() {
        let a = [0.0f32; 6 * 2];
        let mut nan_a = a;
        nan_a[4 * 2 + 1] = f32::NAN;
        let b = [0.0f32; 2 * 3];
        let matmul = |a: &[f32]| {
            check_matmul_operands(Operands {
                semiring: Semiring::MaxPlus,
                a: Operand::Host(a),
                a_shape: &[6, 2],
                b: &b,
                b_shape: &[2, 3],
            })
        };
        assert!(matmul(&a).is_ok());
        let err = matmul(&nan_a).unwrap_err();
        assert!(
            err.to_string().contains("at [4, 1] of shape (6, 2)"),
            "{err}"
        );
        let err = check_matvec_operands(Operands {
            semiring: Semiring::MaxPlus,
            a: Operand::Host(&a),
            a_shape: &[6, 2],
            b: &b[..3],
            b_shape: &[3],
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "x: expected shape (2,), got (3,)");
    }
}
