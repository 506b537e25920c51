//! The map kernels of the information-geometry family on the host: the categorical Fisher
//! `diag(p) − p pᵀ` (`categorical_outer`), the diagonal Gaussian's (`gaussian_diag`) and the
//! softmax of logits (`softmax_rows`), each as `shaders/fisher.wgsl` writes it.
//!
//! `categorical_outer` and `gaussian_diag` are one `fma` (rounded as the devices round it,
//! [`FmaMode`]) and IEEE divisions: bit-identical wherever division is correctly rounded
//! (Mesa's CPU drivers; hardware GPUs may approximate division, which WGSL allows).
//!
//! `softmax_rows` calls `exp`, which every driver implements with its own approximation
//! (WGSL only bounds its error), so no host code reproduces every device: the host computes
//! the correctly rounded float32 of each `exp` (through float64; a double rounding is
//! possible only when the exact value lies within 2⁻²⁹ relative of a float32 midpoint) and
//! otherwise the shader's expression (max from the first logit, the sum from 0.0 in column
//! order, `exp(x − top) / total`).

use rayon::prelude::*;

use super::arith::{madd, FmaMode};

/// Items per rayon task.
const GRAIN: usize = 256;

/// A per-sample map kernel of the family.
#[derive(Debug, Clone, Copy)]
pub enum FisherMap {
    /// `softmax_kernel(k)`: rows of k logits to probabilities.
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

/// `exp(x)` correctly rounded to float32 (through float64).
pub fn exp_f32(x: f32) -> f32 {
    f64::from(x).exp() as f32
}

fn softmax(x: &[f32], out: &mut [f32]) {
    let top = x.iter().skip(1).fold(x[0], |m, &v| m.max(v));
    let total = x.iter().fold(0.0f32, |t, &v| t + exp_f32(v - top));
    for (o, &v) in out.iter_mut().zip(x) {
        *o = exp_f32(v - top) / total;
    }
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

    /// Runs items `range` of the one per-item input into `output`.
    pub fn run(&self, inputs: &[&[f32]], range: std::ops::Range<usize>, output: &mut [f32]) {
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
}
