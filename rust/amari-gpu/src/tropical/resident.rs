//! Tropical products on a resident left operand, behind the one entry of each product (the
//! `product` module, which checks the arguments). They run by
//! [`MultiGpuContext::run_resident`] on the devices holding the rows of `a`, so the result
//! has `a`'s sharding. The matrix-vector product runs the host path's matvec kernel; the
//! matrix product runs `matmul_rows` (rows cut anywhere, each with its batch index), which
//! gives the host path's bits because every tropical sum is exact in any order. The right
//! operands (and the batch index of every row, one word per row) are uploaded; `a` moves
//! only when a term could overflow (see [`run`]).

use crate::alloc;
use crate::context::MultiGpuContext;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::resident::{Destination, Operand, Outcome, ResidentArray};
use crate::tropical::blocks::{host_run, BatchShape, Kind, Product};
use crate::tropical::checks::{check_overflow, nan_error, unravel};
use crate::dtype::Dtype;
use crate::tropical::kernels::{self, ProductShape};
use crate::tropical::semiring::Semiring;

/// A checked product on a resident `a` with `batch * m` rows of `k` words (batch p's rows
/// consecutive); `b` the flat right operands (or vectors).
#[derive(Clone, Copy)]
pub(crate) struct ResidentProduct<'a> {
    /// The left operands' rows.
    pub a: &'a ResidentArray,
    /// The right operands, bound whole on every device.
    pub b: &'a [f32],
    /// The shape of every product of the batch.
    pub shape: BatchShape,
    /// The semiring.
    pub semiring: Semiring,
}

/// The NaN check of the resident `a` (of the caller's shape `dims`), from per-row
/// statistics computed where its rows live (first NaN column, -1 without one, exact up to
/// 2^24 columns; largest finite magnitude): 8 bytes per row read back, not the k words.
/// The error names the NaN's position in `dims`, as the host path's does. Returns the
/// largest finite magnitude of `a` (0 without one).
pub(crate) fn checked_rows(
    ctx: &MultiGpuContext,
    a: &ResidentArray,
    dims: &[usize],
) -> Result<f64> {
    if a.rows() == 0 {
        return Ok(0.0);
    }
    let stats = ctx.run_resident(
        &kernels::row_stats(a.cols()),
        &[("a", Operand::Resident(a))],
    )?;
    let mut words: Vec<f32> = alloc::zeroed("a (row statistics)", 2 * stats.rows())?;
    ctx.gather(&stats, &mut words)?;
    drop(stats);
    let lead = &dims[..dims.len().saturating_sub(1)];
    let mut top = 0.0f64;
    for (row, stat) in words.chunks_exact(2).enumerate() {
        if stat[0] >= 0.0 {
            let mut index = unravel(row, lead);
            index.push(stat[0] as usize);
            return Err(nan_error("a", &index, dims));
        }
        top = top.max(f64::from(stat[1]));
    }
    Ok(top)
}

/// The kernel a resident product runs (per row of `a`).
fn kernel(kind: Kind, product: &ResidentProduct<'_>) -> Kernel {
    let BatchShape { batch, k, n, .. } = product.shape;
    let shape = ProductShape {
        k,
        cols: n,
        b_words: product.b.len(),
        batches: batch.max(1),
        accumulate: false,
        dtype: Dtype::F32,
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
pub(crate) fn run(
    ctx: &MultiGpuContext,
    kind: Kind,
    product: ResidentProduct<'_>,
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
    let placeholder = [semiring.zero()];
    let operands = [
        ("a", Operand::Resident(a)),
        ("row_batch", Operand::Host(&row_batch)),
        (kind.right(), Operand::Host(b)),
        ("c", Operand::Host(&placeholder)),
    ];
    ctx.run_resident_to(&kernel, &operands, out)
}

/// [`run`] when a term could overflow: the product of `a`'s gathered rows, checked
/// exactly, then written into `out` (a resident one keeps its sharding) or uploaded where
/// `a`'s rows live.
fn run_exact(
    ctx: &MultiGpuContext,
    kind: Kind,
    kernel: &Kernel,
    product: ResidentProduct<'_>,
    out: Destination<'_>,
) -> Result<Outcome> {
    let ResidentProduct {
        a,
        b,
        shape,
        semiring,
    } = product;
    let mut rows: Vec<f32> = alloc::zeroed(
        "a (gathered for the overflow check)",
        alloc::product("a", &[a.rows(), a.cols()], 4)?,
    )?;
    ctx.gather(a, &mut rows)?;
    let host = Product {
        semiring,
        shape,
        a: &rows,
        b,
    };
    let BatchShape { batch, m, n, .. } = shape;
    let mut result: Vec<f32> =
        alloc::zeroed("result", alloc::product("result", &[batch, m, n], 4)?)?;
    host_run(ctx, kind, host, &mut result, None)?;
    check_overflow(host, &result)?;
    match out {
        Destination::Host(out) => {
            out.copy_from_slice(&result);
            Ok(Outcome::default())
        }
        Destination::Resident(Some(out)) => {
            ctx.put_into(out, &result, kernel)?;
            Ok(Outcome::default())
        }
        Destination::Resident(None) => Ok(Outcome {
            plan: None,
            array: Some(ctx.upload_like(&result, n, a, kernel, "a")?),
        }),
    }
}
