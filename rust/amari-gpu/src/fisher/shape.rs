//! The launch geometry of the empirical-Fisher SYRK: tile edges and how the rows of a chunk
//! are cut into slices, a function of P only. Shared by the WGSL kernels (`syrk`) and their
//! host twin (`fisher::host_syrk`).

use std::borrow::Cow;

use rayon::prelude::*;

/// Rows a task of [`SyrkShape::padded`] copies in parallel: a few hundred KB of scores.
const PAD_ROWS: usize = 2048;

/// Edge of the output tile one workgroup of the tiled kernel computes (see the shader).
pub const TILE: usize = 64;

/// Edge of the output block of the narrow-scores kernel (`fisher_rows` in the shader).
pub const BLOCK: usize = 8;

/// Largest P computed with 8 x 8 blocks: up to one 64 x 64 tile, whose work would be mostly
/// padding or mirrored entries (on lavapipe the block kernel is 2x faster at P = 64 and 15x
/// at P = 32). Wider scores use the 64 x 64 tiles, whose data reuse in workgroup memory is
/// what a GPU needs.
pub const NARROW_COLUMNS: usize = 64;

/// Workgroups per chunk aimed at: when P gives fewer tiles, the chunk's rows are cut into
/// slices, each its own workgroup and partial, so wide devices are not left idle.
const TARGET_WORKGROUPS: usize = 32;
/// More slices multiply the readback for little gain.
pub(crate) const MAX_SLICES: usize = 4;

/// Rows of one slice at most for the 64 x 64 tiles: 512 steps of 32 rows, each 51 loop
/// trips (the step, a 16-trip staging loop and the 32-trip inner loop, exit tests
/// included), 26,112 in all, within [`LOOP_BUDGET`](crate::kernel::LOOP_BUDGET).
pub const TILED_SLICE_ROWS: usize = 16_384;
/// Rows of one slice at most for the 8 x 8 blocks: 16,384 per thread of 64.
pub const NARROW_SLICE_ROWS: usize = 1 << 20;

/// How many times a chunk's rows (scores and weights) outweigh its partial at least, in
/// the default chunk grid: below that the partials (written, faulted in, summed on the
/// host) cost more than the SYRK's reads of the rows.
pub const PARTIAL_SHARE: usize = 16;

/// Rows per chunk at least for rows of `row_words` words (scores and weight) and
/// `partial_words` words of partial per chunk: the power of two whose rows outweigh the
/// partial [`PARTIAL_SHARE`]-fold, at most `most`. A function of P and the dtype only.
pub fn min_chunk_rows_for(partial_words: usize, row_words: usize, most: usize) -> usize {
    (PARTIAL_SHARE * partial_words)
        .div_ceil(row_words.max(1))
        .next_power_of_two()
        .min(most)
}

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

    /// Rows of a chunk at most: its slices stay within the kernels' loop budget.
    pub fn max_chunk_rows(&self) -> usize {
        let per_slice = if self.tile == TILE {
            TILED_SLICE_ROWS
        } else {
            NARROW_SLICE_ROWS
        };
        self.slices * per_slice
    }

    /// Rows of a chunk at least in the default chunk grid ([`min_chunk_rows_for`]).
    pub fn min_chunk_rows(&self) -> usize {
        min_chunk_rows_for(self.partial_words(), self.width + 1, self.max_chunk_rows())
    }

    /// Words of one chunk's partial output.
    pub fn partial_words(&self) -> usize {
        self.slices * self.pairs * self.tile * self.tile
    }

    /// Rows of `scores` as the kernels read them: as they are when P is a multiple of 4,
    /// else copied with zero columns appended up to [`SyrkShape::width`]. With `parallel`,
    /// blocks of rows are copied on rayon's current pool (the caller's: a context's host
    /// threads for a large call), into zeroed memory whose pages fault in where they are
    /// written: on the calling thread alone the copy of 65,536 × 30 scores was about a
    /// quarter of the Fisher call.
    pub fn padded<'a>(
        &self,
        scores: &'a [f32],
        parallel: bool,
    ) -> crate::error::Result<Cow<'a, [f32]>> {
        if self.width == self.p {
            return Ok(Cow::Borrowed(scores));
        }
        let (p, width) = (self.p, self.width);
        let rows = scores.len() / p.max(1);
        let len = crate::alloc::product("padded scores", &[rows, width], 4)?;
        let mut padded = crate::alloc::zeroed("padded scores", len)?;
        let copy = |(to, from): (&mut [f32], &[f32])| {
            for (to, from) in to.chunks_exact_mut(width).zip(from.chunks_exact(p)) {
                to[..p].copy_from_slice(from);
            }
        };
        if parallel {
            padded
                .par_chunks_mut(PAD_ROWS * width)
                .zip(scores.par_chunks(PAD_ROWS * p))
                .for_each(copy);
        } else {
            copy((&mut padded, scores));
        }
        Ok(Cow::Owned(padded))
    }

    pub(crate) fn params(&self) -> Vec<u32> {
        [self.width, self.tiles, self.slices, self.pairs]
            .iter()
            .map(|&v| v as u32)
            .collect()
    }
}
