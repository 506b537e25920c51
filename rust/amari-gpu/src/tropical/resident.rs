//! The tropical matrix-vector product on a resident left operand: the same matvec kernel
//! as the numpy path, run by [`MultiGpuContext::run_resident`] on the devices holding the
//! rows of `a`, so the result is a resident array of the same bits. The vectors `x` (and
//! the kernel's batch index of every row, one word per row) are uploaded; `a` never
//! moves. The callers check NaN and overflow beforehand (see `amari_gpu.tropical`).

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::resident::{Operand, ResidentArray};
use crate::tropical::blocks::BatchShape;
use crate::tropical::kernels::{self, ProductShape};
use crate::tropical::product::check_whole_binding;
use crate::tropical::semiring::Semiring;

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
