//! Host twins of the row-item tropical kernels: the resident product (`matmul_rows`) and
//! the row statistics of the resident checks (`row_stats`). The product runs each run of
//! consecutive rows of one batch through [`product_rows`], the code of the numpy path's
//! host product (its `b` packed once per call), so the bits are that path's (tropical products are exact in any order;
//! see `tropical::host`). Neither has an `fma`, so both ignore the device's fma mode.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::host::product_rows_cached;
use super::host_drive::{product_rows_at, splits, RowOperands};
use super::host_kernel::Lanes;
use crate::host::simd::Level;
use super::shape::batch_runs;
use super::host_pack::PackCache;
use super::semiring::Semiring;
use super::shape::ProductShape;
use crate::dtype::Dtype;
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

/// The host twin of `kernels::row_stats`: per row of `k` values of `dtype`, the first NaN
/// column and the largest finite magnitude, in the words the shader writes.
#[derive(Debug, Clone, Copy)]
pub struct RowStats {
    /// Values per row.
    pub k: usize,
    /// Their dtype (float32 or float64).
    pub dtype: Dtype,
}

impl RowStats {
    /// Words per value.
    pub fn words(&self) -> usize {
        self.dtype.bytes().div_ceil(4)
    }
}

impl HostImpl for RowProduct {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        // float32 packs `b` once per call; a float64 call's values may be a copy of its
        // words, whose address names nothing, so each chunk packs its own.
        match self.shape.dtype {
            Dtype::F64 => rows_in::<f64>(self, None, inputs, range, output),
            Dtype::F16 | Dtype::F32 => rows_in(self, Some(&self.packed), inputs, range, output),
        }
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(self.clone())
    }

    /// Items are rows; the threads share a product past its split size.
    fn splits(&self, items: usize) -> bool {
        splits(items, self.shape.k, self.shape.cols)
    }
}

/// `product`'s rows `range` on the words of values of type `T` (`b` packed in `cache` when
/// given): each run of rows of one batch through the numpy path's host product.
fn rows_in<T: Lanes>(
    product: &RowProduct,
    cache: Option<&PackCache<T>>,
    inputs: &[&[f32]],
    range: Range<usize>,
    output: &mut [f32],
) {
    let ProductShape {
        k, cols, batches, ..
    } = product.shape;
    let (a, item_batch, b) = (T::values(inputs[0]), inputs[1], T::values(inputs[2]));
    T::with_values_mut(output, |output| {
        for (Range { start: q, end }, batch) in batch_runs(item_batch, range.clone(), batches) {
            let operands = RowOperands {
                a: &a[q * k..end * k],
                b: &b[batch * k * cols..(batch + 1) * k * cols],
                c: None,
                k,
                cols,
            };
            let out = &mut output[(q - range.start) * cols..(end - range.start) * cols];
            match cache {
                Some(cache) => product_rows_cached(product.semiring, &operands, cache, out),
                None => product_rows_at(Level::detect(), product.semiring, &operands, None, out),
            }
        }
    });
}

impl HostImpl for RowStats {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let width = self.k * self.words();
        let a = &inputs[0][range.start * width..range.end * width];
        if self.dtype == Dtype::F64 {
            return output
                .par_chunks_mut(3)
                .zip(a.par_chunks(width.max(1)))
                .for_each(|(out, row)| stats64(row, out));
        }
        output
            .par_chunks_mut(2)
            .zip(a.par_chunks(width.max(1)))
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

    /// A task a row.
    fn splits(&self, items: usize) -> bool {
        items > 1
    }
}

/// `row_stats64` of one row of float64 words into its three words: the first NaN column
/// plus one (0 without one), the largest finite magnitude's low and high words.
fn stats64(row: &[f32], out: &mut [f32]) {
    let values = row.chunks_exact(2).map(|w| {
        let bits = u64::from(w[0].to_bits()) | (u64::from(w[1].to_bits()) << 32);
        bits & 0x7fff_ffff_ffff_ffff
    });
    let first = values.clone().position(|m| m > 0x7ff0_0000_0000_0000);
    let top = values
        .filter(|&m| m < 0x7ff0_0000_0000_0000)
        .max()
        .unwrap_or(0);
    out[0] = f32::from_bits(first.map_or(0, |j| j as u32 + 1));
    out[1] = f32::from_bits(top as u32);
    out[2] = f32::from_bits((top >> 32) as u32);
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
        let stats = RowStats {
            k: 4,
            dtype: Dtype::F32,
        };
        stats.run(&[&a], 0..2, &mut out);
        assert_eq!(out, [1.0, 7.0, -1.0, 3.0]);
    }

    #[test]
    fn float64_row_stats_are_the_shaders_words() {
        let rows = [1.5, f64::NAN, -7.25, f64::NEG_INFINITY, -3.0, f64::INFINITY];
        let words = crate::dtype::f64_words(&rows);
        let mut out = [0.0f32; 6];
        let stats = RowStats {
            k: 3,
            dtype: Dtype::F64,
        };
        stats.run(&[words], 0..2, &mut out);
        let bits: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
        let top = |v: f64| [v.to_bits() as u32, (v.to_bits() >> 32) as u32];
        assert_eq!(bits[0], 2, "the NaN is in column 1");
        assert_eq!(bits[1..3], top(7.25));
        assert_eq!(bits[3], 0, "no NaN");
        assert_eq!(bits[4..6], top(3.0));
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
