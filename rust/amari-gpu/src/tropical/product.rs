//! The public tropical products, one entry per operation for host and resident left
//! operands alike: the checks (shapes as the caller gave them, NaN, binding sizes; the
//! `checks` module), then a run over host operands through the engine (the `blocks` module)
//! or where a resident `a`'s rows live (the `resident` module). The result is a host array
//! or a resident one by the rule every operation follows (`Destination`).

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};
use crate::resident::{Destination, Operand, Outcome};
use crate::tropical::blocks::{run_matvec, run_product, BatchShape, Product};
use crate::tropical::checks::{self, largest_finite, may_overflow, reject_nan};
use crate::tropical::kernels;
use crate::tropical::resident::{self, ResidentProduct};
use crate::tropical::semiring::Semiring;

/// Which product kernel runs a matrix product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Workgroup-memory tiles and register blocking (what the public API uses).
    Tiled,
    /// One thread per output (the benchmark baseline).
    Naive,
}

/// Which product a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A matrix product, by this kernel.
    Matmul(Variant),
    /// A matrix-vector product.
    Matvec,
}

impl Kind {
    /// The right operand's argument name.
    pub(crate) fn right(self) -> &'static str {
        match self {
            Kind::Matmul(_) => "b",
            Kind::Matvec => "x",
        }
    }
}

/// A product's operands as the caller gave them: `a` of shape `(m, k)` or `(batch, m, k)`
/// (host words, or a resident array holding every axis but the last as rows), and the
/// right operand `b` of shape `(k, n)` / `(batch, k, n)` (`(k,)` / `(batch, k)` for a
/// matrix-vector product), bound whole on every device.
#[derive(Clone, Copy)]
pub struct Operands<'a> {
    /// The semiring.
    pub semiring: Semiring,
    /// The left operand.
    pub a: Operand<'a>,
    /// The caller's shape of `a`.
    pub a_shape: &'a [usize],
    /// The right operand (or vector), flat row-major.
    pub b: &'a [f32],
    /// The caller's shape of `b`.
    pub b_shape: &'a [usize],
}

/// `a[p] ⊗ b[p]` for every batch p in `semiring`, the result of shape `(m, n)` or
/// `(batch, m, n)` as `a` is batched. A finite term `a + b` beyond the float32 range that
/// decides an entry is an error (not a quiet ±inf); ±inf operands keep their tropical
/// meaning. `strategy` splits host operands; a resident `a` runs where its rows live.
pub fn tropical_matmul(
    ctx: &MultiGpuContext,
    operands: Operands<'_>,
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    tropical_matmul_with(ctx, Variant::Tiled, operands, out, strategy)
}

/// [`tropical_matmul`] with the kernel of host operands chosen explicitly (benchmarks and
/// tests compare them).
pub fn tropical_matmul_with(
    ctx: &MultiGpuContext,
    variant: Variant,
    operands: Operands<'_>,
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let shape = checks::matmul_shape(operands.a_shape, operands.b_shape)?;
    run(ctx, Kind::Matmul(variant), shape, operands, out, strategy)
}

/// `a[p] ⊗ x[p]` for every batch p: `a` of shape `(m, k)` / `(batch, m, k)`, `x` of shape
/// `(k,)` / `(batch, k)`, the result of shape `(m,)` / `(batch, m)`; as [`tropical_matmul`]
/// otherwise, except that a resident `a` cannot write into a resident `out`.
pub fn tropical_matvec(
    ctx: &MultiGpuContext,
    operands: Operands<'_>,
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let shape = checks::matvec_shape(operands.a_shape, operands.b_shape)?;
    run(ctx, Kind::Matvec, shape, operands, out, strategy)
}

/// The checks every product shares, then the run on host operands or where `a` lives.
fn run(
    ctx: &MultiGpuContext,
    kind: Kind,
    shape: BatchShape,
    operands: Operands<'_>,
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let Operands {
        semiring,
        a,
        a_shape,
        b,
        b_shape,
    } = operands;
    let right = kind.right();
    checks::check_operand("a", a, a_shape)?;
    checks::check_len(right, b.len(), b_shape)?;
    check_output(kind, shape, operands, &out)?;
    let top_a = match a {
        Operand::Host(a) => {
            reject_nan("a", a, a_shape)?;
            largest_finite(a)
        }
        Operand::Resident(a) => resident::checked_rows(ctx, a, a_shape)?,
    };
    reject_nan(right, b, b_shape)?;
    checks::check_whole_binding(ctx, right, b.len())?;
    let exact = may_overflow(top_a, largest_finite(b));
    match (a, out) {
        (Operand::Host(a), Destination::Host(out)) => {
            let product = Product {
                semiring,
                shape,
                a,
                b,
            };
            let plan = host_run(ctx, kind, product, out, strategy)?;
            if exact {
                checks::check_overflow(product, out)?;
            }
            Ok(Outcome {
                plan: Some(plan),
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

/// Refuses an `out` that cannot take the result: host words of another size, a resident
/// array for a matrix-vector product, or (with a resident `a`) a result of no columns.
fn check_output(
    kind: Kind,
    shape: BatchShape,
    operands: Operands<'_>,
    out: &Destination<'_>,
) -> Result<()> {
    let lead = &operands.a_shape[..operands.a_shape.len() - 1];
    let mut dims = lead.to_vec();
    if let Kind::Matmul(_) = kind {
        dims.push(shape.n);
    }
    let resident_a = matches!(operands.a, Operand::Resident(_));
    match out {
        Destination::Host(out) => checks::check_len("out", out.len(), &dims)?,
        Destination::Resident(Some(_)) if kind == Kind::Matvec && resident_a => {
            return Err(Error::invalid(
                "out",
                "expected a numpy array or None for tropical_matvec of a DeviceArray, got \
                 DeviceArray",
            ))
        }
        Destination::Resident(_) => {}
    }
    if resident_a && shape.n == 0 {
        let mut want = operands.b_shape.to_vec();
        want.pop();
        let want: Vec<String> = want.iter().map(usize::to_string).collect();
        return Err(Error::Shape {
            argument: "b".into(),
            expected: format!(
                "({}, n) with n >= 1 when a is a DeviceArray (a DeviceArray has no empty rows)",
                want.join(", ")
            ),
            actual: checks::shape_text(operands.b_shape),
        });
    }
    Ok(())
}

/// Runs a checked product on host operands through the engine.
pub(crate) fn host_run(
    ctx: &MultiGpuContext,
    kind: Kind,
    product: Product<'_>,
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    match kind {
        Kind::Matmul(Variant::Tiled) => {
            run_product(ctx, kernels::tiled, product, None, out, strategy)
        }
        Kind::Matmul(Variant::Naive) => {
            run_product(ctx, kernels::naive, product, None, out, strategy)
        }
        Kind::Matvec => run_matvec(ctx, product, out, strategy),
    }
}
