//! Tropical kernels on the host, as `shaders/tropical.wgsl` computes them: every output is
//! `sign · max_k (sign·a[r,k] + sign·b[k,j])` with the accumulator starting at −inf and
//! taking a term only when it is greater (`select(acc, s, s > acc)`), k in order, then
//! combined with `sign · c` the same way when accumulating. A NaN term (−inf + inf) is never
//! taken, which is the tropical zero's absorbing rule; ties keep the earlier value, so even
//! the sign of a zero result is the device's. All of it is exact (one rounding per sum,
//! comparisons and negations exact), so the host and every device agree bit for bit
//! whatever their `fma`. The product is the packed micro-kernel of the CPU's SIMD level
//! (`host_kernel`, `host_pack`; the work cut for the threads by `host_drive`): a tile of
//! rows × columns of accumulators in registers, each walked over k in order, so the
//! grouping never changes which term a tie keeps. One body serves float32 and float64
//! (`Lanes`); a float64 call's words are read as values.

use std::ops::Range;
use std::sync::Arc;

use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

use super::host_drive::{product_rows_at, splits, RowOperands};
use super::host_kernel::Lanes;
use super::host_pack::{mx, signed, PackCache};
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

    /// Items are blocks of rows; the threads share a product past its split size.
    fn splits(&self, items: usize) -> bool {
        let ProductShape { k, cols, .. } = self.shape;
        splits(items.saturating_mul(BLOCK_ROWS), k, cols)
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

    fn splits(&self, items: usize) -> bool {
        items > MATVEC_TASK_ROWS
    }
}

/// Rows of a matrix-vector product per rayon task.
const MATVEC_TASK_ROWS: usize = 256;

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
        output.par_chunks_mut(MATVEC_TASK_ROWS).enumerate().for_each(|(t, out)| {
            for (i, o) in out.iter_mut().enumerate() {
                let row = range.start + t * MATVEC_TASK_ROWS + i;
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

    #[test]
    fn products_cut_for_several_threads_compute_the_shaders_bits() {
        // Products past the split, cut into groups of panels by strips with a short last
        // panel and a narrow last strip (and one row by two strips), on pools of 2 and 3
        // threads, so the units' stores meet in every row.
        let shapes = [(136, 130, 47), (61, 300, 100), (1, 2000, 40)];
        for threads in [2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool of test threads");
            for level in Level::available() {
                for (rows, k, cols) in shapes {
                    let a = values(rows * k, 4);
                    let b = values(k * cols, 5);
                    let c = values(rows * cols, 6);
                    for semiring in Semiring::ALL {
                        let at = format!("{threads} threads {level:?} {semiring:?}");
                        let at = format!("{at} {rows}x{k}x{cols}");
                        pool.install(|| same_bits(level, semiring, (&a, &b, &c), (k, cols), &at));
                    }
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
