//! The geometric-algebra entry points that run on a context: shape checks naming the
//! operand, broadcast of a single multivector, then a run through the engine.

use super::algebra::Algebra;
use super::cl3::{geometric_cl3_kernel, CL3_BLADES};
use super::codegen::Broadcast;
use super::kernels::kernel;
use super::operation::Operation;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};

fn rows(name: &str, data: &[f32], words: usize) -> Result<usize> {
    Error::rows(name, data, words, &format!("(N, {words}) or ({words},)"))
}

/// The items of a call of `op` on `operands` and which operand, if any, is broadcast:
/// operands are batches of equal length, or one of a product's two operands is a single
/// multivector applied to every row of the other.
pub fn shape(algebra: &Algebra, op: Operation, operands: &[&[f32]]) -> Result<(usize, Broadcast)> {
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
        .map(|(name, data)| rows(name, data, words))
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
        _ => unreachable!("one or two operands"),
    }
}

/// Runs `op` in `algebra` on flat row-major operands of 2ⁿ words per multivector (see
/// [`shape`] for broadcasting) and writes `out`: items × `op.output_words(algebra)` words.
pub fn apply(
    ctx: &MultiGpuContext,
    algebra: &Algebra,
    op: Operation,
    operands: &[&[f32]],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let (items, broadcast) = shape(algebra, op, operands)?;
    let out_words = op.output_words(algebra);
    if out.len() != items * out_words {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({items}, {out_words})"),
            actual: format!("{} floats", out.len()),
        });
    }
    ctx.run_map(
        &kernel(algebra, op, broadcast),
        operands,
        out,
        items,
        strategy,
    )
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
