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
//! rounding exactly as one long loop would. The 8 × 8 blocks run one shader thread at a
//! time, its accumulators in registers across all its rows; their tasks are (slice, row of
//! blocks), writing disjoint runs of the partial. The tiles run slice after slice, each
//! slice's rows swept once with every thread on its tiles (`fisher::syrk_tile`); the
//! float64 SYRK (`fisher::syrk64`) runs the same tiles in float64.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::shape::{SyrkShape, TILE};
use super::syrk_block::run_blocks;
use super::syrk_pack::Rows;
use super::syrk_tile::run_triangle;
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

/// Tile rows `0..tiles` cut into at most `runs` runs `(ti0, ti1)` of near-equal work (row ti
/// holds `tiles - ti` tiles), none empty.
fn tile_runs(tiles: usize, runs: usize) -> Vec<(usize, usize)> {
    let total = tiles * (tiles + 1) / 2;
    let runs = runs.clamp(1, tiles.max(1));
    let mut bounds = Vec::with_capacity(runs);
    let (mut start, mut done) = (0, 0);
    for ti in 0..tiles {
        done += tiles - ti;
        // Close the run once it reaches its share of the work (the last run takes the rest).
        if done * runs >= total * (bounds.len() + 1) || ti + 1 == tiles {
            bounds.push((start, ti + 1));
            start = ti + 1;
        }
    }
    bounds
}

/// Multiply-adds below which tasks are grouped rather than handed to threads one by one.
const MIN_TASK_MACS: usize = 1 << 16;

impl HostImpl for FisherSyrk {
    /// Runs the chunk of rows `range` (inputs: padded scores, weights) into its partial.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        self.run_at(Level::detect(), inputs, range, output);
    }

    /// The same SYRK with its multiply-adds rounded as `mode` says.
    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(FisherSyrk { fma: mode, ..*self })
    }
}

/// How a chunk's partial is cut into tasks: `slices` slices of its rows, each `tiles` rows
/// of tiles (tile row ti holding `tiles - ti` tiles of `words` values), grouped into at
/// most `runs` runs of tile rows per slice.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tasks {
    pub slices: usize,
    pub tiles: usize,
    pub words: usize,
    pub runs: usize,
}

/// Runs `work(slice, (ti0, ti1), out)` for every slice of the chunk `src` and run of tile
/// rows `ti0..ti1`, in parallel, each into its own run of `out` (slice after slice, tile
/// row after tile row, as the partial lays them out). The one task loop of the float32 and
/// float64 SYRKs.
pub(super) fn run_tasks<T: Send + Sync>(
    src: Rows<T>,
    grid: Tasks,
    out: &mut [T],
    work: impl Fn(&Rows<T>, (usize, usize), &mut [T]) + Sync,
) {
    let Tasks {
        slices,
        tiles,
        words,
        runs,
    } = grid;
    let (n, width) = (src.len(), src.width);
    let bounds = tile_runs(tiles, runs);
    let mut tasks = Vec::with_capacity(slices * bounds.len());
    let mut rest = out;
    for slice in 0..slices {
        let rows = slice_rows(n, slices, slice);
        for &(ti0, ti1) in &bounds {
            let pairs: usize = (ti0..ti1).map(|ti| tiles - ti).sum();
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(pairs * words);
            tasks.push((rows.clone(), (ti0, ti1), head));
            rest = tail;
        }
    }
    // Small chunks' tasks together: a task of a few hundred multiply-adds costs less
    // than handing it to another thread (the bits are the same however they group).
    let pairs = tiles * (tiles + 1) / 2;
    let per_task = (n / slices * words * pairs / bounds.len()).max(1);
    tasks
        .into_par_iter()
        .with_min_len(MIN_TASK_MACS.div_ceil(per_task))
        .for_each(|(rows, run, out)| {
            let slice = Rows {
                scores: &src.scores[rows.start * width..rows.end * width],
                weights: &src.weights[rows],
                width,
            };
            work(&slice, run, out);
        });
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
        if edge == TILE {
            // Slice after slice, all threads on each (`run_triangle` shares its tiles out).
            let words = s.pairs * edge * edge;
            for (slice, out) in output.chunks_exact_mut(words).enumerate() {
                let rows = slice_rows(src.len(), s.slices, slice);
                let src = Rows {
                    scores: &src.scores[rows.start * width..rows.end * width],
                    weights: &src.weights[rows],
                    width,
                };
                match fused {
                    true => run_triangle::<f32, true>(level, &src, tiles, out),
                    false => run_triangle::<f32, false>(level, &src, tiles, out),
                }
            }
            return;
        }
        // One task per slice and run of rows of 8 × 8 blocks (pairs (ti, ti..tiles), a
        // contiguous run of the partial), one run per thread: each task gathers every shader
        // thread's rows once for all of its rows of blocks, so fewer runs read less.
        let grid = Tasks {
            slices: s.slices,
            tiles,
            words: edge * edge,
            runs: rayon::current_num_threads(),
        };
        run_tasks(src, grid, output, |src, run, out| match fused {
            true => run_blocks::<true>(level, src, run, tiles, out),
            false => run_blocks::<false>(level, src, run, tiles, out),
        });
    }
}
