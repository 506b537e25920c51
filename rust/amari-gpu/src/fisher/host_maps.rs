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
//! column order, one division) and rounds each probability once to float32. Every device then
//! reads the same probabilities, so the result is the same bits for any device mix.

use std::ops::Range;
use std::sync::Arc;

use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

use crate::host::arith::madd;

/// Items per rayon task.
const GRAIN: usize = 256;

/// A per-sample map kernel of the family.
#[derive(Debug, Clone, Copy)]
pub enum FisherMap {
    /// Rows of k logits to probabilities ([`softmax_rows`]; not a twin of the shader's).
    Softmax {
        /// Categories.
        k: usize,
    },
    /// `categorical_outer_kernel(k)`: rows of k probabilities to k × k matrices.
    CategoricalOuter {
        /// Categories.
        k: usize,
        /// How the devices round `fma`.
        fma: FmaMode,
    },
    /// `gaussian_diag_kernel(d)`: rows of d variances to 2d × 2d matrices.
    GaussianDiag {
        /// Dimensions.
        d: usize,
    },
}

/// The softmax of one row of logits in float64 (max subtracted first, the sum in column
/// order), each probability rounded once to float32.
fn softmax(x: &[f32], out: &mut [f32]) {
    let top = f64::from(x.iter().skip(1).fold(x[0], |m, &v| m.max(v)));
    // x - top is exact in float64 (both are float32); its exp is in (0, 1]. The
    // exponentials are taken twice (for the sum, then for each quotient) rather than kept:
    // the same call on the same value gives the same bits, and no buffer is needed.
    let total: f64 = x.iter().map(|&v| (f64::from(v) - top).exp()).sum();
    for (o, &v) in out.iter_mut().zip(x) {
        *o = ((f64::from(v) - top).exp() / total) as f32;
    }
}

/// Rows of `k` logits to probabilities (see the module header), on the current rayon pool.
pub fn softmax_rows(logits: &[f32], k: usize, probs: &mut [f32]) {
    FisherMap::Softmax { k }.run(&[logits], 0..logits.len() / k.max(1), probs);
}

fn outer<const F: bool>(p: &[f32], out: &mut [f32]) {
    let k = p.len();
    for (r, row) in out.chunks_exact_mut(k).enumerate() {
        for (c, o) in row.iter_mut().enumerate() {
            *o = madd::<F>(-p[r], p[c], if r == c { p[r] } else { 0.0 });
        }
    }
}

fn gaussian(var: &[f32], out: &mut [f32]) {
    let d = var.len();
    let edge = 2 * d;
    out.fill(0.0);
    for r in 0..edge {
        let v = var[r % d];
        out[r * edge + r] = if r < d { 1.0 / v } else { (0.5 / v) / v };
    }
}

impl FisherMap {
    /// Words per item of the input and of the output.
    pub fn words(&self) -> (usize, usize) {
        match *self {
            FisherMap::Softmax { k } => (k, k),
            FisherMap::CategoricalOuter { k, .. } => (k, k * k),
            FisherMap::GaussianDiag { d } => (d, 4 * d * d),
        }
    }
}

impl HostImpl for FisherMap {
    /// Runs items `range` of the one per-item input into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let (wi, wo) = self.words();
        assert_eq!(output.len(), range.len() * wo, "output of the chunk");
        let input = &inputs[0][range.start * wi..range.end * wi];
        output
            .par_chunks_mut(GRAIN * wo)
            .zip(input.par_chunks(GRAIN * wi))
            .for_each(|(out, x)| {
                for (o, x) in out.chunks_exact_mut(wo).zip(x.chunks_exact(wi)) {
                    match *self {
                        FisherMap::Softmax { .. } => softmax(x, o),
                        FisherMap::CategoricalOuter {
                            fma: FmaMode::Fused,
                            ..
                        } => outer::<true>(x, o),
                        FisherMap::CategoricalOuter { .. } => outer::<false>(x, o),
                        FisherMap::GaussianDiag { .. } => gaussian(x, o),
                    }
                }
            });
    }

    /// The categorical outer product rounds its `fma` as `mode` says; the others have none.
    fn with_fma(&self, mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(match *self {
            FisherMap::CategoricalOuter { k, .. } => FisherMap::CategoricalOuter { k, fma: mode },
            other => other,
        })
    }
}
