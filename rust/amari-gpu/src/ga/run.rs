//! The geometric-algebra entry points that run on a context: shape checks naming the
//! operand, broadcast of a single multivector, then a run through the engine over host
//! operands or where resident operands live (one entry, [`check`], for both).

use super::algebra::Algebra;
use super::cl3::{geometric_cl3_kernel, CL3_BLADES};
use super::codegen::Broadcast;
use super::kernels::kernel;
use super::operation::Operation;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};
use crate::resident::{Destination, Operand, Ready};

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

/// `op` in `algebra` on operands of 2ⁿ words per multivector (see [`shape`] for
/// broadcasting), host rows or resident arrays: the operands checked, and what runs it into
/// `out` (items × `op.output_words(algebra)` words) by the rule of every map operation:
/// over host operands through the planner, or, when an operand is resident, where its rows
/// live (host operands uploaded to match).
pub fn check<'a>(
    algebra: &Algebra,
    op: Operation,
    operands: &'a [Operand<'a>],
) -> Result<Ready<'a>> {
    let (items, broadcast) = shape_of(algebra, op, operands)?;
    let kernel = kernel(algebra, op, broadcast);
    Ok(Ready::new(move |ctx, out, strategy| {
        let named: Vec<(&str, Operand<'_>)> = op
            .operands()
            .iter()
            .copied()
            .zip(operands.iter().copied())
            .collect();
        ctx.run_map_to(&kernel, &named, items, out, strategy)
    }))
}

/// [`check`] and run on host operands into host words: returns the plan.
pub fn apply(
    ctx: &MultiGpuContext,
    algebra: &Algebra,
    op: Operation,
    operands: &[&[f32]],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let operands: Vec<Operand<'_>> = operands.iter().map(|d| Operand::Host(d)).collect();
    let ran = check(algebra, op, &operands)?.run(ctx, Destination::Host(out), strategy)?;
    ran.plan
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
