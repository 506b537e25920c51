//! Float64 references of the family's operations, written from the definitions, for tests
//! and benchmarks.

/// `sum_i w_i g_i g_i^T / sum_i w_i` (plain mean without weights) of row-major (N, `p`)
/// scores, row-major P x P.
pub fn fisher_information(scores: &[f32], p: usize, weights: Option<&[f32]>) -> Vec<f64> {
    let n = scores.len() / p;
    let mut f = vec![0.0f64; p * p];
    let mut total = 0.0;
    for r in 0..n {
        let w = weights.map_or(1.0, |w| f64::from(w[r]));
        total += w;
        let g = &scores[r * p..(r + 1) * p];
        for i in 0..p {
            let wi = w * f64::from(g[i]);
            for j in 0..p {
                f[i * p + j] += wi * f64::from(g[j]);
            }
        }
    }
    f.iter_mut().for_each(|v| *v /= total);
    f
}

/// Softmax of one row, with the maximum subtracted first.
pub fn softmax(logits: &[f32]) -> Vec<f64> {
    let top = logits
        .iter()
        .map(|&v| f64::from(v))
        .fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = logits.iter().map(|&v| (f64::from(v) - top).exp()).collect();
    let total: f64 = e.iter().sum();
    e.iter().map(|v| v / total).collect()
}

/// `diag(p) - p p^T` of one row of probabilities, row-major K x K.
pub fn categorical(p: &[f64]) -> Vec<f64> {
    let k = p.len();
    let mut f = vec![0.0; k * k];
    for r in 0..k {
        for c in 0..k {
            f[r * k + c] = if r == c { p[r] } else { 0.0 } - p[r] * p[c];
        }
    }
    f
}

/// `block-diag(diag(1 / var), diag(1 / (2 var^2)))` of one row of variances, row-major
/// (2D, 2D).
pub fn gaussian_diag(var: &[f32]) -> Vec<f64> {
    let d = var.len();
    let edge = 2 * d;
    let mut f = vec![0.0; edge * edge];
    for (k, &v) in var.iter().enumerate() {
        let v = f64::from(v);
        f[k * edge + k] = 1.0 / v;
        f[(d + k) * edge + d + k] = 1.0 / (2.0 * v * v);
    }
    f
}
