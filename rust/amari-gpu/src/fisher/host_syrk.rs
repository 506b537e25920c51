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
//! `fma` rounds once or twice as the devices do ([`FmaMode`]). Vectorised across 16 output
//! columns, four rows of the tile at a time, rows of the slice sequential.

use std::ops::Range;
use std::sync::Arc;

use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

use super::shape::{SyrkShape, TILE};
use crate::host::arith::madd;
use crate::host::simd::{dispatch, Task};

/// The host twin of `fisher::shaped_kernel(shape)`.
#[derive(Debug, Clone, Copy)]
pub struct FisherSyrk {
    /// Geometry (tile size, slices, pairs), a function of P only.
    pub shape: SyrkShape,
    /// How the devices round `fma`.
    pub fma: FmaMode,
}

/// Rows `[start, end)` of slice `slice` of a chunk of `n` rows (`slice_rows` in the shader).
fn slice_rows(n: usize, slices: usize, slice: usize) -> std::ops::Range<usize> {
    let (base, extra) = (n / slices, n % slices);
    let start = slice * base + slice.min(extra);
    start..start + base + usize::from(slice < extra)
}

/// Multiply-adds below which tiles are not split into tasks of their own.
const MIN_TASK_MACS: usize = 1 << 16;

/// Tile pairs (ti, tj), ti ≤ tj, row by row through the upper triangle.
fn tile_pairs(tiles: usize) -> Vec<(usize, usize)> {
    (0..tiles)
        .flat_map(|i| (i..tiles).map(move |j| (i, j)))
        .collect()
}

impl HostImpl for FisherSyrk {
    /// Runs the chunk of rows `range` (inputs: padded scores, weights) into its partial.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let s = self.shape;
        assert_eq!(output.len(), s.partial_words(), "one partial per chunk");
        let scores = &inputs[0][range.start * s.width..range.end * s.width];
        let weights = &inputs[1][range.clone()];
        let n = range.len();
        let pairs = tile_pairs(s.tiles);
        let edge = s.tile;
        let fused = self.fma == FmaMode::Fused;
        // Tiles of a small chunk together: a task of a few hundred multiply-adds costs less
        // than handing it to another thread (the tiles are independent, so the bits are
        // the same however they are grouped).
        let per_tile = (n * edge * edge).max(1);
        output
            .par_chunks_mut(edge * edge)
            .with_min_len(MIN_TASK_MACS.div_ceil(per_tile))
            .enumerate()
            .for_each(|(t, out)| {
                let (slice, pair) = (t / s.pairs, t % s.pairs);
                let rows = slice_rows(n, s.slices, slice);
                let (ti, tj) = pairs[pair];
                let job = Job {
                    scores: &scores[rows.start * s.width..rows.end * s.width],
                    weights: &weights[rows],
                    width: s.width,
                    i0: ti * edge,
                    j0: tj * edge,
                    out,
                };
                match (edge == TILE, fused) {
                    (true, true) => dispatch(Tile::<true>(job)),
                    (true, false) => dispatch(Tile::<false>(job)),
                    (false, true) => dispatch(Block::<true>(job)),
                    (false, false) => dispatch(Block::<false>(job)),
                }
            });
    }

    /// The same SYRK with its multiply-adds rounded as `mode` says.
    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(FisherSyrk { fma: mode, ..*self })
    }
}

/// One tile of one slice.
struct Job<'a> {
    scores: &'a [f32],
    weights: &'a [f32],
    width: usize,
    i0: usize,
    j0: usize,
    out: &'a mut [f32],
}

impl Job<'_> {
    /// Columns `c0..c0 + N` of every row (zeros past the padded width), optionally times
    /// the row's weight: what the shader stages.
    #[inline(always)]
    fn strip<const N: usize>(&self, c0: usize, weighted: bool) -> Vec<[f32; N]> {
        let rows = self.weights.len();
        let mut strip = vec![[0.0f32; N]; rows];
        // Columns past the padded width stay 0.0.
        let cols = self.width.saturating_sub(c0).min(N);
        if cols == 0 {
            return strip;
        }
        for (r, to) in strip.iter_mut().enumerate() {
            let row = &self.scores[r * self.width + c0..][..cols];
            let w = self.weights[r];
            for (v, &x) in to[..cols].iter_mut().zip(row) {
                *v = if weighted { x * w } else { x };
            }
        }
        strip
    }
}

struct Tile<'a, const F: bool>(Job<'a>);

impl<const F: bool> Task for Tile<'_, F> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        const E: usize = TILE;
        let job = self.0;
        let lhs = job.strip::<E>(job.i0, true);
        let rhs = job.strip::<E>(job.j0, false);
        #[cfg(target_arch = "x86_64")]
        if crate::host::simd::Level::detect().has_avx2() {
            for r0 in (0..E).step_by(4) {
                for c0 in (0..E).step_by(16) {
                    let mut acc = [[0.0f32; 16]; 4];
                    // SAFETY: `Level::has_avx2` is true only after
                    // `is_x86_feature_detected!` found AVX2 and FMA, all that the
                    // target-feature function needs; its memory accesses are in bounds.
                    #[allow(unsafe_code)]
                    unsafe {
                        avx2::tile::<F>(&lhs, &rhs, r0, c0, &mut acc)
                    };
                    for (rr, acc) in acc.iter().enumerate() {
                        job.out[(r0 + rr) * E + c0..][..16].copy_from_slice(acc);
                    }
                }
            }
            return;
        }
        for r0 in (0..E).step_by(4) {
            for c0 in (0..E).step_by(16) {
                let mut acc = [[0.0f32; 16]; 4];
                for (x, y) in lhs.iter().zip(&rhs) {
                    let y: &[f32; 16] = y[c0..c0 + 16].try_into().expect("16 columns");
                    for (rr, acc) in acc.iter_mut().enumerate() {
                        let xv = x[r0 + rr];
                        for c in 0..16 {
                            acc[c] = madd::<F>(xv, y[c], acc[c]);
                        }
                    }
                }
                for (rr, acc) in acc.iter().enumerate() {
                    job.out[(r0 + rr) * E + c0..][..16].copy_from_slice(acc);
                }
            }
        }
    }
}

/// The tile's register-blocked micro-kernel on AVX2: 4 rows by 16 columns of accumulators
/// in eight vector registers, the slice's rows in order, each entry's chain the shader's.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use crate::fisher::shape::TILE;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tile<const F: bool>(
        lhs: &[[f32; TILE]],
        rhs: &[[f32; TILE]],
        r0: usize,
        c0: usize,
        acc: &mut [[f32; 16]; 4],
    ) {
        let mut lo = [_mm256_setzero_ps(); 4];
        let mut hi = [_mm256_setzero_ps(); 4];
        for (x, y) in lhs.iter().zip(rhs) {
            let y = &y[c0..c0 + 16];
            // SAFETY: `y` holds 16 floats (bounds-checked above): the loads at 0 and 8
            // read 8 floats each inside it.
            #[allow(unsafe_code)]
            let (y0, y1) = unsafe {
                (
                    _mm256_loadu_ps(y.as_ptr()),
                    _mm256_loadu_ps(y.as_ptr().add(8)),
                )
            };
            for r in 0..4 {
                let xv = _mm256_set1_ps(x[r0 + r]);
                if F {
                    lo[r] = _mm256_fmadd_ps(xv, y0, lo[r]);
                    hi[r] = _mm256_fmadd_ps(xv, y1, hi[r]);
                } else {
                    lo[r] = _mm256_add_ps(_mm256_mul_ps(xv, y0), lo[r]);
                    hi[r] = _mm256_add_ps(_mm256_mul_ps(xv, y1), hi[r]);
                }
            }
        }
        for r in 0..4 {
            // SAFETY: `acc[r]` is an array of 16 floats: the stores at 0 and 8 write 8
            // floats each inside it.
            #[allow(unsafe_code)]
            unsafe {
                _mm256_storeu_ps(acc[r].as_mut_ptr(), lo[r]);
                _mm256_storeu_ps(acc[r].as_mut_ptr().add(8), hi[r]);
            }
        }
    }
}

struct Block<'a, const F: bool>(Job<'a>);

impl<const F: bool> Task for Block<'_, F> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        const E: usize = crate::fisher::shape::BLOCK;
        const THREADS: usize = 64;
        let job = self.0;
        let lhs = job.strip::<E>(job.i0, true);
        let rhs = job.strip::<E>(job.j0, false);
        let mut total = [[0.0f32; E]; E];
        for t in 0..THREADS {
            let mut acc = [[0.0f32; E]; E];
            for (x, y) in lhs.iter().zip(&rhs).skip(t).step_by(THREADS) {
                for (r, acc) in acc.iter_mut().enumerate() {
                    for c in 0..E {
                        acc[c] = madd::<F>(x[r], y[c], acc[c]);
                    }
                }
            }
            for (tot, acc) in total.iter_mut().zip(&acc) {
                for c in 0..E {
                    tot[c] += acc[c];
                }
            }
        }
        for (r, tot) in total.iter().enumerate() {
            job.out[r * E..][..E].copy_from_slice(tot);
        }
    }
}
