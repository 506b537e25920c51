//! What a tropical product item is: a block of [`BLOCK_ROWS`] rows, and the shapes of one
//! product, and which items of a chunk are of one batch. Shared by the WGSL kernels
//! (`kernels`) and their host twins (`tropical::host`).

/// Rows of a product item, and of a tiled workgroup's tile (`TILE` in the shader).
pub const BLOCK_ROWS: usize = 64;

/// Inner indices one pass of the matrix-vector product walks: 16,384 per thread of 64,
/// plus 7 trips of the combining tree, within [`LOOP_BUDGET`](crate::kernel::LOOP_BUDGET)
/// (the host device folds its lanes pass by pass alike).
pub const MATVEC_PASS_K: usize = 64 * 16_384;

use std::ops::Range;

use crate::dtype::Dtype;

/// Shapes of one product: `rows` stacked rows of `a`, inner dimension `k`, `cols` columns,
/// and the dtype of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProductShape {
    /// Inner dimension K (at least 1 when run).
    pub k: usize,
    /// Columns of the right operand and the result.
    pub cols: usize,
    /// Words of the whole right operand (all batches; two per float64 value).
    pub b_words: usize,
    /// Batches in the right operand.
    pub batches: usize,
    /// Whether `c` is a per-row input combined into the result.
    pub accumulate: bool,
    /// The dtype of every operand and of the result (float32 or float64).
    pub dtype: Dtype,
}

impl ProductShape {
    /// Words per value of the product's dtype.
    pub fn words(&self) -> usize {
        self.dtype.bytes() / 4
    }
}

/// The batch index an item's `item_batch` word holds (u32 bits), clamped as the shader does.
pub(super) fn batch_of(word: f32, batches: usize) -> usize {
    (word.to_bits() as usize).min(batches.max(1) - 1)
}

/// The runs of consecutive items of `range` that belong to one batch (by their
/// `item_batch` words, of `batches` batches), each with its batch: the host runs each run as
/// one product.
pub(super) fn batch_runs(
    item_batch: &[f32],
    range: Range<usize>,
    batches: usize,
) -> impl Iterator<Item = (Range<usize>, usize)> + '_ {
    let mut q = range.start;
    std::iter::from_fn(move || {
        if q >= range.end {
            return None;
        }
        let batch = batch_of(item_batch[q], batches);
        let mut end = q + 1;
        while end < range.end && batch_of(item_batch[end], batches) == batch {
            end += 1;
        }
        let run = q..end;
        q = end;
        Some((run, batch))
    })
}
