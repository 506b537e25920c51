//! Tropical kernels on the host, as `shaders/tropical.wgsl` computes them: every output is
//! `sign · max_k (sign·a[r,k] + sign·b[k,j])` with the accumulator starting at −inf and
//! taking a term only when it is greater (`select(acc, s, s > acc)`), k in order, then
//! combined with `sign · c` the same way when accumulating. A NaN term (−inf + inf) is never
//! taken, which is the tropical zero's absorbing rule; ties keep the earlier value, so even
//! the sign of a zero result is the device's. All of it is exact (one rounding per sum,
//! comparisons and negations exact), so the host and every device agree bit for bit
//! whatever their `fma`. The product is the packed micro-kernel of the CPU's SIMD level
//! (`host_kernel`, `host_pack`): a tile of rows × columns of accumulators in registers, each
//! walked over k in order, so the grouping never changes which term a tie keeps. One body
//! serves float32 and float64 (`Lanes`); a float64 call's words are read as values.

use std::ops::Range;
use std::sync::Arc;

use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

use super::host_kernel::{Kernel, Lanes};
use super::host_pack::{mx, pack_a, pack_b, signed, store_tile, PackCache, Place};
use super::scalar::Scalar;
use super::semiring::Semiring;
use super::shape::{batch_of, batch_runs, ProductShape, BLOCK_ROWS, MATVEC_PASS_K};
use crate::dtype::Dtype;
use crate::host::simd::Level;

/// The host twin of `kernels::tiled` (and of `kernels::naive` for max-plus): a product over
/// items of [`BLOCK_ROWS`] rows of one batch, inputs bound as the WGSL kernel binds them.
#[derive(Debug, Clone)]
pub struct TropicalProduct {
    /// The semiring.
    pub semiring: Semiring,
    /// The shapes.
    pub shape: ProductShape,
    /// Each batch's `b`, packed once for all the chunks of the call (float32; a float64
    /// call's values may be a copy of its words, whose address names nothing).
    packed: Arc<PackCache<f32>>,
}

impl TropicalProduct {
    /// The product of `semiring` on `shape`.
    pub fn new(semiring: Semiring, shape: ProductShape) -> TropicalProduct {
        let packed = Arc::default();
        TropicalProduct {
            semiring,
            shape,
            packed,
        }
    }
}

/// The host twin of `kernels::matvec`: one row per item, 64 lane partials combined in the
/// shader's tree.
#[derive(Debug, Clone, Copy)]
pub struct TropicalMatvec {
    /// The semiring.
    pub semiring: Semiring,
    /// The shapes (`cols` is 1).
    pub shape: ProductShape,
}

/// Rows of a product on the current rayon pool: `a` (rows × k), `b` (k × cols), `c` and
/// `out` (rows × cols), in float32 or float64. Shared by the chunk kernel, the resident row
/// product and the host's shortest paths.
pub fn product_rows<T: Lanes>(
    semiring: Semiring,
    a: &[T],
    b: &[T],
    c: Option<&[T]>,
    k: usize,
    cols: usize,
    out: &mut [T],
) {
    let operands = RowOperands { a, b, c, k, cols };
    product_rows_at(Level::detect(), semiring, &operands, None, out);
}

/// [`product_rows`] with `b` packed once in `cache` for every chunk of a call.
pub(super) fn product_rows_cached<T: Lanes>(
    semiring: Semiring,
    operands: &RowOperands<'_, T>,
    cache: &PackCache<T>,
    out: &mut [T],
) {
    product_rows_at(Level::detect(), semiring, operands, Some(cache), out);
}

/// The operands of [`product_rows`].
#[derive(Clone, Copy)]
pub(super) struct RowOperands<'a, T> {
    /// Rows × k.
    pub a: &'a [T],
    /// K × cols.
    pub b: &'a [T],
    /// Rows × cols, combined with the product when given.
    pub c: Option<&'a [T]>,
    pub k: usize,
    pub cols: usize,
}

/// Inner indices of one k block: a strip's block (128 × 32 float32 or 128 × 16 float64
/// values, 16 KiB) stays in L1.
const K_BLOCK: usize = 128;

/// Left-operand bytes one task packs: its panels stay in L2 beside the strip they meet.
const TASK_PANEL_BYTES: usize = 192 << 10;

/// Pairs (rows × k × cols) below which a product runs as one task.
const SPLIT_PAIRS: usize = 1 << 15;

/// Rows of each task of a product of `rows` rows (inner size `k`) on `threads` threads:
/// at most [`TASK_PANEL_BYTES`] of panels, in a number of equal shares that is a multiple
/// of the threads, each share whole tile quanta, so that the threads finish together and
/// the last panel of a share computes as few padded rows as the kernel allows (a chunk of
/// 64 rows on 2 threads at AVX-512: two shares of 12 + 12 + 8 rows, none padded).
fn task_rows<T: Lanes>(kernel: &Kernel<T>, rows: usize, k: usize, cols: usize, threads: usize) -> usize {
    // A small product is one task: waking a second thread costs more than its pairs.
    let threads = if rows * k * cols < SPLIT_PAIRS { 1 } else { threads };
    let bytes = kernel.mr * k.max(1) * std::mem::size_of::<T>();
    let by_cache = (TASK_PANEL_BYTES / bytes).max(1) * kernel.mr;
    let shares = rows.div_ceil(by_cache).next_multiple_of(threads.max(1));
    rows.div_ceil(shares).next_multiple_of(kernel.quantum)
}

/// The heights of the tiles that cover `rows` rows: full tiles, then one tile of the
/// shortest height that holds the rest.
fn heights<T: Lanes>(kernel: &Kernel<T>, rows: usize) -> impl Iterator<Item = usize> + '_ {
    (0..rows.div_ceil(kernel.mr)).map(move |p| kernel.height(rows - p * kernel.mr))
}

/// [`product_rows`] with the micro-kernel of `level` (which the CPU must have). `b` is
/// packed once into strips; each task packs a few panels of rows of `a`, then walks the
/// strips, each strip over all its panels while it is in cache.
pub(super) fn product_rows_at<T: Lanes>(
    level: Level,
    semiring: Semiring,
    operands: &RowOperands<'_, T>,
    cache: Option<&PackCache<T>>,
    out: &mut [T],
) {
    let RowOperands { a, b, c, k, cols } = *operands;
    if cols == 0 || out.is_empty() {
        return;
    }
    let kernel = Kernel::<T>::at(level);
    let (mr, nr) = (kernel.mr, kernel.nr);
    let min = semiring == Semiring::MinPlus;
    let pack = || pack_b(b, k, cols, nr, min);
    let strips = match cache {
        Some(cache) => cache.get(b, pack),
        None => Arc::new(pack()),
    };
    let rows = out.len() / cols;
    let task_rows = task_rows(&kernel, rows, k, cols, rayon::current_num_threads());
    out.par_chunks_mut(task_rows * cols)
        .enumerate()
        .for_each(|(t, out)| {
            let r0 = t * task_rows;
            let rows = out.len() / cols;
            let c = c.map(|c| &c[r0 * cols..(r0 + rows) * cols]);
            // Panel p starts at row p·mr and word p·mr·k; the last may be shorter.
            let panels = rows.div_ceil(mr);
            let mut packed = vec![T::ZERO; panels * mr * k];
            for (p, height) in heights(&kernel, rows).enumerate() {
                let (first, last) = (r0 + p * mr, (r0 + (p + 1) * mr).min(r0 + rows));
                let panel = &mut packed[p * mr * k..][..height * k];
                pack_a(&a[first * k..last * k], k, height, min, panel);
            }
            // Each strip meets every panel one k block at a time: the strip's block stays
            // in L1 while the panels' blocks come from L2. The tiles carry their
            // accumulators from block to block, so each output is still one walk over k.
            let mut acc = vec![T::ZERO; panels * mr * nr];
            for s in 0..cols.div_ceil(nr) {
                let (col, strip) = (s * nr, &strips[s * k * nr..(s + 1) * k * nr]);
                acc.fill(T::NEG_INFINITY);
                for k0 in (0..k).step_by(K_BLOCK) {
                    let k1 = (k0 + K_BLOCK).min(k);
                    for (p, height) in heights(&kernel, rows).enumerate() {
                        let panel = &packed[p * mr * k..][..height * k];
                        let tile = &mut acc[p * mr * nr..][..height * nr];
                        let block = &strip[k0 * nr..k1 * nr];
                        kernel.tile(height, &panel[k0 * height..k1 * height], block, tile);
                    }
                }
                for p in 0..panels {
                    let place = Place {
                        row: p * mr,
                        col,
                        rows: mr.min(rows - p * mr),
                        cols: nr.min(cols - col),
                    };
                    store_tile(&acc[p * mr * nr..], nr, &place, c, cols, min, out);
                }
            }
        });
}

impl HostImpl for TropicalProduct {
    /// Runs items `range` (inputs: a blocks, item_batch, b, c) into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        match self.shape.dtype {
            Dtype::F64 => self.run_as::<f64>(inputs, range, output, None),
            _ => self.run_as::<f32>(inputs, range, output, Some(&self.packed)),
        }
    }

    /// Additions and comparisons only: unchanged (and the packed operands shared).
    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(self.clone())
    }
}

impl TropicalProduct {
    /// [`HostImpl::run`] on the words of values of type `T`, `b` packed once in `cache`
    /// when given.
    fn run_as<T: Lanes>(
        &self,
        inputs: &[&[f32]],
        range: Range<usize>,
        output: &mut [f32],
        cache: Option<&PackCache<T>>,
    ) {
        let ProductShape {
            k,
            cols,
            batches,
            accumulate,
            ..
        } = self.shape;
        let item_words = BLOCK_ROWS * cols * std::mem::size_of::<T>() / 4;
        assert_eq!(
            output.len(),
            range.len() * item_words,
            "output of the chunk"
        );
        let (a, item_batch) = (T::values(inputs[0]), inputs[1]);
        let (b, c) = (T::values(inputs[2]), T::values(inputs[3]));
        T::with_values_mut(output, |output| {
            // Consecutive items of one batch run as one product.
            for (Range { start: q, end }, batch) in batch_runs(item_batch, range.clone(), batches) {
                let rows = (q - range.start) * BLOCK_ROWS..(end - range.start) * BLOCK_ROWS;
                let at = q * BLOCK_ROWS;
                let n = (end - q) * BLOCK_ROWS;
                let operands = RowOperands {
                    a: &a[at * k..(at + n) * k],
                    b: &b[batch * k * cols..(batch + 1) * k * cols],
                    c: accumulate.then(|| &c[at * cols..(at + n) * cols]),
                    k,
                    cols,
                };
                let out = &mut output[rows.start * cols..rows.end * cols];
                product_rows_at(Level::detect(), self.semiring, &operands, cache, out);
            }
        });
    }
}

impl HostImpl for TropicalMatvec {
    /// Runs rows `range` (inputs: a rows, row_batch, x, placeholder) into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        if self.shape.dtype == Dtype::F64 {
            let (a, x) = (f64::values(inputs[0]), f64::values(inputs[2]));
            return f64::with_values_mut(output, |out| self.rows(&a, inputs[1], &x, range, out));
        }
        self.rows(inputs[0], inputs[1], inputs[2], range, output);
    }

    /// Additions and comparisons only: unchanged.
    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}

impl TropicalMatvec {
    /// Rows `range` of `a` (k values each, batch indices in `row_batch`) by `x` into `out`.
    fn rows<T: Scalar>(
        &self,
        a: &[T],
        row_batch: &[f32],
        x: &[T],
        range: Range<usize>,
        output: &mut [T],
    ) {
        let ProductShape { k, batches, .. } = self.shape;
        let sign = |v: T| signed(self.semiring == Semiring::MinPlus, v);
        output.par_chunks_mut(256).enumerate().for_each(|(t, out)| {
            for (i, o) in out.iter_mut().enumerate() {
                let row = range.start + t * 256 + i;
                let batch = batch_of(row_batch[row], batches);
                let (a, x) = (&a[row * k..(row + 1) * k], &x[batch * k..(batch + 1) * k]);
                // The shader's passes: each folds its 64 lanes in a tree, then into what
                // the pass before left (that first).
                let mut acc = T::NEG_INFINITY;
                let passes = a.chunks(MATVEC_PASS_K).zip(x.chunks(MATVEC_PASS_K));
                for (pass, (ap, xp)) in passes.enumerate() {
                    let mut lanes = [T::NEG_INFINITY; 64];
                    for (ak, xk) in ap.chunks(64).zip(xp.chunks(64)) {
                        for l in 0..ak.len() {
                            lanes[l] = mx(lanes[l], sign(ak[l] + xk[l]));
                        }
                    }
                    let mut width = 32;
                    while width > 0 {
                        for l in 0..width {
                            lanes[l] = mx(lanes[l], lanes[l + width]);
                        }
                        width /= 2;
                    }
                    acc = if pass == 0 {
                        lanes[0]
                    } else {
                        mx(acc, lanes[0])
                    };
                }
                *o = sign(acc);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shader's rule, one output at a time, k in order.
    fn reference<T: Scalar>(semiring: Semiring, ops: &RowOperands<'_, T>, rows: usize) -> Vec<T> {
        let s = |x: T| if semiring == Semiring::MinPlus { -x } else { x };
        let mut out = vec![T::ZERO; rows * ops.cols];
        for r in 0..rows {
            for j in 0..ops.cols {
                let mut acc = T::NEG_INFINITY;
                for kk in 0..ops.k {
                    acc = mx(acc, s(ops.a[r * ops.k + kk]) + s(ops.b[kk * ops.cols + j]));
                }
                if let Some(c) = ops.c {
                    acc = mx(s(c[r * ops.cols + j]), acc);
                }
                out[r * ops.cols + j] = s(acc);
            }
        }
        out
    }

    /// Values with every edge: ±inf, ±0 and small integers (so many sums tie).
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let pool = [f32::NEG_INFINITY, f32::INFINITY, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5];
        (0..n as u32)
            .map(|i| {
                let h = (i ^ seed).wrapping_mul(2_654_435_761).rotate_left(13);
                pool[(h % pool.len() as u32) as usize]
            })
            .collect()
    }

    #[test]
    fn a_chunk_of_64_rows_is_shared_equally_with_no_padded_rows() {
        // Each share's tiles hold exactly its rows: 12 + 12 + 8 at AVX-512, five of 6 and
        // one of 2 at AVX2, eight of 4 otherwise (a single 12-row height padded 64 rows to
        // 72, and one thread's share to 36).
        for level in Level::available() {
            let kernel = Kernel::<f32>::at(level);
            let share = task_rows(&kernel, 64, 1024, 1024, 2);
            assert_eq!(share, 32, "{level:?}");
            let computed: usize = heights(&kernel, share).sum();
            assert_eq!(computed, 32, "{level:?}");
        }
        let avx512 = Kernel::<f32>::at(Level::Avx512);
        assert_eq!(heights(&avx512, 32).collect::<Vec<_>>(), [12, 12, 8]);
        assert_eq!(heights(&avx512, 13).collect::<Vec<_>>(), [12, 4]);
        // Many rows: panels of a few hundred KiB per task, still whole quanta.
        assert_eq!(task_rows(&avx512, 1024, 1024, 1024, 2), 48);
        // A tiny product is one task (a second thread's wake-up would cost more).
        assert!(task_rows(&avx512, 4, 4, 4, 2) >= 4);
        assert_eq!(task_rows(&avx512, 64, 16, 16, 2), 64);
    }

    #[test]
    fn every_level_and_shape_computes_the_shaders_bits() {
        // Rows, k and cols around every tile size (2 to 12 rows; 16, 32 columns) and every
        // tail height, a 64-row chunk, 1 row, k 0.
        let shapes = [
            (1, 1, 1),
            (13, 7, 33),
            (25, 0, 17),
            (6, 300, 16),
            (37, 33, 65),
            (64, 9, 20),
            (5, 3, 40),
            (9, 4, 7),
            (20, 5, 9),
            (3, 2, 5),
        ];
        for level in Level::available() {
            for semiring in Semiring::ALL {
                for (rows, k, cols) in shapes {
                    let a = values(rows * k, 1);
                    let b = values(k * cols, 2);
                    let c = values(rows * cols, 3);
                    let at = format!("{level:?} {semiring:?} {rows}x{k}x{cols}");
                    same_bits(level, semiring, (&a, &b, &c), (k, cols), &at);
                    // The same values in float64 (exact), on the float64 kernels.
                    let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
                    let (a, b, c) = (wide(&a), wide(&b), wide(&c));
                    same_bits(level, semiring, (&a, &b, &c), (k, cols), &format!("{at} f64"));
                }
            }
        }
    }

    /// The product of `a`, `b` (with and without `c`) at `level` against [`reference`].
    fn same_bits<T: Lanes>(
        level: Level,
        semiring: Semiring,
        (a, b, c): (&[T], &[T], &[T]),
        (k, cols): (usize, usize),
        at: &str,
    ) {
        let rows = a.len().checked_div(k).unwrap_or(c.len() / cols);
        for c in [None, Some(c)] {
            let ops = RowOperands { a, b, c, k, cols };
            let mut out = vec![T::INFINITY; rows * cols];
            product_rows_at(level, semiring, &ops, None, &mut out);
            let want = reference(semiring, &ops, rows);
            let bits = |v: &[T]| T::words(v).iter().map(|w| w.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&want), "{at}");
        }
    }
}
