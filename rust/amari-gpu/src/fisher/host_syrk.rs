//! The empirical-Fisher SYRK on the host, partial for partial: a chunk's rows are cut into
//! the same slices as on the devices, and every entry of every tile (or 8 × 8 block) of the
//! upper triangle is accumulated as `shaders/fisher.wgsl` does, so the partials, and hence
//! their float64 sum in chunk order, are the same bits.
//!
//! - 64 × 64 tiles (`fisher_tiled`): entry (i, j) of a slice is
//!   `acc = fma(s[r,i] · w[r], s[r,j], acc)` over the slice's rows in order, from 0 (the
//!   shader stages `s · w`, rounded, then fuses; its padding rows add `fma(0, 0, acc)`, which
//!   changes nothing as `acc` is never −0).
//! - 8 × 8 blocks (`fisher_rows`, P ≤ 64): 64 threads take every 64th row of the slice, each
//!   accumulating as above, then their 64 partial blocks are added in thread order from 0.
//!
//! `fma` rounds once or twice as the devices do ([`FmaMode`]).
//!
//! The work is blocked for the caches without changing any entry's chain: the rows of a
//! slice are taken a block at a time, packed into small panels (`syrk_pack`), and each
//! micro-kernel loads its accumulators from the output before a block and stores them
//! after it, so every entry continues one multiply-add chain over the rows in order,
//! rounding exactly as one long loop would. Slice after slice, every thread of the pool
//! works on the slice: the 8 × 8 blocks gather each shader thread's rows into a panel and
//! run them with the accumulators in registers (`fisher::syrk_block`), the tiles sweep the
//! slice's rows once with every thread on its tiles (`fisher::syrk_tile`); the float64
//! SYRK (`fisher::syrk64`) runs the same tiles in float64.

use std::ops::Range;
use std::sync::Arc;

use super::shape::{SyrkShape, TILE};
use super::syrk_block::{self, run_blocks};
use super::syrk_pack::Rows;
use super::syrk_tile::{self, run_triangle};
use crate::host::simd::Level;
use crate::kernel::{FmaMode, HostImpl};

/// The host twin of `fisher::shaped_kernel(shape)`.
#[derive(Debug, Clone, Copy)]
pub struct FisherSyrk {
    /// Geometry (tile size, slices, pairs), a function of P only.
    pub shape: SyrkShape,
    /// How the devices round `fma`.
    pub fma: FmaMode,
}

/// Rows `[start, end)` of slice `slice` of a chunk of `n` rows (`slice_rows` in the shader).
fn slice_rows(n: usize, slices: usize, slice: usize) -> Range<usize> {
    let (base, extra) = (n / slices, n % slices);
    let start = slice * base + slice.min(extra);
    start..start + base + usize::from(slice < extra)
}

impl HostImpl for FisherSyrk {
    /// Runs the chunk of rows `range` (inputs: padded scores, weights) into its partial.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        self.run_at(Level::detect(), inputs, range, output);
    }

    /// The same SYRK with its multiply-adds rounded as `mode` says.
    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(FisherSyrk { fma: mode, ..*self })
    }

    /// Whether its largest slice's tiles or blocks are shared among the threads.
    fn splits(&self, items: usize) -> bool {
        let s = self.shape;
        let rows = items.div_ceil(s.slices.max(1));
        match s.tile == TILE {
            true => syrk_tile::splits::<f32>(rows, s.tiles),
            false => syrk_block::splits(rows, s.pairs * s.tile * s.tile),
        }
    }
}

impl FisherSyrk {
    /// [`HostImpl::run`] with the micro-kernels of `level` (at most the CPU's): every level
    /// gives the same bits, which the tests check by forcing each.
    pub(crate) fn run_at(
        &self,
        level: Level,
        inputs: &[&[f32]],
        range: Range<usize>,
        output: &mut [f32],
    ) {
        let s = self.shape;
        assert_eq!(output.len(), s.partial_words(), "one partial per chunk");
        // The micro-kernels rely on this: `Avx512` and `Avx2` only where the CPU has them.
        let level = level.at_most_detected();
        let width = s.width;
        let src = Rows {
            scores: &inputs[0][range.start * width..range.end * width],
            weights: &inputs[1][range],
            width,
        };
        let (edge, tiles) = (s.tile, s.tiles);
        let fused = self.fma == FmaMode::Fused;
        // Slice after slice, all threads on each (`run_triangle` and `run_blocks` share
        // their work out).
        let words = s.pairs * edge * edge;
        for (slice, out) in output.chunks_exact_mut(words).enumerate() {
            let rows = slice_rows(src.len(), s.slices, slice);
            let src = Rows {
                scores: &src.scores[rows.start * width..rows.end * width],
                weights: &src.weights[rows],
                width,
            };
            match (edge == TILE, fused) {
                (true, true) => run_triangle::<f32, true>(level, &src, tiles, out),
                (true, false) => run_triangle::<f32, false>(level, &src, tiles, out),
                (false, true) => run_blocks::<true>(level, &src, tiles, out),
                (false, false) => run_blocks::<false>(level, &src, tiles, out),
            }
        }
    }
}
