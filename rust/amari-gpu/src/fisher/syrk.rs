//! The empirical-Fisher SYRK kernels: the tiled ones the public API runs (64 x 64 tiles
//! staged in workgroup memory, or 8 x 8 blocks over rows for narrow scores), the
//! one-thread-per-output baseline, their launch geometry and the host-side sum of their
//! per-chunk partials.

use std::borrow::Cow;

use crate::family::Family;
use crate::kernel::{Dispatch, Input, Kernel, Output};

/// The WGSL source of every kernel of the family.
pub const SHADER: &str = include_str!("../../../../shaders/fisher.wgsl");

/// Edge of the output tile one workgroup of the tiled kernel computes (see the shader).
pub const TILE: usize = 64;

/// Edge of the output block of the narrow-scores kernel (`fisher_rows` in the shader).
pub const BLOCK: usize = 8;

/// Largest P computed with 8 x 8 blocks: up to one 64 x 64 tile, whose work would be mostly
/// padding or mirrored entries (on lavapipe the block kernel is 2x faster at P = 64 and 15x
/// at P = 32). Wider scores use the 64 x 64 tiles, whose data reuse in workgroup memory is
/// what a GPU needs.
pub const NARROW_COLUMNS: usize = 64;

/// Largest P accepted: one chunk's partial (the upper-triangle tiles) must fit a storage
/// binding every WebGPU device grants (128 MiB); at P = 4096 it is 34 MB.
pub const MAX_SCORE_COLUMNS: usize = 4096;

/// Columns of the calibration reference kernel.
pub const REFERENCE_COLUMNS: usize = 128;

/// Flops per row of the calibration reference kernel: one multiply-add (2 flops) per
/// upper-triangle entry.
pub const REFERENCE_FLOPS_PER_ITEM: f64 = (REFERENCE_COLUMNS * (REFERENCE_COLUMNS + 1)) as f64;

/// Workgroups per chunk aimed at: when P gives fewer tiles, the chunk's rows are cut into
/// slices, each its own workgroup and partial, so wide devices are not left idle.
const TARGET_WORKGROUPS: usize = 32;
/// More slices multiply the readback for little gain.
const MAX_SLICES: usize = 4;
/// Threads along each edge of a workgroup of the naive kernel.
const NAIVE_EDGE: u32 = 16;

/// Launch geometry of the tiled SYRK for P score columns (a function of P only, so every
/// chunk of every call with this P is cut the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyrkShape {
    /// Score columns.
    pub p: usize,
    /// Row width on the device: P rounded up to a multiple of 4 (the kernels read vec4).
    pub width: usize,
    /// Edge of the output tiles: [`TILE`], or [`BLOCK`] for narrow scores.
    pub tile: usize,
    /// Tiles along one edge of the output, `ceil(P / tile)`.
    pub tiles: usize,
    /// Upper-triangle tile pairs, `tiles (tiles + 1) / 2`.
    pub pairs: usize,
    /// Row slices per chunk, each written as its own partial.
    pub slices: usize,
}

impl SyrkShape {
    /// The geometry for `p` columns.
    pub fn new(p: usize) -> SyrkShape {
        SyrkShape::with_tile(p, if p <= NARROW_COLUMNS { BLOCK } else { TILE })
    }

    /// The geometry for `p` columns with tiles of edge `tile` ([`TILE`] or [`BLOCK`]).
    pub fn with_tile(p: usize, tile: usize) -> SyrkShape {
        assert!(
            tile == TILE || tile == BLOCK,
            "the shader has tiles of 64 or 8"
        );
        let tiles = p.div_ceil(tile).max(1);
        let pairs = tiles * (tiles + 1) / 2;
        let slices = TARGET_WORKGROUPS.div_ceil(pairs).clamp(1, MAX_SLICES);
        SyrkShape {
            p,
            width: p.div_ceil(4) * 4,
            tile,
            tiles,
            pairs,
            slices,
        }
    }

    /// Words of one chunk's partial output.
    pub fn partial_words(&self) -> usize {
        self.slices * self.pairs * self.tile * self.tile
    }

    /// Rows of `scores` as the kernels read them: as they are when P is a multiple of 4,
    /// else copied with zero columns appended up to [`SyrkShape::width`].
    pub fn padded<'a>(&self, scores: &'a [f32]) -> crate::error::Result<Cow<'a, [f32]>> {
        if self.width == self.p {
            return Ok(Cow::Borrowed(scores));
        }
        let rows = scores.len() / self.p.max(1);
        let len = crate::alloc::product("padded scores", &[rows, self.width], 4)?;
        let mut padded = crate::alloc::zeroed("padded scores", len)?;
        for (to, from) in padded
            .chunks_exact_mut(self.width)
            .zip(scores.chunks_exact(self.p))
        {
            to[..self.p].copy_from_slice(from);
        }
        Ok(Cow::Owned(padded))
    }

    fn params(&self) -> Vec<u32> {
        [self.width, self.tiles, self.slices, self.pairs]
            .iter()
            .map(|&v| v as u32)
            .collect()
    }
}

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
        flops_per_item: flops_per_row(shape.p),
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
    fn rows_are_padded_to_whole_vec4_only_when_needed() {
        let shape = SyrkShape::new(3);
        assert_eq!(shape.width, 4);
        let rows = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(
            &*shape.padded(&rows).unwrap(),
            &[1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0]
        );
        assert!(matches!(
            SyrkShape::new(8).padded(&[0.0; 16]).unwrap(),
            Cow::Borrowed(_)
        ));
    }
}
