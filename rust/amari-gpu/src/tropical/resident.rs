//! Tropical products on a resident left operand, run by [`MultiGpuContext::run_resident`]
//! on the devices holding the rows of `a`, so the result is a resident array with `a`'s
//! sharding. The matrix-vector product runs the numpy path's matvec kernel; the matrix
//! product runs `matmul_rows` (rows cut anywhere, each with its batch index), which gives
//! the numpy path's bits because every tropical sum is exact in any order. The right
//! operands (and the batch index of every row, one word per row) are uploaded; `a` never
//! moves. The callers check NaN and overflow beforehand, from [`tropical_row_stats_resident`]
//! (see `amari_gpu.tropical`).

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::resident::{Operand, ResidentArray};
use crate::tropical::blocks::BatchShape;
use crate::tropical::kernels::{self, ProductShape};
use crate::tropical::product::check_whole_binding;
use crate::tropical::semiring::Semiring;

/// Per row of the resident `a`: the first NaN column (-1 without one; exact up to 2^24
/// columns) and the largest finite magnitude, a resident (rows, 2) array with `a`'s
/// sharding. Runs on every device kind (the checks of the resident products read it).
pub fn tropical_row_stats_resident(
    ctx: &MultiGpuContext,
    a: &ResidentArray,
) -> Result<ResidentArray> {
    ctx.run_resident(
        &kernels::row_stats(a.cols()),
        &[("a", Operand::Resident(a))],
    )
}

/// The resident matrix product's arguments: `a` resident with `batch * m` rows of `k` words
/// (batch p's rows consecutive), `b` the flat (batch, k, n) right operands.
#[derive(Clone, Copy)]
pub struct ResidentProduct<'a> {
    /// The left operands' rows.
    pub a: &'a ResidentArray,
    /// The right operands, bound whole on every device.
    pub b: &'a [f32],
    /// The shape of every product of the batch.
    pub shape: BatchShape,
    /// The semiring.
    pub semiring: Semiring,
}

/// `a[p] ⊗ b[p]` for every batch p where the rows of `a` live: a new resident (batch * m, n)
/// array with `a`'s sharding, or written into `out` (resident, of that shape; it keeps its
/// own sharding) when given, returning `None`.
pub fn tropical_matmul_resident(
    ctx: &MultiGpuContext,
    product: ResidentProduct<'_>,
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    let ResidentProduct {
        a,
        b,
        shape,
        semiring,
    } = product;
    let BatchShape { batch, m, k, n } = shape;
    if (a.rows(), a.cols()) != (batch * m, k) || k == 0 {
        return Err(Error::Shape {
            argument: "a".into(),
            expected: format!("({}, {k}) rows with k >= 1", batch * m),
            actual: format!("({}, {})", a.rows(), a.cols()),
        });
    }
    if b.len() != batch * k * n || n == 0 {
        return Err(Error::Shape {
            argument: "b".into(),
            expected: format!("({batch}, {k}, {n}) with n >= 1"),
            actual: format!("{} floats", b.len()),
        });
    }
    check_whole_binding(ctx, "b", b.len())?;
    let kernel = kernels::rows(
        semiring,
        &ProductShape {
            k,
            cols: n,
            b_words: b.len(),
            batches: batch.max(1),
            accumulate: false,
        },
    );
    let row_batch = kernels::item_batches(batch, m);
    let placeholder = [semiring.zero()];
    let operands = [
        ("a", Operand::Resident(a)),
        ("row_batch", Operand::Host(&row_batch)),
        ("b", Operand::Host(b)),
        ("c", Operand::Host(&placeholder)),
    ];
    match out {
        Some(out) => ctx
            .run_resident_into(&kernel, &operands, out)
            .map(|()| None),
        None => ctx.run_resident(&kernel, &operands).map(Some),
    }
}

/// `a[p] ⊗ x[p]` for every batch p where the rows of `a` live: `a` resident with
/// `batch * m` rows of `k` words (batch p's rows consecutive), `x` the flat (batch, k)
/// vectors. Returns the resident (batch * m, 1) result, row for row like `a`.
pub fn tropical_matvec_resident(
    ctx: &MultiGpuContext,
    a: &ResidentArray,
    x: &[f32],
    shape: BatchShape,
    semiring: Semiring,
) -> Result<ResidentArray> {
    let BatchShape { batch, m, k, .. } = shape;
    if (a.rows(), a.cols()) != (batch * m, k) || k == 0 {
        return Err(Error::Shape {
            argument: "a".into(),
            expected: format!("({}, {k}) rows with k >= 1", batch * m),
            actual: format!("({}, {})", a.rows(), a.cols()),
        });
    }
    if x.len() != batch * k {
        return Err(Error::Shape {
            argument: "x".into(),
            expected: format!("({batch}, {k})"),
            actual: format!("{} floats", x.len()),
        });
    }
    check_whole_binding(ctx, "x", x.len())?;
    let kernel = kernels::matvec(
        semiring,
        &ProductShape {
            k,
            cols: 1,
            b_words: x.len(),
            batches: batch.max(1),
            accumulate: false,
        },
    );
    let row_batch = kernels::item_batches(batch, m);
    let zero = [semiring.zero()];
    ctx.run_resident(
        &kernel,
        &[
            ("a", Operand::Resident(a)),
            ("row_batch", Operand::Host(&row_batch)),
            ("x", Operand::Host(x)),
            ("c", Operand::Host(&zero)),
        ],
    )
}
