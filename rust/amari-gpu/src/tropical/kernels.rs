//! The tropical kernels as the engine sees them: entry points of `shaders/tropical.wgsl`,
//! their bindings, uniform parameters and workgroup grids.
//!
//! Every kernel binds the same five arrays: `a` (per item), `item_batch` (per item: the
//! item's batch index as u32 bits), `b` (whole: every batch's right operand), `c` (per item
//! when accumulating, else a one-word placeholder) and the output (per item). For products an
//! item is a block of [`BLOCK_ROWS`] rows of one batch (the host pads each batch's rows to a
//! multiple of it), so a workgroup's tile never straddles a chunk or a batch; for
//! matrix-vector products, and for the resident product ([`rows`]), an item is one row.
//!
//! The row statistics the resident checks read ([`row_stats`]) bind only the rows and the
//! output, and read only `k` and `k_pass` of the parameters.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use super::semiring::Semiring;
pub use super::shape::{ProductShape, BLOCK_ROWS, MATVEC_PASS_K};
use crate::dtype::Dtype;
use crate::family::Family;
use crate::kernel::{Dispatch, Input, Kernel, Output};
use crate::tropical::host::{TropicalMatvec, TropicalProduct};
use crate::tropical::host_rows::{RowProduct, RowStats};

/// The WGSL source of the family (float32).
pub const SOURCE: &str = include_str!("../../../../shaders/tropical.wgsl");

/// The line of [`SOURCE`] naming the element type, the one line a dtype changes.
const ELEMENT: &str = "alias Real = f32;";

/// The family's source computing in `dtype`: [`SOURCE`] itself for float32; for float64 the
/// same text with `Real` aliased to `f64` (made once per process). Products run only in
/// float32 and float64 (`Scalar`); float16 would need its enable line and is never asked for.
pub fn source(dtype: Dtype) -> Cow<'static, str> {
    static F64: OnceLock<String> = OnceLock::new();
    match dtype {
        Dtype::F64 => Cow::Borrowed(
            F64.get_or_init(|| SOURCE.replacen(ELEMENT, "alias Real = f64;", 1))
                .as_str(),
        ),
        Dtype::F16 | Dtype::F32 => Cow::Borrowed(SOURCE),
    }
}

/// Columns of a tiled workgroup's tile (`TILE` in the shader).
pub const TILE_COLS: u32 = 64;
/// Per-dimension workgroup count every WebGPU device grants.
const MAX_GROUPS: u32 = 65_535;

/// Inner indices one pass of the tiled product walks: 1,024 steps of `TK` = 16, each 28
/// loop trips (the step, the two 4-trip staging loops and the 16-trip inner loop, exit
/// tests included), 28,672 in all, plus 72 for the stores, within
/// [`LOOP_BUDGET`](crate::kernel::LOOP_BUDGET).
pub const TILED_PASS_K: usize = 16_384;
/// Inner indices one pass of the one-thread-per-output product walks (one trip each).
pub const NAIVE_PASS_K: usize = 16_384;
/// Words of a row one pass of the row statistics reads (one trip each).
pub const STATS_PASS_K: usize = 16_384;
/// Index of the pass length among a product kernel's parameters (`k_pass` in the shader).
const K_PASS: usize = 6;

/// Uniform parameters after the shared header (see `Params` in the shader); `k_pass` is
/// the inner indices one pass walks.
fn params(semiring: Semiring, shape: &ProductShape, k_pass: usize) -> Vec<u32> {
    vec![
        semiring.sign().to_bits(),
        shape.k as u32,
        shape.cols as u32,
        u32::from(shape.accumulate),
        f32::NEG_INFINITY.to_bits(),
        shape.batches as u32,
        k_pass as u32,
    ]
}

/// Passes of a product kernel: the inner dimension walked `k_pass` indices at a time.
fn k_passes(_items: u32, params: &[u32]) -> u32 {
    params[1].div_ceil(params[K_PASS].max(1))
}

/// Inner indices one pass of the row-tile product walks: a 64-row tile may hold rows of up
/// to 64 batches (of `batches`), and it walks K once for each.
fn rows_pass_k(batches: usize) -> usize {
    let span = batches.clamp(1, BLOCK_ROWS);
    (TILED_PASS_K / span).max(16)
}

/// The inputs (in words: the batch index is one word whatever the dtype, a value
/// `shape.words()`).
fn inputs(shape: &ProductShape, rows: usize, c_per_item: usize) -> Vec<Input> {
    let w = shape.words();
    vec![
        Input::PerItem(rows * shape.k * w),
        Input::PerItem(1),
        Input::Whole(shape.b_words),
        if shape.accumulate {
            Input::PerItem(c_per_item * w)
        } else {
            Input::Whole(w)
        },
    ]
}

/// A family kernel `id` computing in `shape`'s dtype.
fn map(id: &'static str, shape: &ProductShape) -> Kernel {
    Kernel {
        dtype: shape.dtype,
        ..Kernel::map(id, Family::Tropical, source(shape.dtype))
    }
}

/// The tiled grid: column tiles along x, row blocks folded over y and z.
fn tiled_grid(items: u32, params: &[u32]) -> [u32; 3] {
    let cols = params[2];
    let y = items.clamp(1, MAX_GROUPS);
    [cols.div_ceil(TILE_COLS).max(1), y, items.div_ceil(y).max(1)]
}

/// The tiled product kernel (workgroup-memory tiles of A, register blocking).
pub fn tiled(semiring: Semiring, shape: &ProductShape) -> Kernel {
    Kernel {
        entry: "matmul_tiled",
        inputs: inputs(shape, BLOCK_ROWS, BLOCK_ROWS * shape.cols),
        output: Output::PerItem(BLOCK_ROWS * shape.cols * shape.words()),
        params: params(semiring, shape, TILED_PASS_K),
        dispatch: Dispatch::Custom(tiled_grid),
        passes: Some(k_passes),
        // One add and one max per inner step.
        flops_per_item: 2.0 * (BLOCK_ROWS * shape.k * shape.cols) as f64,
        host: Some(Arc::new(TropicalProduct::new(semiring, *shape))),
        ..map("tropical_matmul_tiled", shape)
    }
}

/// The one-thread-per-output product kernel: the baseline the tiled one is measured against.
pub fn naive(semiring: Semiring, shape: &ProductShape) -> Kernel {
    Kernel {
        entry: "matmul_naive",
        dispatch: Dispatch::Linear {
            threads_per_item: (BLOCK_ROWS * shape.cols) as u32,
        },
        params: params(semiring, shape, NAIVE_PASS_K),
        ..Kernel {
            id: "tropical_matmul_naive".into(),
            // The host product reproduces the naive kernel for max-plus only.
            host: tiled(semiring, shape)
                .host
                .filter(|_| semiring == Semiring::MaxPlus),
            ..tiled(semiring, shape)
        }
    }
}

/// The matrix-vector kernel: one 64-thread workgroup per row; `b` holds one vector per batch.
pub fn matvec(semiring: Semiring, shape: &ProductShape) -> Kernel {
    Kernel {
        entry: "matvec",
        inputs: inputs(shape, 1, 1),
        output: Output::PerItem(shape.words()),
        params: params(semiring, shape, MATVEC_PASS_K),
        dispatch: Dispatch::Linear {
            threads_per_item: 64,
        },
        passes: Some(k_passes),
        flops_per_item: 2.0 * shape.k as f64,
        host: Some(Arc::new(TropicalMatvec {
            semiring,
            shape: *shape,
        })),
        ..map("tropical_matvec", shape)
    }
}

/// The grid of [`rows`]: column tiles along x, 64-row tiles of the rows folded over y and z.
fn rows_grid(items: u32, params: &[u32]) -> [u32; 3] {
    tiled_grid(items.div_ceil(BLOCK_ROWS as u32), params)
}

/// The tiled product over single rows of any batch (`matmul_rows`): item = one row of `a`
/// with its batch index, output `cols` words per row. What resident products run, on rows
/// cut wherever a shard ends; the same bits as [`tiled`].
pub fn rows(semiring: Semiring, shape: &ProductShape) -> Kernel {
    Kernel {
        entry: "matmul_rows",
        inputs: inputs(shape, 1, shape.cols),
        output: Output::PerItem(shape.cols * shape.words()),
        params: params(semiring, shape, rows_pass_k(shape.batches)),
        dispatch: Dispatch::Custom(rows_grid),
        passes: Some(k_passes),
        flops_per_item: 2.0 * (shape.k * shape.cols) as f64,
        host: Some(Arc::new(RowProduct::new(semiring, *shape))),
        ..map("tropical_matmul_rows", shape)
    }
}

/// Per row of `k` values of `dtype`: the first NaN column and the largest finite magnitude
/// (float32: two words per row, the column as a float, -1 without one; float64: three u32
/// words, the column plus one, 0 without one, then the magnitude's low and high words); a
/// row's values read `STATS_PASS_K` at a time, in the parameters' places of a product's `k`
/// and `k_pass`.
pub fn row_stats(k: usize, dtype: Dtype) -> Kernel {
    let mut params = vec![0; K_PASS + 1];
    params[1] = k as u32;
    params[K_PASS] = STATS_PASS_K as u32;
    let (entry, id, out) = match dtype {
        Dtype::F64 => ("row_stats64", "tropical_row_stats64", 3),
        Dtype::F16 | Dtype::F32 => ("row_stats", "tropical_row_stats", 2),
    };
    let stats = RowStats { k, dtype };
    Kernel {
        entry,
        inputs: vec![Input::PerItem(k * stats.words())],
        output: Output::PerItem(out),
        params,
        passes: Some(k_passes),
        flops_per_item: k as f64,
        host: Some(Arc::new(stats)),
        ..map(
            id,
            &ProductShape {
                k,
                cols: 0,
                b_words: 0,
                batches: 1,
                accumulate: false,
                dtype,
            },
        )
    }
}

/// Rows, inner dimension and columns of the calibration reference product.
pub const REFERENCE_SIDE: usize = 256;

/// Arithmetic operations per item of [`reference()`] (one add and one max per step).
pub const REFERENCE_FLOPS_PER_ITEM: f64 =
    2.0 * (BLOCK_ROWS * REFERENCE_SIDE * REFERENCE_SIDE) as f64;

/// The family's calibration reference: the tiled max-plus product of blocks of
/// `REFERENCE_SIDE`-wide rows by a `REFERENCE_SIDE`² matrix.
pub fn reference() -> Kernel {
    tiled(
        Semiring::MaxPlus,
        &ProductShape {
            k: REFERENCE_SIDE,
            cols: REFERENCE_SIDE,
            b_words: REFERENCE_SIDE * REFERENCE_SIDE,
            batches: 1,
            accumulate: false,
            dtype: Dtype::F32,
        },
    )
}

/// The batch index of every item (`items_per_batch` items per batch), as the u32 bit
/// patterns the shader reads.
pub fn item_batches(batches: usize, items_per_batch: usize) -> Vec<f32> {
    (0..batches)
        .flat_map(|p| std::iter::repeat_n(f32::from_bits(p as u32), items_per_batch))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiled_grid_covers_every_block_and_column_within_limits() {
        for (items, cols) in [(1, 1), (8, 128), (9, 129), (1 << 20, 3), (1 << 30, 1)] {
            let [x, y, z] = tiled_grid(items, &[0, 0, cols]);
            assert!(x * TILE_COLS >= cols && (x - 1) * TILE_COLS < cols.max(1));
            assert!(u64::from(y) * u64::from(z) >= u64::from(items));
            assert!(x <= MAX_GROUPS && y <= MAX_GROUPS && z <= MAX_GROUPS);
        }
    }

    #[test]
    fn rows_grid_covers_every_row_tile() {
        for (rows, cols) in [(1, 1), (64, 64), (65, 130), (1 << 22, 1)] {
            let [x, y, z] = rows_grid(rows, &[0, 0, cols]);
            assert!(x * TILE_COLS >= cols);
            assert!(u64::from(y) * u64::from(z) * 64 >= u64::from(rows));
        }
    }

    #[test]
    fn passes_walk_every_inner_index_within_the_loop_budget() {
        use crate::kernel::LOOP_BUDGET;
        for k in [0, 1, 16, 16_384, 16_385, 37_446, 70_000, 4_264_240] {
            for batches in [1, 3, 64, 1000] {
                let shape = ProductShape {
                    k,
                    cols: 3,
                    b_words: k * 3 * batches,
                    batches,
                    accumulate: false,
                    dtype: Dtype::F32,
                };
                let semiring = Semiring::MaxPlus;
                for kernel in [
                    tiled(semiring, &shape),
                    naive(semiring, &shape),
                    matvec(semiring, &shape),
                    rows(semiring, &shape),
                ] {
                    let passes = kernel.pass_count(64) as usize;
                    let k_pass = kernel.params[K_PASS] as usize;
                    assert!(passes * k_pass >= k, "{} k={k}", kernel.id);
                    assert!((passes - 1) * k_pass < k.max(1), "{} k={k}", kernel.id);
                }
            }
            let stats = row_stats(k, Dtype::F32);
            assert!(stats.pass_count(1) as usize * STATS_PASS_K >= k);
        }
        // Trips of one pass: 28 per step of 16 indices (the step, two staging loops of 4
        // and the inner loop of 16, each with its exit test), the batches a 64-row tile
        // walks, and the 8 stores of 9 trips.
        let tiled_trips =
            |k_pass: usize, span: usize| (span * (k_pass / 16 * 28 + 1) + 1 + 72) as u64;
        assert!(tiled_trips(TILED_PASS_K, 1) <= LOOP_BUDGET);
        for batches in [2, 3, 7, 64, 500] {
            let span = batches.min(BLOCK_ROWS);
            assert!(
                tiled_trips(rows_pass_k(batches), span) <= LOOP_BUDGET,
                "{batches}"
            );
        }
        assert!((NAIVE_PASS_K + 1) as u64 <= LOOP_BUDGET);
        assert!((MATVEC_PASS_K / 64 + 1 + 7) as u64 <= LOOP_BUDGET);
        assert!((STATS_PASS_K + 1) as u64 <= LOOP_BUDGET);
        assert_eq!(
            MATVEC_PASS_K % 64,
            0,
            "every lane walks its own indices in every pass"
        );
    }

    #[test]
    fn item_batches_are_bit_patterns_of_the_batch_index() {
        let rows = item_batches(3, 2);
        let bits: Vec<u32> = rows.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, vec![0, 0, 1, 1, 2, 2]);
    }
}
