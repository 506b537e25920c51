//! The float64 empirical-Fisher SYRK: one partial per chunk of rows, the packed upper
//! triangle of `sum_r (s_r w_r) s_r^T` over the chunk's rows, accumulated in float64.
//!
//! Every entry (i, j), i <= j, of a chunk is one chain `acc = fma(s[r,i] · w[r], s[r,j], acc)`
//! over the chunk's rows in order, from 0 (the product `s · w` rounded first): the WGSL
//! kernel runs one thread per entry, the host kernel blocks the same chains for registers
//! and caches (accumulators loaded before a block of rows and stored after it, which
//! changes no rounding), so every device writes the same bits: it is the float32 SYRK's
//! host kernel (`fisher::syrk_tile`'s sweeps of 64 × 64 tiles) in
//! float64, over one slice, its tiles then copied into the partial. The partial is the
//! packed upper triangle of the padded width W, row i holding entries j = i..W.
//!
//! The WGSL is generated for a scalar type (`fisher_triangle` in float64; the float32 calls
//! keep `shaders/fisher.wgsl`'s tiled kernels and their bits). Chunks hold at most
//! [`CHUNK_ROWS`] rows, so each thread's one loop stays within lavapipe's loop budget.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::shape::{min_chunk_rows_for, TILE};
use super::syrk_pack::{with_scratch, Rows, TILES};
use super::syrk_tile::{self, run_triangle};
use crate::dtype::{as_f64, as_f64_mut, read_f64, write_f64, Dtype};
use crate::family::Family;
use crate::host::simd::Level;
use crate::kernel::{Dispatch, FmaMode, HostImpl, Input, Kernel, Output};

/// Rows of a chunk at most: one loop trip per row in every thread, within the loop budget
/// of every driver (lavapipe stops an invocation's loops after 65,535 trips).
pub const CHUNK_ROWS: usize = 16_384;

/// Threads along each edge of a workgroup.
const EDGE: u32 = 16;

/// The packed upper triangle's offset of row `i` of a `w`-wide matrix.
pub(crate) fn row_offset(i: usize, w: usize) -> usize {
    i * (2 * w + 1 - i) / 2
}

/// Values of one chunk's partial: the packed upper triangle of the padded width `w`.
pub(crate) fn triangle(w: usize) -> usize {
    w * (w + 1) / 2
}

/// The WGSL of the triangle SYRK in `dtype` (scores, weights and partials of that scalar).
pub fn source(dtype: Dtype) -> String {
    let t = dtype.wgsl();
    format!(
        "{enable}// Empirical-Fisher SYRK in {t}: one thread per upper-triangle entry (i, j) of \
         the padded width\n\
         // `dim`, one chain over the chunk's rows in order; the partial is the packed upper \
         triangle.\n\
         struct Params {{ n: u32, row_threads: u32, first: u32, _pad1: u32, dim: u32, \
         tiles: u32, slices: u32, pairs: u32, }}\n\
         @group(0) @binding(0) var<uniform> params: Params;\n\
         @group(0) @binding(1) var<storage, read> src: array<{t}>;\n\
         @group(0) @binding(2) var<storage, read> weights: array<{t}>;\n\
         @group(0) @binding(3) var<storage, read_write> partial: array<{t}>;\n\
         @compute @workgroup_size({EDGE}, {EDGE})\n\
         fn fisher_triangle(@builtin(global_invocation_id) gid: vec3<u32>) {{\n\
         \x20   let w = params.dim;\n\
         \x20   let i = gid.y;\n\
         \x20   let j = gid.x;\n\
         \x20   if (i >= w || j >= w || j < i) {{\n\
         \x20       return;\n\
         \x20   }}\n\
         \x20   var acc = {t}(0.0);\n\
         \x20   for (var r = 0u; r < params.n; r = r + 1u) {{\n\
         \x20       acc = fma(src[r * w + i] * weights[r], src[r * w + j], acc);\n\
         \x20   }}\n\
         \x20   // Row i of the packed triangle starts at i (2w + 1 - i) / 2 (an even product).\n\
         \x20   partial[i * (2u * w + 1u - i) / 2u + (j - i)] = acc;\n\
         }}\n",
        enable = dtype.wgsl_enable(),
    )
}

fn grid(_items: u32, params: &[u32]) -> [u32; 3] {
    // params[0]: the padded width, the edge of the entries' grid.
    let edge = params[0].div_ceil(EDGE).max(1);
    [edge, edge, 1]
}

/// The float64 SYRK over rows of `p` scores padded to `width` (a multiple of 4, as
/// `SyrkShape` pads them) with one weight per row: every value two words.
pub fn kernel(p: usize, width: usize) -> Kernel {
    let words = Dtype::F64.bytes() / 4;
    Kernel {
        entry: "fisher_triangle",
        inputs: vec![Input::PerItem(words * width), Input::PerItem(words)],
        output: Output::PerChunk(words * triangle(width)),
        params: [width, 0, 1, 0].iter().map(|&v| v as u32).collect(),
        dispatch: Dispatch::Custom(grid),
        max_chunk_items: Some(CHUNK_ROWS),
        // Values per row and per partial both two words: the same rule as float32's.
        min_chunk_items: Some(min_chunk_rows_for(triangle(width), width + 1, CHUNK_ROWS)),
        flops_per_item: (p * (p + 1)) as f64,
        host: Some(Arc::new(Triangle {
            width,
            fma: FmaMode::default(),
        })),
        dtype: Dtype::F64,
        ..Kernel::map("fisher_triangle", Family::InformationGeometry, source(Dtype::F64))
    }
}

/// The host twin of [`kernel`].
#[derive(Debug, Clone, Copy)]
pub struct Triangle {
    /// Padded width W.
    pub width: usize,
    /// How the devices round float64 `fma`.
    pub fma: FmaMode,
}

impl HostImpl for Triangle {
    /// Runs the chunk of rows `range` (inputs: padded float64 scores, weights) into its
    /// packed triangle.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        self.run_at(Level::detect(), inputs, range, output);
    }

    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(Triangle { fma: mode, ..*self })
    }

    /// Whether the chunk's one slice has its tiles shared among the threads.
    fn splits(&self, items: usize) -> bool {
        syrk_tile::splits::<f64>(items, self.width.div_ceil(TILE).max(1))
    }
}

impl Triangle {
    /// [`HostImpl::run`] with the micro-kernels of `level` (at most the CPU's): every level
    /// gives the same bits, which the tests check by forcing each.
    pub(crate) fn run_at(
        &self,
        level: Level,
        inputs: &[&[f32]],
        range: Range<usize>,
        output: &mut [f32],
    ) {
        let w = self.width;
        assert_eq!(output.len(), 2 * triangle(w), "one packed triangle per chunk");
        // The micro-kernels rely on this: `Avx512` and `Avx2` only where the CPU has them.
        let level = level.at_most_detected();
        let scores = values(&inputs[0][2 * range.start * w..2 * range.end * w]);
        let weights = values(&inputs[1][2 * range.start..2 * range.end]);
        let src = Rows {
            scores: &scores,
            weights: &weights,
            width: w,
        };
        // The upper triangle's 64 × 64 tiles of one slice (the whole chunk), then copied
        // into the packed triangle: O(W²) against the tiles' O(n W²). The tiles are this
        // thread's scratch (`syrk_pack::with_scratch`), not zeroed: `run_triangle` writes
        // every value (below a diagonal tile's diagonal too), so what an earlier chunk left
        // in them is never read.
        let (tiles, words) = (w.div_ceil(TILE).max(1), TILE * TILE);
        with_scratch(&TILES, tiles * (tiles + 1) / 2 * words, |tiled: &mut [f64]| {
            match self.fma == FmaMode::Fused {
                true => run_triangle::<f64, true>(level, &src, tiles, tiled),
                false => run_triangle::<f64, false>(level, &src, tiles, tiled),
            }
            pack_triangle(w, tiles, tiled, output);
        });
    }
}

/// The upper triangle of the W × W matrix held as `tiles` × `tiles` 64 × 64 tiles (`tiled`,
/// the upper triangle's tiles row after row) packed row after row into `output`'s words.
fn pack_triangle(w: usize, tiles: usize, tiled: &[f64], output: &mut [f32]) {
    let words = TILE * TILE;
    let mut packed = Vec::with_capacity(triangle(w));
    for i in 0..w {
        let (ti, r) = (i / TILE, i % TILE);
        // Tile (ti, tj) is pair ti · tiles − ti (ti − 1) / 2 + tj − ti of the tiled rows.
        let first = ti * tiles - ti * ti.saturating_sub(1) / 2;
        for tj in ti..tiles {
            let tile = &tiled[(first + tj - ti) * words + r * TILE..][..TILE];
            let (from, to) = ((i.max(tj * TILE)) - tj * TILE, (w - tj * TILE).min(TILE));
            packed.extend_from_slice(&tile[from..to]);
        }
    }
    match as_f64_mut(output) {
        Some(out) => out.copy_from_slice(&packed),
        None => packed
            .iter()
            .enumerate()
            .for_each(|(k, &v)| write_f64(output, k, v)),
    }
}

/// float64 values of `words`: borrowed when 8-byte aligned, else copied.
fn values(words: &[f32]) -> Cow<'_, [f64]> {
    match as_f64(words) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned((0..words.len() / 2).map(|k| read_f64(words, k)).collect()),
    }
}

/// Sum over chunks (in chunk order, float64) of the packed triangles, as a row-major P × P
/// matrix, exactly symmetric. Every entry is summed over the chunks on its own (in
/// parallel: no entry's sum depends on another's).
pub fn reduce(p: usize, width: usize, partials: &[f32]) -> crate::error::Result<Vec<f64>> {
    let values = triangle(width);
    let chunks = partials.len() / (2 * values).max(1);
    let aligned = as_f64(partials);
    let at = |k: usize| match aligned {
        Some(v) => v[k],
        None => read_f64(partials, k),
    };
    let mut sums = crate::alloc::zeroed::<f64>("partial sums", values)?;
    sums.par_iter_mut().enumerate().for_each(|(k, total)| {
        for c in 0..chunks {
            *total += at(c * values + k);
        }
    });
    let len = crate::alloc::product("fisher matrix", &[p, p], 8)?;
    let mut matrix = crate::alloc::zeroed::<f64>("fisher matrix", len)?;
    for i in 0..p {
        let row = &sums[row_offset(i, width)..];
        for j in i..p {
            matrix[i * p + j] = row[j - i];
            matrix[j * p + i] = row[j - i];
        }
    }
    Ok(matrix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::f64_words;

    /// The shader's chain for entry (i, j), `fused` or not, straight from its definition.
    fn chain(rows: &[f64], weights: &[f64], w: usize, (i, j): (usize, usize), fused: bool) -> f64 {
        let mut acc = 0.0f64;
        for (r, &wt) in weights.iter().enumerate() {
            let (x, y) = (rows[r * w + i] * wt, rows[r * w + j]);
            acc = if fused { x.mul_add(y, acc) } else { x * y + acc };
        }
        acc
    }

    #[test]
    fn host_triangle_is_every_chain_of_the_shader_at_every_level() {
        // Widths inside one 64 × 64 tile, on a tile's edge and past it (partial tiles and
        // registers); row counts of one row, inside one 64-row block and across several.
        for (n, w) in [(300, 12), (1, 4), (130, 132), (65, 64), (7, 68)] {
            let rows: Vec<f64> = (0..n * w)
                .map(|k| ((k * 7919) % 1013) as f64 / 97.0 - 5.0 + 1e-9 * k as f64)
                .collect();
            let weights: Vec<f64> = (0..n).map(|r| 0.5 + (r % 7) as f64 / 3.0).collect();
            for fused in [true, false] {
                let fma = if fused { FmaMode::Fused } else { FmaMode::Separate };
                let host = Triangle { width: w, fma };
                let mut want = Vec::new();
                for i in 0..w {
                    for j in i..w {
                        want.push(chain(&rows, &weights, w, (i, j), fused).to_bits());
                    }
                }
                for level in [Level::Portable, Level::Avx2, Level::Avx512] {
                    let mut out = vec![0.0f32; 2 * triangle(w)];
                    let inputs = [f64_words(&rows), f64_words(&weights)];
                    host.run_at(level, &inputs, 0..n, &mut out);
                    let got: Vec<u64> =
                        (0..triangle(w)).map(|k| read_f64(&out, k).to_bits()).collect();
                    assert_eq!(got, want, "n {n}, w {w}, fused {fused}, {level:?}");
                }
            }
        }
    }

    #[test]
    fn sweeps_and_shared_tiles_keep_every_chain_on_any_pool() {
        // Row counts past one sweep of packed rows (512 rows at W = 68, 128 and 4, 384 at
        // W = 260) with tails, P = 1, 7, 17, 65, 128 (whole strips only), 64 (one strip, its
        // right rows read from the scores) and 257 padded; pools of 1, 2 and 3 threads cut the tiles
        // into different runs of rows: the bits never change.
        let sizes = [(2100, 65usize), (2100, 1), (700, 257), (1500, 17), (3000, 7), (1100, 128), (1100, 64)];
        for (n, p) in sizes {
            let rows = scores(n, p);
            let weights: Vec<f64> = (0..n).map(|r| 0.5 + (r % 7) as f64 / 3.0).collect();
            assert_every_chain(&rows, &weights, n, p);
        }
    }

    #[test]
    fn unit_weights_share_one_panel_and_keep_every_chain() {
        // Weights of 1 (an unweighted call) make the left rows the right ones: one panel
        // packed, or none when the scores are one strip wide (W = 64, read in place); one
        // row of another weight sends its sweep (of 512 rows here) back to two panels.
        for (n, p) in [(1500usize, 64usize), (1300, 65), (900, 257), (1100, 128)] {
            let rows = scores(n, p);
            let ones = vec![1.0f64; n];
            let mut one_off = ones.clone();
            one_off[600] = 0.75;
            for weights in [ones, one_off] {
                assert_every_chain(&rows, &weights, n, p);
            }
        }
    }

    /// `n` rows of `p` scores padded to the kernel's width, distinct values with zeros in
    /// the padding.
    fn scores(n: usize, p: usize) -> Vec<f64> {
        let w = p.div_ceil(4) * 4;
        (0..n * w)
            .map(|k| match k % w < p {
                true => ((k * 7919) % 1013) as f64 / 97.0 - 5.0 + 1e-9 * k as f64,
                false => 0.0,
            })
            .collect()
    }

    /// Every entry of the triangle the kernel writes for `rows` and `weights` is the one
    /// fused chain over the rows in order, on pools of 1, 2 and 3 threads at every level.
    fn assert_every_chain(rows: &[f64], weights: &[f64], n: usize, p: usize) {
        let w = p.div_ceil(4) * 4;
        let mut want = Vec::new();
        for i in 0..w {
            for j in i..w {
                want.push(chain(rows, weights, w, (i, j), true).to_bits());
            }
        }
        let host = Triangle {
            width: w,
            fma: FmaMode::Fused,
        };
        for threads in [1, 2, 3] {
            let pool = crate::host::HostPool::new(threads).unwrap();
            for level in [Level::Portable, Level::Avx2, Level::Avx512] {
                let mut out = vec![0.0f32; 2 * triangle(w)];
                let inputs = [f64_words(rows), f64_words(weights)];
                pool.run_with(|| host.run_at(level, &inputs, 0..n, &mut out));
                let got: Vec<u64> =
                    (0..triangle(w)).map(|k| read_f64(&out, k).to_bits()).collect();
                assert_eq!(got, want, "n {n}, P {p}, {threads} threads, {level:?}");
            }
        }
    }

    #[test]
    fn chunks_outweigh_their_triangles() {
        // W = 256: a triangle of 32,896 values against 257 a row: 16-fold at 2,048 rows.
        assert_eq!(kernel(256, 256).min_chunk_items, Some(2048));
        // Never past the loop budget's bound.
        assert_eq!(kernel(4096, 4096).min_chunk_items, Some(CHUNK_ROWS));
    }

    #[test]
    fn reduce_sums_chunks_in_order_and_mirrors() {
        // W = 4, P = 3: two chunks whose triangle entry k holds k and 10 k.
        let (p, w) = (3, 4);
        let mut values: Vec<f64> = (0..triangle(w)).map(|k| k as f64).collect();
        values.extend((0..triangle(w)).map(|k| 10.0 * k as f64));
        let m = reduce(p, w, f64_words(&values)).unwrap();
        for i in 0..p {
            for j in 0..p {
                let (a, b) = (i.min(j), i.max(j));
                let k = row_offset(a, w) + b - a;
                assert_eq!(m[i * p + j], 11.0 * k as f64, "({i}, {j})");
            }
        }
    }

    #[test]
    fn source_names_the_scalar_type() {
        assert!(source(Dtype::F64).contains("array<f64>"));
        assert!(source(Dtype::F32).contains("array<f32>"));
        // The last row of the packed triangle is its last value.
        assert_eq!(row_offset(7, 8), triangle(8) - 1);
    }
}
