//! The map kernels of the information-geometry family on the host: the categorical Fisher
//! `diag(p) − p pᵀ` (`categorical_outer`), the diagonal Gaussian's (`gaussian_diag`), and
//! the softmax of logits that `fisher_categorical(logits=...)` takes before them.
//!
//! `categorical_outer` and `gaussian_diag` are one `fma` (rounded as the devices round it,
//! [`FmaMode`]) and IEEE divisions: bit-identical wherever division is correctly rounded
//! (Mesa's CPU drivers; hardware GPUs may approximate division, which WGSL allows).
//!
//! The softmax is not a twin of the shader's `softmax_rows`: that calls WGSL `exp`, which
//! every driver implements with its own approximation (WGSL only bounds its error), so no
//! host code reproduces every device, and chunks of one call computed on different devices
//! would differ in their last bits. Instead the softmax of every call is computed here, once,
//! before the outer products are cut into chunks, whatever devices the context holds:
//! [`softmax_rows`] works in float64 (maximum subtracted first, exponentials and their sum in
//! column order, one division) and rounds each probability once to the call's dtype. Every
//! device then reads the same probabilities, so the result is the same bits for any device mix.
//!
//! Each kernel is written once over [`Value`] (float32 or float64, read from and written to the
//! engine's words): float32 reads its words as it always did, so its bits are unchanged.

use std::fmt::Display;
use std::ops::{Div, Range};
use std::sync::Arc;

use crate::dtype::Dtype;
use crate::host::arith::Real;
use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

/// Items per rayon task.
const GRAIN: usize = 256;

/// A float type the family's maps compute in, float32 or float64: its values ride on the
/// engine's words as `Real` reads and writes them.
pub trait Value:
    Real + Div<Output = Self> + PartialOrd + Display + Default + From<f32> + Into<f64> + bytemuck::Pod
{
    /// The dtype of the kernels that compute in it.
    const DTYPE: Dtype;
    /// `v` rounded to this type.
    fn from_f64(v: f64) -> Self;
}

impl Value for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

impl Value for f64 {
    const DTYPE: Dtype = Dtype::F64;
    fn from_f64(v: f64) -> f64 {
        v
    }
}

/// A per-sample map kernel of the family, in `dtype` (float32 or float64).
#[derive(Debug, Clone, Copy)]
pub enum FisherMap {
    /// Rows of k logits to probabilities ([`softmax_rows`]; not a twin of the shader's).
    Softmax {
        /// Categories.
        k: usize,
        /// What the values are.
        dtype: Dtype,
    },
    /// `categorical_outer_kernel(k)`: rows of k probabilities to k × k matrices.
    CategoricalOuter {
        /// Categories.
        k: usize,
        /// How the devices round `fma`.
        fma: FmaMode,
        /// What the values are.
        dtype: Dtype,
    },
    /// `gaussian_diag_kernel(d)`: rows of d variances to 2d × 2d matrices.
    GaussianDiag {
        /// Dimensions.
        d: usize,
        /// What the values are.
        dtype: Dtype,
    },
}

/// The softmax of one row of logits (words of `T`) in float64 (max subtracted first, the sum
/// in column order), each probability rounded once to `T`.
fn softmax<T: Value>(x: &[f32], out: &mut [f32]) {
    let k = x.len() / T::WORDS;
    let at = |c: usize| -> f64 { T::read(x, c).into() };
    let top = (1..k).fold(at(0), |m, c| m.max(at(c)));
    // For float32 logits x - top is exact in float64 (both are float32); its exp is in
    // (0, 1]. The exponentials are taken twice (for the sum, then for each quotient) rather
    // than kept: the same call on the same value gives the same bits, and no buffer is needed.
    let total: f64 = (0..k).map(|c| (at(c) - top).exp()).sum();
    for c in 0..k {
        T::write(out, c, T::from_f64((at(c) - top).exp() / total));
    }
}

/// Rows of `k` logits to probabilities (see the module header), on the current rayon pool.
pub fn softmax_rows<T: Value>(logits: &[T], k: usize, probs: &mut [T]) {
    let map = FisherMap::Softmax { k, dtype: T::DTYPE };
    let rows = logits.len() / k.max(1);
    map.run(
        &[bytemuck::cast_slice(logits)],
        0..rows,
        bytemuck::cast_slice_mut(probs),
    );
}

fn outer<T: Value, const F: bool>(p: &[f32], out: &mut [f32]) {
    let k = p.len() / T::WORDS;
    for r in 0..k {
        let pr = T::read(p, r);
        for c in 0..k {
            let diagonal = if r == c { pr } else { T::ZERO };
            T::write(out, r * k + c, T::madd::<F>(-pr, T::read(p, c), diagonal));
        }
    }
}

fn gaussian<T: Value>(var: &[f32], out: &mut [f32]) {
    let d = var.len() / T::WORDS;
    let edge = 2 * d;
    // All-zero words are +0.0 in either dtype.
    out.fill(0.0);
    let (one, half) = (T::from(1.0), T::from(0.5));
    for r in 0..edge {
        let v = T::read(var, r % d);
        let value = if r < d { one / v } else { (half / v) / v };
        T::write(out, r * edge + r, value);
    }
}

impl FisherMap {
    /// The dtype of its values.
    pub fn dtype(&self) -> Dtype {
        match *self {
            FisherMap::Softmax { dtype, .. }
            | FisherMap::CategoricalOuter { dtype, .. }
            | FisherMap::GaussianDiag { dtype, .. } => dtype,
        }
    }

    /// Words per item of the input and of the output.
    pub fn words(&self) -> (usize, usize) {
        let (input, output) = match *self {
            FisherMap::Softmax { k, .. } => (k, k),
            FisherMap::CategoricalOuter { k, .. } => (k, k * k),
            FisherMap::GaussianDiag { d, .. } => (d, 4 * d * d),
        };
        let dtype = self.dtype();
        (dtype.words_of(input), dtype.words_of(output))
    }

    /// [`HostImpl::run`] in `T`, the map's dtype.
    fn run_in<T: Value>(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let (wi, wo) = self.words();
        assert_eq!(output.len(), range.len() * wo, "output of the chunk");
        let input = &inputs[0][range.start * wi..range.end * wi];
        output
            .par_chunks_mut(GRAIN * wo)
            .zip(input.par_chunks(GRAIN * wi))
            .for_each(|(out, x)| {
                for (o, x) in out.chunks_exact_mut(wo).zip(x.chunks_exact(wi)) {
                    match *self {
                        FisherMap::Softmax { .. } => softmax::<T>(x, o),
                        FisherMap::CategoricalOuter {
                            fma: FmaMode::Fused,
                            ..
                        } => outer::<T, true>(x, o),
                        FisherMap::CategoricalOuter { .. } => outer::<T, false>(x, o),
                        FisherMap::GaussianDiag { .. } => gaussian::<T>(x, o),
                    }
                }
            });
    }
}

impl HostImpl for FisherMap {
    /// Runs items `range` of the one per-item input into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        match self.dtype() {
            Dtype::F64 => self.run_in::<f64>(inputs, range, output),
            // The builders make float32 and float64 maps only.
            Dtype::F32 | Dtype::F16 => self.run_in::<f32>(inputs, range, output),
        }
    }

    /// The categorical outer product rounds its `fma` as `mode` says; the others have none.
    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(match *self {
            FisherMap::CategoricalOuter { k, dtype, .. } => FisherMap::CategoricalOuter {
                k,
                fma: mode,
                dtype,
            },
            other => other,
        })
    }

    fn splits(&self, items: usize) -> bool {
        items > GRAIN
    }
}
