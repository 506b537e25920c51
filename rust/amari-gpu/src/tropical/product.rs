//! The public tropical products: argument checks (shapes, NaN, binding sizes), then a run
//! through the engine (see [`blocks`](crate::tropical::blocks) for how the work is cut).

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};
use crate::tropical::blocks::{run_matvec, run_product, BatchShape, Product};
use crate::tropical::kernels;
use crate::tropical::semiring::{reject_nan, Semiring};

/// Which product kernel runs a matrix product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Workgroup-memory tiles and register blocking (what the public API uses).
    Tiled,
    /// One thread per output (the benchmark baseline).
    Naive,
}

fn check_len(argument: &str, data: &[f32], dims: &[usize], names: &str) -> Result<()> {
    let want: usize = dims.iter().product();
    if data.len() != want {
        let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!("{names} = ({}), {want} floats", dims.join(", ")),
            actual: format!("{} floats", data.len()),
        });
    }
    Ok(())
}

/// Refuses a whole-bound operand larger than some device can bind.
pub(crate) fn check_whole_binding(
    ctx: &MultiGpuContext,
    argument: &str,
    words: usize,
) -> Result<()> {
    let limit = ctx
        .devices()
        .iter()
        .map(|d| d.max_binding_bytes())
        .min()
        .unwrap_or(u64::MAX);
    let bytes = 4 * words as u64;
    if bytes > limit {
        return Err(Error::invalid(
            argument,
            format!(
                "expected at most {limit} bytes (the smallest storage binding of the context's \
                 devices; every device holds it whole), got {bytes} bytes"
            ),
        ));
    }
    Ok(())
}

fn check_operands(
    ctx: &MultiGpuContext,
    shape: BatchShape,
    a: &[f32],
    b: &[f32],
    b_name: &str,
    out: &[f32],
) -> Result<()> {
    let BatchShape { batch, m, k, n } = shape;
    check_len("a", a, &[batch, m, k], "(batch, m, k)")?;
    if b_name == "x" {
        check_len("x", b, &[batch, k], "(batch, k)")?;
    } else {
        check_len(b_name, b, &[batch, k, n], "(batch, k, n)")?;
    }
    check_len("out", out, &[batch, m, n], "(batch, m, n)")?;
    reject_nan("a", a, &[batch, m, k])?;
    if b_name == "x" {
        reject_nan("x", b, &[batch, k])?;
    } else {
        reject_nan(b_name, b, &[batch, k, n])?;
    }
    check_whole_binding(ctx, b_name, b.len())
}

/// `out[p] = a[p] ⊗ b[p]` for every batch p: flat row-major (batch, m, k) and (batch, k, n)
/// operands, (batch, m, n) result, in `semiring`. Returns the plan the call followed.
///
/// A finite term `a + b` beyond the float32 range that decides an entry is an error (not a
/// quiet ±inf); ±inf operands keep their tropical meaning.
pub fn tropical_matmul(
    ctx: &MultiGpuContext,
    a: &[f32],
    b: &[f32],
    shape: BatchShape,
    semiring: Semiring,
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let product = Product {
        semiring,
        shape,
        a,
        b,
    };
    tropical_matmul_with(ctx, Variant::Tiled, product, out, strategy)
}

/// [`tropical_matmul`] with the kernel chosen explicitly (benchmarks and tests compare them).
pub fn tropical_matmul_with(
    ctx: &MultiGpuContext,
    variant: Variant,
    product: Product<'_>,
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    check_operands(ctx, product.shape, product.a, product.b, "b", out)?;
    let build = match variant {
        Variant::Tiled => kernels::tiled,
        Variant::Naive => kernels::naive,
    };
    let plan = run_product(ctx, build, product, None, out, strategy)?;
    check_overflow(product, out)?;
    Ok(plan)
}

/// Whether a tropical product of these operands may overflow: only when the largest finite
/// magnitudes of the two operands add up beyond float32 (one sum per term, no accumulation).
fn may_overflow(a: &[f32], b: &[f32]) -> bool {
    let top = |d: &[f32]| {
        d.iter()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, &v| m.max(f64::from(v).abs()))
    };
    top(a) + top(b) > f64::from(f32::MAX)
}

/// Refuses a result that a float32 overflow made wrong. A term `a + b` of finite operands
/// beyond float32 rounds to ±inf: +inf in a max-plus product (−inf in min-plus) becomes the
/// result, the other infinity reads as the tropical zero. Either way a wrong result is
/// infinite, so only infinite entries need a look: each is recomputed in float64 and, when
/// finite there, is an overflow error naming the entry (never a quiet inf, which would read
/// as "no path" or the tropical zero). Free when `may_overflow` rules it out.
fn check_overflow(product: Product<'_>, out: &[f32]) -> Result<()> {
    let Product {
        semiring,
        shape,
        a,
        b,
    } = product;
    if !may_overflow(a, b) {
        return Ok(());
    }
    let BatchShape { m, k, n, .. } = shape;
    for (t, &v) in out.iter().enumerate() {
        if v.is_finite() {
            continue;
        }
        let (p, i, j) = (t / (m * n), t / n % m, t % n);
        let exact = (0..k)
            .map(|l| {
                let (x, y) = (a[(p * m + i) * k + l], b[(p * k + l) * n + j]);
                if x == semiring.zero() || y == semiring.zero() {
                    f64::from(semiring.zero())
                } else {
                    f64::from(x) + f64::from(y)
                }
            })
            .fold(f64::from(semiring.zero()), |acc, x| match semiring {
                Semiring::MaxPlus => acc.max(x),
                Semiring::MinPlus => acc.min(x),
            });
        if exact.is_finite() {
            return Err(Error::invalid(
                "a",
                format!(
                    "tropical products overflow float32: out[{p}, {i}, {j}] = {exact:e} is \
                     beyond the float32 range (±3.4e38); rescale the operands"
                ),
            ));
        }
    }
    Ok(())
}

/// `out[p] = a[p] ⊗ x[p]` for every batch p: flat (batch, m, k) matrices and (batch, k)
/// vectors, (batch, m) result (`shape.n` must be 1), in `semiring`.
pub fn tropical_matvec(
    ctx: &MultiGpuContext,
    a: &[f32],
    x: &[f32],
    shape: BatchShape,
    semiring: Semiring,
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    if shape.n != 1 {
        return Err(Error::invalid(
            "shape",
            format!(
                "expected n = 1 for a matrix-vector product, got {}",
                shape.n
            ),
        ));
    }
    check_operands(ctx, shape, a, x, "x", out)?;
    let product = Product {
        semiring,
        shape,
        a,
        b: x,
    };
    let plan = run_matvec(ctx, product, out, strategy)?;
    check_overflow(product, out)?;
    Ok(plan)
}
