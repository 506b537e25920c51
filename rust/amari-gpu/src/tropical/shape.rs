//! What a tropical product item is: a block of [`BLOCK_ROWS`] rows, and the shapes of one
//! product. Shared by the WGSL kernels (`kernels`) and their host twins (`host::tropical`).

/// Rows of a product item, and of a tiled workgroup's tile (`TILE` in the shader).
pub const BLOCK_ROWS: usize = 64;
/// Shapes of one product: `rows` stacked rows of `a`, inner dimension `k`, `cols` columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProductShape {
    /// Inner dimension K (at least 1 when run).
    pub k: usize,
    /// Columns of the right operand and the result.
    pub cols: usize,
    /// Words of the whole right operand (all batches).
    pub b_words: usize,
    /// Batches in the right operand.
    pub batches: usize,
    /// Whether `c` is a per-row input combined into the result.
    pub accumulate: bool,
}
