//! Host twins of the row-item tropical kernels: the resident product (`matmul_rows`) and
//! the row statistics of the resident checks (`row_stats`). The product runs each run of
//! consecutive rows of one batch through [`product_rows`], the code of the numpy path's
//! host product (its `b` packed once per call), so the bits are that path's (tropical products are exact in any order;
//! see `tropical::host`). Neither has an `fma`, so both ignore the device's fma mode.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::host::product_rows_cached;
use super::host_drive::RowOperands;
use super::shape::batch_runs;
use super::host_pack::PackCache;
use super::semiring::Semiring;
use super::shape::ProductShape;
use crate::kernel::FmaMode;
use crate::kernel::HostImpl;

/// The host twin of `kernels::rows`: items are rows of `a` (k words) with their batch index
/// (u32 bits) in `item_batch`; `b` holds every batch's (k × cols) operand.
#[derive(Debug, Clone)]
pub struct RowProduct {
    /// The semiring.
    pub semiring: Semiring,
    /// The shapes (`accumulate` is false).
    pub shape: ProductShape,
    /// Each batch's `b`, packed once for all the chunks of the call.
    packed: Arc<PackCache<f32>>,
}

impl RowProduct {
    /// The row product of `semiring` on `shape`.
    pub fn new(semiring: Semiring, shape: ProductShape) -> RowProduct {
        let packed = Arc::default();
        RowProduct {
            semiring,
            shape,
            packed,
        }
    }
}

/// The host twin of `kernels::row_stats`: per row of `k` words, the first NaN column and
/// the largest finite magnitude.
#[derive(Debug, Clone, Copy)]
pub struct RowStats {
    /// Words per row.
    pub k: usize,
}

impl HostImpl for RowProduct {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let ProductShape {
            k, cols, batches, ..
        } = self.shape;
        let (a, item_batch, b) = (inputs[0], inputs[1], inputs[2]);
        for (Range { start: q, end }, batch) in batch_runs(item_batch, range.clone(), batches) {
            let out = (q - range.start) * cols..(end - range.start) * cols;
            let operands = RowOperands {
                a: &a[q * k..end * k],
                b: &b[batch * k * cols..(batch + 1) * k * cols],
                c: None,
                k,
                cols,
            };
            product_rows_cached(self.semiring, &operands, &self.packed, &mut output[out]);
        }
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(self.clone())
    }
}

impl HostImpl for RowStats {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let k = self.k;
        let a = &inputs[0][range.start * k..range.end * k];
        output
            .par_chunks_mut(2)
            .zip(a.par_chunks(k.max(1)))
            .for_each(|(out, row)| {
                let first = row.iter().position(|v| v.is_nan());
                // Bit patterns order finite magnitudes exactly, as the shader compares them.
                let top = row
                    .iter()
                    .map(|v| v.to_bits() & 0x7fff_ffff)
                    .filter(|&bits| bits < 0x7f80_0000)
                    .max()
                    .unwrap_or(0);
                out[0] = first.map_or(-1.0, |j| j as f32);
                out[1] = f32::from_bits(top);
            });
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_stats_find_the_first_nan_and_the_largest_finite_magnitude() {
        let a = [
            1.0,
            f32::NAN,
            -7.0,
            f32::NAN,
            f32::NEG_INFINITY,
            -3.0,
            2.0,
            f32::INFINITY,
        ];
        let mut out = [0.0; 4];
        RowStats { k: 4 }.run(&[&a], 0..2, &mut out);
        assert_eq!(out, [1.0, 7.0, -1.0, 3.0]);
    }

    #[test]
    fn the_row_product_takes_each_row_with_its_own_batch() {
        // Two batches of 1 × 1 right operands; rows 0, 1 in batch 0, row 2 in batch 1.
        let a = [1.0, 2.0, 3.0];
        let item_batch = [0, 0, 1].map(f32::from_bits);
        let b = [10.0, 20.0];
        let shape = ProductShape {
            k: 1,
            cols: 1,
            b_words: 2,
            batches: 2,
            accumulate: false,
            dtype: crate::dtype::Dtype::F32,
        };
        let product = RowProduct::new(Semiring::MaxPlus, shape);
        let mut out = [0.0; 2];
        product.run(&[&a, &item_batch, &b, &[0.0]], 1..3, &mut out);
        assert_eq!(out, [12.0, 23.0]);
    }
}
