//! The empirical-Fisher SYRK kernels: the tiled ones the public API runs (64 x 64 tiles
//! staged in workgroup memory, or 8 x 8 blocks over rows for narrow scores), the
//! one-thread-per-output baseline, their launch geometry and the host-side sum of their
//! per-chunk partials.

use std::sync::Arc;

pub use super::shape::{SyrkShape, BLOCK, NARROW_COLUMNS, TILE};

use crate::family::Family;
use crate::fisher::host_syrk::FisherSyrk;
use crate::kernel::FmaMode;
use crate::kernel::{Dispatch, Input, Kernel, Output};

/// The WGSL source of every kernel of the family.
pub const SHADER: &str = include_str!("../../../../shaders/fisher.wgsl");

/// Largest P accepted: one chunk's partial (the upper-triangle tiles) must fit a storage
/// binding every WebGPU device grants (128 MiB); at P = 4096 it is 34 MB.
pub const MAX_SCORE_COLUMNS: usize = 4096;

/// Columns of the calibration reference kernel.
pub const REFERENCE_COLUMNS: usize = 128;

/// Flops per row of the calibration reference kernel: one multiply-add (2 flops) per
/// upper-triangle entry.
pub const REFERENCE_FLOPS_PER_ITEM: f64 = (REFERENCE_COLUMNS * (REFERENCE_COLUMNS + 1)) as f64;

/// Rows of a chunk of the naive kernel at most (one loop trip per row, within
/// [`LOOP_BUDGET`](crate::kernel::LOOP_BUDGET)).
const NAIVE_CHUNK_ROWS: usize = 16_384;

/// Threads along each edge of a workgroup of the naive kernel.
const NAIVE_EDGE: u32 = 16;

/// Arithmetic per row: one multiply-add (2 flops) per upper-triangle entry.
fn flops_per_row(p: usize) -> f64 {
    (p * (p + 1)) as f64
}

fn tiled_grid(_items: u32, params: &[u32]) -> [u32; 3] {
    // params: [p, tiles, slices, pairs]; one workgroup per tile pair and slice.
    [params[3], params[2], 1]
}

fn naive_grid(_items: u32, params: &[u32]) -> [u32; 3] {
    // params[0]: the padded row width, the edge of the naive kernel's output.
    let edge = params[0].div_ceil(NAIVE_EDGE).max(1);
    [edge, edge, 1]
}

/// The tiled SYRK over rows of `p` scores (padded as [`SyrkShape::padded`] does), with one
/// weight per row: 64 x 64 tiles, or 8 x 8 blocks up to [`NARROW_COLUMNS`] columns.
pub fn tiled_kernel(p: usize) -> Kernel {
    shaped_kernel(SyrkShape::new(p))
}

/// The tiled SYRK for a given geometry (benchmarks compare the two tile sizes with it).
pub fn shaped_kernel(shape: SyrkShape) -> Kernel {
    let (id, entry) = if shape.tile == TILE {
        ("fisher_tiled", "fisher_tiled")
    } else {
        ("fisher_rows", "fisher_rows")
    };
    Kernel {
        entry,
        inputs: vec![Input::PerItem(shape.width), Input::PerItem(1)],
        output: Output::PerChunk(shape.partial_words()),
        params: shape.params(),
        dispatch: Dispatch::Custom(tiled_grid),
        max_chunk_items: Some(shape.max_chunk_rows()),
        min_chunk_items: Some(shape.min_chunk_rows()),
        flops_per_item: flops_per_row(shape.p),
        host: Some(Arc::new(FisherSyrk {
            shape,
            fma: FmaMode::default(),
        })),
        ..Kernel::map(id, Family::InformationGeometry, SHADER)
    }
}

/// The same SYRK with one thread per output entry (the benchmark's baseline), on the same
/// padded rows: a full width x width partial per chunk, zeros below the diagonal.
pub fn naive_kernel(p: usize) -> Kernel {
    let shape = SyrkShape::new(p);
    Kernel {
        entry: "fisher_naive",
        inputs: vec![Input::PerItem(shape.width), Input::PerItem(1)],
        output: Output::PerChunk(shape.width * shape.width),
        params: shape.params(),
        dispatch: Dispatch::Custom(naive_grid),
        // Each thread walks every row of its chunk.
        max_chunk_items: Some(NAIVE_CHUNK_ROWS),
        flops_per_item: flops_per_row(p),
        ..Kernel::map("fisher_naive", Family::InformationGeometry, SHADER)
    }
}

/// The calibration reference of the family: the tiled kernel at [`REFERENCE_COLUMNS`].
pub fn reference_kernel() -> Kernel {
    tiled_kernel(REFERENCE_COLUMNS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fisher::shape::MAX_SLICES;
    use std::borrow::Cow;

    #[test]
    fn shape_covers_every_column_with_whole_tiles() {
        for (p, tile, tiles, pairs) in [
            (1, BLOCK, 1, 1),
            (9, BLOCK, 2, 3),
            (32, BLOCK, 4, 10),
            (64, BLOCK, 8, 36),
            (65, TILE, 2, 3),
            (256, TILE, 4, 10),
            (1024, TILE, 16, 136),
        ] {
            let s = SyrkShape::new(p);
            assert_eq!((s.tile, s.tiles, s.pairs), (tile, tiles, pairs), "p = {p}");
            assert!(s.slices >= 1 && s.slices <= MAX_SLICES);
        }
        assert!(SyrkShape::new(MAX_SCORE_COLUMNS).partial_words() * 4 <= 128 << 20);
    }

    #[test]
    fn default_chunks_outweigh_their_partials_sixteen_fold() {
        // (P, rows at least, default rows of 1,000): 256 → 4 slices of 10 tiles, 163,840
        // words against 257 a row; 64 → 36 blocks, 2,304 words against 65; 4096 → the loop
        // budget's bound, cut to the 4,096 rows of 16,388 bytes a 128 MiB binding holds.
        for (p, least, rows) in [(256, 16_384, 16_384), (64, 1024, 2048), (4096, 16_384, 4096)] {
            let shape = SyrkShape::new(p);
            assert_eq!(shape.min_chunk_rows(), least, "p = {p}");
            assert!(least <= shape.max_chunk_rows());
            let kernel = tiled_kernel(p);
            // The default grid of a small call takes the floor; a caller's choice is kept.
            assert_eq!(kernel.chunk_items(1000), rows, "p = {p}");
            assert_eq!(kernel.bound_chunk_items(512, false), 512);
        }
        // 65,536 × 256 was 64 chunks of 1,024 rows (40 MB of partials); now 4 (2.6 MB).
        assert_eq!(tiled_kernel(256).chunk_items(65_536), 16_384);
    }

    #[test]
    fn rows_are_padded_to_whole_vec4_only_when_needed() {
        let shape = SyrkShape::new(3);
        assert_eq!(shape.width, 4);
        let rows = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        for parallel in [false, true] {
            assert_eq!(
                &*shape.padded(&rows, parallel).unwrap(),
                &[1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0]
            );
            assert!(matches!(
                SyrkShape::new(8).padded(&[0.0; 16], parallel).unwrap(),
                Cow::Borrowed(_)
            ));
        }
        // Blocks of rows copied in parallel, the last one short: the rows of the one copy.
        for p in [1, 3, 30, 61] {
            let shape = SyrkShape::new(p);
            let n = 5000;
            let rows: Vec<f32> = (0..n * p).map(|v| (v as f32 * 0.37).sin()).collect();
            let want: Vec<f32> = (0..n * shape.width)
                .map(|i| match i % shape.width {
                    c if c < p => rows[i / shape.width * p + c],
                    _ => 0.0,
                })
                .collect();
            for parallel in [false, true] {
                let got = shape.padded(&rows, parallel).unwrap();
                assert_eq!(&*got, &want[..], "P = {p}, parallel {parallel}");
            }
        }
    }
}
