//! The empirical Fisher information `F = sum_i w_i g_i g_i^T / sum_i w_i` from per-sample
//! scores, on every healthy device of a context.

use crate::context::{MultiGpuContext, Target};
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};

use super::checks;
use super::reduce::{reduce_naive, reduce_tiled};
use super::scale::Scaling;
use super::syrk::{naive_kernel, tiled_kernel, SyrkShape, MAX_SCORE_COLUMNS};

/// A Fisher matrix and how it was computed.
#[derive(Debug, Clone)]
pub struct FisherMatrix {
    /// Row-major P x P, exactly symmetric.
    pub matrix: Vec<f64>,
    /// P.
    pub p: usize,
    /// The plan the call followed.
    pub plan: Plan,
}

/// Checks the arguments; returns N and the weights' float64 sum.
fn check(scores: &[f32], p: usize, weights: Option<&[f32]>) -> Result<(usize, f64)> {
    let n = checks::rows("scores", scores, p, MAX_SCORE_COLUMNS)?;
    if n == 0 {
        return Err(Error::Shape {
            argument: "scores".into(),
            expected: format!("(N, {p}) with N >= 1 (the Fisher matrix is a mean over rows)"),
            actual: format!("(0, {p})"),
        });
    }
    checks::finite("scores", scores, p)?;
    let Some(w) = weights else {
        return Ok((n, n as f64));
    };
    checks::same_shape("weights", w, n, None)?;
    checks::all_values("weights", w, 1, "finite values >= 0", |v| {
        v.is_finite() && v >= 0.0
    })?;
    let total: f64 = w.iter().map(|&v| f64::from(v)).sum();
    if total <= 0.0 {
        return Err(Error::invalid(
            "weights",
            "expected at least one weight > 0, got all zeros (the weighted mean is undefined)",
        ));
    }
    Ok((n, total))
}

/// Which SYRK kernel computes the partials.
#[derive(Clone, Copy)]
enum Variant {
    Tiled,
    Naive,
}

fn run(
    ctx: &MultiGpuContext,
    variant: Variant,
    scores: &[f32],
    p: usize,
    weights: Option<&[f32]>,
    strategy: Option<Strategy>,
) -> Result<FisherMatrix> {
    let (n, mut total) = check(scores, p, weights)?;
    // Scores or weights whose products would underflow or overflow float32 are scaled by
    // exact powers of two, chosen from the whole input here, before any chunk is cut.
    let scaling = Scaling::choose(scores, p, weights);
    let (scaled_scores, scaled_weights);
    let (scores, weights) = if scaling.is_identity() {
        (scores, weights)
    } else {
        scaled_scores = scaling.scores(scores, p);
        scaled_weights = weights.map(|w| scaling.weights(w));
        if let Some(w) = &scaled_weights {
            total = w.iter().map(|&v| f64::from(v)).sum();
        }
        (&scaled_scores[..], scaled_weights.as_deref())
    };
    let ones;
    let w = match weights {
        Some(w) => w,
        None => {
            // Multiplying by 1.0 is exact: the unweighted result is the plain mean.
            let mut filled = crate::alloc::zeroed("weights", n)?;
            filled.fill(1.0f32);
            ones = filled;
            &ones
        }
    };
    let kernel = match variant {
        Variant::Tiled => tiled_kernel(p),
        Variant::Naive => naive_kernel(p),
    };
    let shape = SyrkShape::new(p);
    let rows = shape.padded(scores)?;
    let ran = ctx.run(&kernel, &[&rows, w], Target::Chunks, n, strategy)?;
    drop(rows);
    let mut matrix = match variant {
        Variant::Tiled => reduce_tiled(&shape, &ran.partials)?,
        Variant::Naive => reduce_naive(&shape, &ran.partials)?,
    };
    if let Some(i) = matrix.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(
            "scores",
            format!(
                "the float32 accumulation overflowed at F{}: weighted products of scores \
                 exceed the float32 range; rescale the scores (or the weights)",
                checks::position(i, p)
            ),
        ));
    }
    for v in &mut matrix {
        *v /= total;
    }
    if !scaling.is_identity() {
        scaling.unscale(&mut matrix, p);
    }
    Ok(FisherMatrix {
        matrix,
        p,
        plan: ran.plan,
    })
}

/// Empirical Fisher information of row-major (N, `p`) float32 `scores` (per-sample
/// gradients of the log-likelihood): `sum_i w_i g_i g_i^T / sum_i w_i`, or the plain mean
/// without `weights`. Rows are split across the healthy devices; each chunk's partial is
/// summed on the host in chunk order in float64, so the result is bit-identical for any
/// device set and strategy. The kernels read rows as vec4: when P is not a multiple of 4
/// the rows are first copied with zero columns appended (one host pass over the scores).
///
/// Scores or weights so small or so large that their float32 products would lose bits or
/// overflow (a column's largest |score| outside about [2^-40, 2^40], the largest weight
/// outside [2^-40, 2^40]) are first scaled by exact powers of two chosen from the whole
/// input, and the result unscaled exactly in float64: entries down to about 1e-90 and up to
/// about 1e77 come back to float32 precision, bit-identical for any device set; ordinary
/// inputs are used as given.
///
/// Errors (each naming the argument): `p` outside `1..=4096` or `scores` not (N, p) or
/// N = 0; non-finite scores; `weights` not (N,), negative, non-finite or all zero.
pub fn fisher_information(
    ctx: &MultiGpuContext,
    scores: &[f32],
    p: usize,
    weights: Option<&[f32]>,
    strategy: Option<Strategy>,
) -> Result<FisherMatrix> {
    run(ctx, Variant::Tiled, scores, p, weights, strategy)
}

/// [`fisher_information`] computed by the one-thread-per-output kernel: the baseline of the
/// benchmark, kept tested so that the comparison is between two correct kernels.
pub fn fisher_information_naive(
    ctx: &MultiGpuContext,
    scores: &[f32],
    p: usize,
    weights: Option<&[f32]>,
    strategy: Option<Strategy>,
) -> Result<FisherMatrix> {
    run(ctx, Variant::Naive, scores, p, weights, strategy)
}
