//! How tropical products run on the engine. The right operands of every batch are bound
//! whole on each device; the rows of the left operands are split. A product item is a block
//! of 64 rows of one batch: for `batch` products of (m, k) by (k, n), batch p has ⌈m/64⌉
//! blocks (the last one padded when m is not a multiple of 64, which costs a padded copy of
//! `a`, and of `c` and the result), and item `p * ⌈m/64⌉ + q` is block q of batch p. So a
//! workgroup's 64-row tile never straddles a chunk or a batch, whatever the chunk size. A
//! matrix-vector item is one row.

use std::borrow::Cow;

use crate::alloc;

use crate::context::{MultiGpuContext, Target};
use crate::error::Result;
use crate::kernel::Kernel;
use crate::plan::{Plan, Strategy};
use crate::tropical::kernels::{self, ProductShape, BLOCK_ROWS};
use crate::tropical::scalar::Scalar;
use crate::tropical::semiring::Semiring;

/// Shape of `batch` independent products of an (m, k) matrix by a (k, n) matrix (n = 1 for
/// matrix-vector products). An unbatched product is `batch = 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchShape {
    /// Number of independent products.
    pub batch: usize,
    /// Rows of each left operand.
    pub m: usize,
    /// Inner dimension.
    pub k: usize,
    /// Columns of each right operand.
    pub n: usize,
}

/// One batched tropical product: `a` (batch, m, k) ⊗ `b` (batch, k, n) in `semiring`; for
/// a matrix-vector product `b` holds the (batch, k) vectors and n = 1. The values are
/// float32 or float64 (`T`), the dtype the product computes in.
#[derive(Debug, Clone, Copy)]
pub struct Product<'a, T = f32> {
    /// The semiring.
    pub semiring: Semiring,
    /// The shape of every product of the batch.
    pub shape: BatchShape,
    /// Left operands, flat row-major.
    pub a: &'a [T],
    /// Right operands (or vectors), flat row-major.
    pub b: &'a [T],
}

/// A product's left and right operands and its inner dimension.
type Operands<'a, T> = (Cow<'a, [T]>, Cow<'a, [T]>, usize);

impl<'a, T: Scalar> Product<'a, T> {
    /// The operands to run and their inner dimension. A product with k = 0 runs as k = 1
    /// on tropical zeros, which gives the tropical zero.
    fn operands(&self) -> Result<Operands<'a, T>> {
        if self.shape.k > 0 {
            return Ok((Cow::Borrowed(self.a), Cow::Borrowed(self.b), self.shape.k));
        }
        let BatchShape { batch, m, n, .. } = self.shape;
        let zero = self.semiring.zero_of::<T>();
        let filled = |argument: &str, rows: usize| -> Result<Vec<T>> {
            let bytes = T::DTYPE.bytes();
            let mut v = alloc::zeroed(argument, alloc::product(argument, &[batch, rows], bytes)?)?;
            v.fill(zero);
            Ok(v)
        };
        Ok((Cow::Owned(filled("a", m)?), Cow::Owned(filled("b", n)?), 1))
    }
}

/// `data` (batch × rows × width) with each batch's rows padded to `padded` rows of `fill`.
fn pad_rows<'a, T: Scalar>(
    data: &'a [T],
    batch: usize,
    rows: usize,
    padded: usize,
    width: usize,
    fill: T,
) -> Result<Cow<'a, [T]>> {
    if rows == padded {
        return Ok(Cow::Borrowed(data));
    }
    let len = alloc::product("padded rows", &[batch, padded, width], T::DTYPE.bytes())?;
    let mut out = alloc::zeroed("padded rows", len)?;
    out.fill(fill);
    for p in 0..batch {
        out[p * padded * width..][..rows * width]
            .copy_from_slice(&data[p * rows * width..][..rows * width]);
    }
    Ok(Cow::Owned(out))
}

/// Runs one product kernel over row blocks: `a` holds (batch, m, k), `c` (if any) and `out`
/// hold (batch, m, n). A product with k = 0 runs as k = 1 on tropical zeros, which gives the
/// tropical zero (or `c`). One with n = 0 has an empty result: it plans an empty product of
/// one column instead, since items of no column would cost nothing on the host (which moves
/// no bytes) and the planner refuses items that cost nothing.
pub(crate) fn run_product<T: Scalar>(
    ctx: &MultiGpuContext,
    build: fn(Semiring, &ProductShape) -> Kernel,
    product: Product<'_, T>,
    c: Option<&[T]>,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let (semiring, shape) = (product.semiring, product.shape);
    let BatchShape { batch, m, n, .. } = shape;
    let zero = semiring.zero_of::<T>();
    if n == 0 {
        let empty = Product {
            semiring,
            shape: BatchShape {
                batch: 1,
                m: 0,
                k: 1,
                n: 1,
            },
            a: &[],
            b: &[zero],
        };
        return run_product(ctx, build, empty, None, &mut [], strategy);
    }
    let (a, b, k) = product.operands()?;
    let (a, b) = (&a[..], &b[..]);
    let blocks = m.div_ceil(BLOCK_ROWS);
    let padded = blocks * BLOCK_ROWS;
    let product = ProductShape {
        k,
        cols: n,
        b_words: T::words(b).len(),
        batches: batch.max(1),
        accumulate: c.is_some(),
        dtype: T::DTYPE,
    };
    let kernel = build(semiring, &product);
    let a_blocks = pad_rows(a, batch, m, padded, k, zero)?;
    let c_blocks = c
        .map(|c| pad_rows(c, batch, m, padded, n, zero))
        .transpose()?;
    let item_batch = kernels::item_batches(batch, blocks);
    let placeholder = [zero];
    let inputs: [&[f32]; 4] = [
        T::words(&a_blocks),
        &item_batch,
        T::words(b),
        T::words(c_blocks.as_deref().unwrap_or(&placeholder)),
    ];
    let items = batch * blocks;
    if padded == m {
        return ctx
            .run(&kernel, &inputs, Target::Items(T::words_mut(out)), items, strategy)
            .map(|ran| ran.plan);
    }
    let bytes = T::DTYPE.bytes();
    let mut result: Vec<T> = alloc::zeroed(
        "padded result",
        alloc::product("padded result", &[batch, padded, n], bytes)?,
    )?;
    let ran = ctx.run(
        &kernel,
        &inputs,
        Target::Items(T::words_mut(&mut result)),
        items,
        strategy,
    )?;
    for p in 0..batch {
        out[p * m * n..][..m * n].copy_from_slice(&result[p * padded * n..][..m * n]);
    }
    Ok(ran.plan)
}

/// Runs the matrix-vector kernel over rows: `a` holds (batch, m, k), `x` (batch, k).
pub(crate) fn run_matvec<T: Scalar>(
    ctx: &MultiGpuContext,
    product: Product<'_, T>,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let (semiring, shape) = (product.semiring, product.shape);
    let BatchShape { batch, m, .. } = shape;
    let (a, x, k) = product.operands()?;
    let (a, x) = (&a[..], &x[..]);
    let kernel = kernels::matvec(
        semiring,
        &ProductShape {
            k,
            cols: 1,
            b_words: T::words(x).len(),
            batches: batch.max(1),
            accumulate: false,
            dtype: T::DTYPE,
        },
    );
    let row_batch = kernels::item_batches(batch, m);
    let placeholder = [semiring.zero_of::<T>()];
    let inputs: [&[f32]; 4] = [T::words(a), &row_batch, T::words(x), T::words(&placeholder)];
    ctx.run(&kernel, &inputs, Target::Items(T::words_mut(out)), batch * m, strategy)
        .map(|ran| ran.plan)
}

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

/// Runs a checked product on host operands through the engine.
pub(crate) fn host_run<T: Scalar>(
    ctx: &MultiGpuContext,
    kind: Kind,
    product: Product<'_, T>,
    out: &mut [T],
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
