//! Kernels for the generated operations and the entry point that runs them through the
//! engine: shape checks naming the operand, broadcast of a single multivector (bound whole,
//! uploaded once per device), and a process-wide cache of generated kernels.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::algebra::Algebra;
use super::codegen::{generate, Broadcast};
use super::operation::{product_terms, sandwich_terms, Operation};
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel, Output};
use crate::plan::{Plan, Strategy};

/// Kernel id: algebra, operation and broadcast, so the per-device pipeline cache (keyed by
/// id) holds one pipeline per generated source.
pub fn kernel_id(algebra: &Algebra, op: Operation, broadcast: Broadcast) -> String {
    let (p, q, r) = algebra.signature();
    format!("ga_cl{p}{q}{r}_{}_{}", op.name(), broadcast.name())
}

/// The generated source and arithmetic per item of kernel `id`, made once per process.
/// Sources are kept for the life of the process like the pipelines compiled from them, so
/// they are leaked into `&'static str`s instead of being copied into every kernel.
fn generated(id: &str, make: impl FnOnce() -> (String, f64)) -> (&'static str, f64) {
    static GENERATED: OnceLock<Mutex<HashMap<String, (&'static str, f64)>>> = OnceLock::new();
    let mut generated = GENERATED
        .get_or_init(Default::default)
        .lock()
        .expect("generated-kernel cache");
    *generated.entry(id.to_string()).or_insert_with(|| {
        let (source, flops) = make();
        (Box::leak(source.into_boxed_str()), flops)
    })
}

/// Arithmetic per item, for the cost model: a multiply and an add per product term.
fn flops_per_item(algebra: &Algebra, op: Operation) -> f64 {
    let blades = algebra.blades() as f64;
    match op {
        Operation::Geometric | Operation::Outer | Operation::Inner | Operation::Scalar => {
            2.0 * product_terms(algebra, op).len() as f64
        }
        Operation::Sandwich => {
            let (first, second) = sandwich_terms(algebra);
            2.0 * (first.len() + second.len()) as f64
        }
        // abs, max, divide, square and add per word, a division per word for the result.
        Operation::Normalize => 6.0 * blades,
        _ => blades,
    }
}

/// The kernel of `op` in `algebra` (the operation must have passed [`Operation::check`]).
pub fn kernel(algebra: &Algebra, op: Operation, broadcast: Broadcast) -> Kernel {
    let id = kernel_id(algebra, op, broadcast);
    let words = algebra.blades();
    let inputs = (0..op.operands().len())
        .map(|slot| match (slot, broadcast) {
            (0, Broadcast::Left) | (1, Broadcast::Right) => Input::Whole(words),
            _ => Input::PerItem(words),
        })
        .collect();
    let (source, flops) = generated(&id, || {
        (
            generate(algebra, op, broadcast),
            flops_per_item(algebra, op),
        )
    });
    Kernel {
        inputs,
        output: Output::PerItem(op.output_words(algebra)),
        flops_per_item: flops,
        ..Kernel::map(id, "geometric_algebra", source)
    }
}

fn rows(name: &str, data: &[f32], words: usize) -> Result<usize> {
    if !data.len().is_multiple_of(words) {
        return Err(Error::Shape {
            argument: name.into(),
            expected: format!("(N, {words}) or ({words},)"),
            actual: format!("{} floats, not a multiple of {words}", data.len()),
        });
    }
    Ok(data.len() / words)
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
