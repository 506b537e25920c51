//! Tropical products on a resident left operand, behind the one entry of each product (the
//! `product` module, which checks the arguments). They run by
//! [`MultiGpuContext::run_resident`] on the devices holding the rows of `a`, so the result
//! has `a`'s sharding. The matrix-vector product runs the host path's matvec kernel; the
//! matrix product runs `matmul_rows` (rows cut anywhere, each with its batch index), which
//! gives the host path's bits because every tropical sum is exact in any order. The right
//! operands (and the batch index of every row, one word per row) are uploaded; `a` moves
//! only when a term could overflow (see [`run`]). Products compute in the dtype of `a`'s
//! values (float32 or float64, `T`), on the devices holding its rows, which run that dtype.

use crate::alloc;
use crate::context::MultiGpuContext;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::resident::{Destination, Operand, Outcome, ResidentArray};
use crate::tropical::blocks::{host_run, BatchShape, Kind, Product};
use crate::tropical::checks::{check_overflow, nan_error, unravel};
use crate::dtype::Dtype;
use crate::tropical::kernels::{self, ProductShape};
use crate::tropical::scalar::Scalar;
use crate::tropical::semiring::Semiring;

/// A checked product on a resident `a` with `batch * m` rows of `k` values of `T` (batch
/// p's rows consecutive); `b` the flat right operands (or vectors).
#[derive(Clone, Copy)]
pub(crate) struct ResidentProduct<'a, T> {
    /// The left operands' rows.
    pub a: &'a ResidentArray,
    /// The right operands, bound whole on every device.
    pub b: &'a [T],
    /// The shape of every product of the batch.
    pub shape: BatchShape,
    /// The semiring.
    pub semiring: Semiring,
}

/// The NaN check of the resident `a` (of the caller's shape `dims`, values of `a`'s
/// dtype), from per-row statistics computed where its rows live (first NaN column, exact up
/// to 2^24 columns in float32; largest finite magnitude): 8 bytes per row read back (12 for
/// float64), not the row. The error names the NaN's position in `dims`, as the host path's
/// does. Returns the largest finite magnitude of `a` (0 without one).
pub(crate) fn checked_rows(
    ctx: &MultiGpuContext,
    a: &ResidentArray,
    dims: &[usize],
) -> Result<f64> {
    if a.rows() == 0 {
        return Ok(0.0);
    }
    let k = dims.last().copied().unwrap_or(0);
    let kernel = kernels::row_stats(k, a.dtype());
    let stats = ctx.run_resident(&kernel, &[("a", Operand::Resident(a))])?;
    let mut words: Vec<f32> = alloc::zeroed("a (row statistics)", stats.rows() * stats.cols())?;
    ctx.gather(&stats, &mut words)?;
    drop(stats);
    let lead = &dims[..dims.len().saturating_sub(1)];
    let mut top = 0.0f64;
    for (row, stat) in words.chunks_exact(stats_width(a.dtype())).enumerate() {
        let (first, magnitude) = match stat {
            [first, top] => ((*first >= 0.0).then_some(*first as usize), f64::from(*top)),
            [first, lo, hi] => (
                (first.to_bits() as usize).checked_sub(1),
                f64::from_bits(u64::from(lo.to_bits()) | (u64::from(hi.to_bits()) << 32)),
            ),
            _ => (None, 0.0),
        };
        if let Some(column) = first {
            let mut index = unravel(row, lead);
            index.push(column);
            return Err(nan_error("a", &index, dims));
        }
        top = top.max(magnitude);
    }
    Ok(top)
}

/// Words of a row's statistics in `dtype` (see `kernels::row_stats`).
fn stats_width(dtype: Dtype) -> usize {
    match dtype {
        Dtype::F64 => 3,
        Dtype::F16 | Dtype::F32 => 2,
    }
}

/// The kernel a resident product runs (per row of `a`).
fn kernel<T: Scalar>(kind: Kind, product: &ResidentProduct<'_, T>) -> Kernel {
    let BatchShape { batch, k, n, .. } = product.shape;
    let shape = ProductShape {
        k,
        cols: n,
        b_words: T::words(product.b).len(),
        batches: batch.max(1),
        accumulate: false,
        dtype: T::DTYPE,
    };
    match kind {
        Kind::Matmul(_) => kernels::rows(product.semiring, &shape),
        Kind::Matvec => kernels::matvec(product.semiring, &shape),
    }
}

/// Runs a checked product where the rows of `a` live, into `out`. When a term could
/// overflow (`exact`), the exact check needs `a`'s rows and the product's: `a` is gathered
/// and the product runs once, on the host operands, checked before anything is written;
/// the result then goes where the resident run's would.
pub(crate) fn run<T: Scalar>(
    ctx: &MultiGpuContext,
    kind: Kind,
    product: ResidentProduct<'_, T>,
    out: Destination<'_>,
    exact: bool,
) -> Result<Outcome> {
    let kernel = kernel(kind, &product);
    if exact {
        return run_exact(ctx, kind, &kernel, product, out);
    }
    let ResidentProduct {
        a,
        b,
        shape,
        semiring,
    } = product;
    let row_batch = kernels::item_batches(shape.batch, shape.m);
    let placeholder = [semiring.zero_of::<T>()];
    let operands = [
        ("a", Operand::Resident(a)),
        ("row_batch", Operand::Host(&row_batch)),
        (kind.right(), Operand::Host(T::words(b))),
        ("c", Operand::Host(T::words(&placeholder))),
    ];
    ctx.run_resident_to(&kernel, &operands, out)
}

/// [`run`] when a term could overflow: the product of `a`'s gathered rows, checked
/// exactly, then written into `out` (a resident one keeps its sharding) or uploaded where
/// `a`'s rows live.
fn run_exact<T: Scalar>(
    ctx: &MultiGpuContext,
    kind: Kind,
    kernel: &Kernel,
    product: ResidentProduct<'_, T>,
    out: Destination<'_>,
) -> Result<Outcome> {
    let ResidentProduct {
        a,
        b,
        shape,
        semiring,
    } = product;
    let mut words: Vec<f32> = alloc::zeroed(
        "a (gathered for the overflow check)",
        alloc::product("a", &[a.rows(), a.cols()], 4)?,
    )?;
    ctx.gather(a, &mut words)?;
    let rows = T::values(&words);
    let host = Product {
        semiring,
        shape,
        a: &rows,
        b,
    };
    let BatchShape { batch, m, n, .. } = shape;
    let bytes = T::DTYPE.bytes();
    let mut values: Vec<T> =
        alloc::zeroed("result", alloc::product("result", &[batch, m, n], bytes)?)?;
    host_run(ctx, kind, host, &mut values, None)?;
    check_overflow(host, &values)?;
    let result = T::words(&values);
    match out {
        Destination::Host(out) => {
            out.copy_from_slice(result);
            Ok(Outcome::default())
        }
        Destination::Resident(Some(out)) => {
            ctx.put_into(out, result, kernel)?;
            Ok(Outcome::default())
        }
        Destination::Resident(None) => Ok(Outcome {
            plan: None,
            array: Some(ctx.upload_like(result, n * T::DTYPE.bytes() / 4, a, kernel, "a")?),
        }),
    }
}
