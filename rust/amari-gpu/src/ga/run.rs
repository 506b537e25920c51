//! The geometric-algebra entry points that run on a context: shape checks naming the
//! operand, broadcast of a single multivector, then a run through the engine over host
//! operands or where resident operands live (one entry, [`run`], for both).

use super::algebra::Algebra;
use super::cl3::{geometric_cl3_kernel, CL3_BLADES};
use super::codegen::Broadcast;
use super::kernels::kernel;
use super::operation::Operation;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};
use crate::resident::{Destination, Operand, Outcome};

/// The multivectors of an operand of `words` words each: host rows, or a resident
/// array's rows (of `words` words).
fn rows(name: &str, operand: Operand<'_>, words: usize) -> Result<usize> {
    let expected = format!("(N, {words}) or ({words},)");
    match operand {
        Operand::Host(data) => Error::rows(name, data, words, &expected),
        Operand::Resident(array) if array.cols() == words => Ok(array.rows()),
        Operand::Resident(array) => Err(Error::Shape {
            argument: name.into(),
            expected,
            actual: format!("({}, {})", array.rows(), array.cols()),
        }),
    }
}

/// The items of a call of `op` on `operands` and which operand, if any, is broadcast:
/// operands are batches of equal length, or one of a product's two operands is a single
/// multivector applied to every row of the other.
pub fn shape(algebra: &Algebra, op: Operation, operands: &[&[f32]]) -> Result<(usize, Broadcast)> {
    let operands: Vec<Operand<'_>> = operands.iter().map(|d| Operand::Host(d)).collect();
    shape_of(algebra, op, &operands)
}

/// [`shape`] of host or resident operands.
fn shape_of(
    algebra: &Algebra,
    op: Operation,
    operands: &[Operand<'_>],
) -> Result<(usize, Broadcast)> {
    op.check(algebra)?;
    let names = op.operands();
    if operands.len() != names.len() {
        return Err(Error::invalid(
            "operands",
            format!(
                "{} takes {} operands, got {}",
                op.name(),
                names.len(),
                operands.len()
            ),
        ));
    }
    let words = algebra.blades();
    let counts = names
        .iter()
        .zip(operands)
        .map(|(name, data)| rows(name, *data, words))
        .collect::<Result<Vec<_>>>()?;
    match counts[..] {
        [n] => Ok((n, Broadcast::None)),
        [n, m] if n == m => Ok((n, Broadcast::None)),
        [1, m] => Ok((m, Broadcast::Left)),
        [n, 1] => Ok((n, Broadcast::Right)),
        [n, m] => Err(Error::Shape {
            argument: names[1].into(),
            expected: format!("({n}, {words}) or ({words},)"),
            actual: format!("({m}, {words})"),
        }),
        _ => Err(Error::Internal(
            "an operation of one or two operands".into(),
        )),
    }
}

/// Runs `op` in `algebra` on operands of 2ⁿ words per multivector (see [`shape`] for
/// broadcasting), host rows or resident arrays, into `out` (items ×
/// `op.output_words(algebra)` words): over host operands through the planner, or, when an
/// operand is resident, where its rows live (host operands uploaded to match; the result by
/// the rule of [`Destination`]).
pub fn run(
    ctx: &MultiGpuContext,
    algebra: &Algebra,
    op: Operation,
    operands: &[Operand<'_>],
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let (items, broadcast) = shape_of(algebra, op, operands)?;
    let out_words = op.output_words(algebra);
    if let Destination::Host(out) = &out {
        if out.len() != items * out_words {
            return Err(Error::Shape {
                argument: "out".into(),
                expected: format!("({items}, {out_words})"),
                actual: format!("{} floats", out.len()),
            });
        }
    }
    let kernel = kernel(algebra, op, broadcast);
    let mut host = Vec::with_capacity(operands.len());
    for operand in operands {
        match operand {
            Operand::Host(data) => host.push(*data),
            Operand::Resident(_) => {
                let named: Vec<(&str, Operand<'_>)> = op
                    .operands()
                    .iter()
                    .copied()
                    .zip(operands.iter().copied())
                    .collect();
                return ctx.run_resident_to(&kernel, &named, out);
            }
        }
    }
    let Destination::Host(out) = out else {
        return Err(Error::invalid(
            "out",
            "expected a numpy array or None (a DeviceArray out is taken when an operand is a \
             DeviceArray), got DeviceArray",
        ));
    };
    let plan = ctx.run_map(&kernel, &host, out, items, strategy)?;
    Ok(Outcome {
        plan: Some(plan),
        array: None,
    })
}

/// [`run`] on host operands into host words: returns the plan.
pub fn apply(
    ctx: &MultiGpuContext,
    algebra: &Algebra,
    op: Operation,
    operands: &[&[f32]],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let operands: Vec<Operand<'_>> = operands.iter().map(|d| Operand::Host(d)).collect();
    run(
        ctx,
        algebra,
        op,
        &operands,
        Destination::Host(out),
        strategy,
    )?
    .plan
    .ok_or_else(|| Error::Internal("a run over host operands has a plan".into()))
}

fn check_batch(argument: &str, data: &[f32]) -> Result<usize> {
    Error::rows(argument, data, CL3_BLADES, &format!("(N, {CL3_BLADES})"))
}

/// `out[i] = a[i] b[i]` in Cl(3,0) for flat row-major batches of shape (N, 8).
pub fn geometric_product_cl3(
    ctx: &MultiGpuContext,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let n = check_batch("a", a)?;
    let nb = check_batch("b", b)?;
    if nb != n {
        return Err(Error::Shape {
            argument: "b".into(),
            expected: format!("({n}, {CL3_BLADES}) like a"),
            actual: format!("({nb}, {CL3_BLADES})"),
        });
    }
    if out.len() != a.len() {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({n}, {CL3_BLADES})"),
            actual: format!("{} floats", out.len()),
        });
    }
    ctx.run_map(&geometric_cl3_kernel(), &[a, b], out, n, strategy)
}
