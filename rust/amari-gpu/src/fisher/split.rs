//! The empirical Fisher call in three steps: prepare (checks, exact scaling, weights),
//! partials of a run of chunks of the whole problem's chunk grid, finish (float64 sum in
//! chunk order, mean, unscaling). One context runs the three in a row; a cluster prepares
//! and finishes on the driver and runs the partials on its nodes, so both sum the same
//! float32 partials in the same order and get the same bits.

use std::borrow::Cow;

use crate::context::{MultiGpuContext, Ran, Target};
use crate::error::{Error, Result};
use crate::plan::Strategy;

use super::checks;
use super::scale::Scaling;
use super::scan;
use super::syrk::{tiled_kernel, SyrkShape, MAX_SCORE_COLUMNS};

/// How partials become the Fisher matrix: P, the float64 sum of the (scaled) weights, and
/// the power-of-two exponents the inputs were scaled by.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// Score columns.
    pub p: usize,
    /// Sum of the weights the devices saw (N without weights).
    pub total: f64,
    /// Column j of the scores was scaled by 2^column_exponents[j].
    pub column_exponents: Vec<i32>,
    /// Every weight was scaled by 2^weight_exponent.
    pub weight_exponent: i32,
}

/// A checked call, ready for the devices.
#[derive(Debug, Clone)]
pub struct Prepared<'a> {
    /// Rows.
    pub n: usize,
    /// (N, P) scores as the devices see them (scaled when needed).
    pub scores: Cow<'a, [f32]>,
    /// (N,) weights as the devices see them (ones without weights).
    pub weights: Cow<'a, [f32]>,
    /// Items per chunk of the whole problem's chunk grid (default sizing).
    pub chunk_items: usize,
    /// What [`finish`] needs.
    pub finish: Finish,
}

/// Checks the arguments; returns N, the weights' float64 sum and every column's largest
/// |score| (one pass over the scores finds both whether they are finite and the maxima the
/// scaling is chosen from).
fn check(scores: &[f32], p: usize, weights: Option<&[f32]>) -> Result<(usize, f64, Vec<f32>)> {
    let n = checks::rows("scores", scores, p, MAX_SCORE_COLUMNS)?;
    if n == 0 {
        return Err(no_rows(p));
    }
    let maxima = scan::column_maxima(scores, p);
    if !scan::all_finite(&maxima) {
        // The exact check names the first offending entry.
        checks::finite("scores", scores, p)?;
        return Err(Error::Internal(
            "a column's largest magnitude is not finite, yet every score is".into(),
        ));
    }
    let maxima = maxima.into_iter().map(f32::from_bits).collect();
    Ok((n, check_weights(weights, n)?, maxima))
}

/// The error for scores without rows.
pub(super) fn no_rows(p: usize) -> Error {
    Error::Shape {
        argument: "scores".into(),
        expected: format!("(N, {p}) with N >= 1 (the Fisher matrix is a mean over rows)"),
        actual: format!("(0, {p})"),
    }
}

/// Checks optional (`n`,) weights; returns their float64 sum (`n` without weights).
/// (float32 weights, or float64 ones of float64 scores: each is checked as its float64
/// value, which has the float32 one's finiteness and sign.)
pub(super) fn check_weights<T: Copy + Sync + std::fmt::Display + Into<f64>>(
    weights: Option<&[T]>,
    n: usize,
) -> Result<f64> {
    let Some(w) = weights else {
        return Ok(n as f64);
    };
    checks::same_shape("weights", w, n, None)?;
    checks::all_values("weights", w, 1, "finite values >= 0", |v: T| {
        let v: f64 = v.into();
        v.is_finite() && v >= 0.0
    })?;
    let total: f64 = w.iter().map(|&v| v.into()).sum();
    if total <= 0.0 {
        return Err(Error::invalid(
            "weights",
            "expected at least one weight > 0, got all zeros (the weighted mean is undefined)",
        ));
    }
    Ok(total)
}

/// The weights as the devices see them (scaled by `scaling`, or ones without weights) and
/// their float64 sum, given the checked sum `total` of the unscaled ones.
pub(super) fn device_weights<'a>(
    scaling: &Scaling,
    weights: Option<&'a [f32]>,
    n: usize,
    total: f64,
) -> Result<(Cow<'a, [f32]>, f64)> {
    match weights {
        Some(w) if scaling.weights != 0 => {
            let scaled = scaling.weights(w);
            let total = scaled.iter().map(|&v| f64::from(v)).sum();
            Ok((Cow::Owned(scaled), total))
        }
        Some(w) => Ok((Cow::Borrowed(w), total)),
        None => {
            // Multiplying by 1.0 is exact: the unweighted result is the plain mean.
            let mut ones = crate::alloc::zeroed("weights", n)?;
            ones.fill(1.0f32);
            Ok((Cow::Owned(ones), total))
        }
    }
}

/// Checks row-major (N, `p`) `scores` and optional (N,) `weights` and makes them what the
/// devices see: scores or weights whose float32 products would underflow or overflow are
/// scaled by exact powers of two chosen from the whole input, before any chunk is cut.
pub fn prepare<'a>(
    scores: &'a [f32],
    p: usize,
    weights: Option<&'a [f32]>,
) -> Result<Prepared<'a>> {
    let (n, total, maxima) = check(scores, p, weights)?;
    let scaling = Scaling::from_maxima(&maxima, n, weights);
    let scores = if scaling.is_identity() {
        Cow::Borrowed(scores)
    } else {
        Cow::Owned(scaling.scores(scores, p))
    };
    let (weights, total) = device_weights(&scaling, weights, n, total)?;
    Ok(Prepared {
        n,
        scores,
        weights,
        chunk_items: tiled_kernel(p).chunk_items(n),
        finish: Finish {
            p,
            total,
            column_exponents: scaling.columns,
            weight_exponent: scaling.weights,
        },
    })
}

/// The tiled kernel's float32 partials, one block per chunk in chunk order, of prepared
/// (n, `p`) `scores` and (n,) `weights` cut into chunks of `chunk_items` rows: with the
/// rows of chunks `c0..c1` of a larger problem and its `chunk_items`, these are the
/// partials of those chunks that a single context would compute for the whole problem.
pub fn partials(
    ctx: &MultiGpuContext,
    scores: &[f32],
    p: usize,
    weights: &[f32],
    chunk_items: usize,
    strategy: Option<Strategy>,
) -> Result<Ran> {
    let n = checks::rows("scores", scores, p, MAX_SCORE_COLUMNS)?;
    checks::same_shape("weights", weights, n, None)?;
    if chunk_items == 0 {
        return Err(Error::invalid("chunk_items", "expected at least 1, got 0"));
    }
    let shape = SyrkShape::new(p);
    let large = scan::scanned_in_parallel(scores.len(), p);
    let rows = ctx.on_host_threads(large, || shape.padded(scores, large))?;
    ctx.run_on_grid(
        &tiled_kernel(p),
        &[&rows, weights],
        Target::Chunks,
        n,
        Some(chunk_items),
        strategy,
    )
}

/// The Fisher matrix from every chunk's tiled partials in chunk order: summed in float64,
/// divided by the weights' sum, unscaled.
pub fn finish(finish: &Finish, partials: &[f32]) -> Result<Vec<f64>> {
    if finish.column_exponents.len() != finish.p {
        return Err(Error::invalid(
            "column_exponents",
            format!(
                "expected {} exponents (one per score column), got {}",
                finish.p,
                finish.column_exponents.len()
            ),
        ));
    }
    let shape = SyrkShape::new(finish.p);
    whole_chunks(partials, shape.partial_words())?;
    let matrix = super::reduce::reduce_tiled(&shape, partials)?;
    finish_matrix(finish, matrix)
}

/// Checks `partials` are whole chunks' partials of `words` words each.
pub(super) fn whole_chunks(partials: &[f32], words: usize) -> Result<()> {
    if words == 0 || !partials.len().is_multiple_of(words) {
        return Err(Error::invalid(
            "partials",
            format!(
                "expected whole chunks of {words} words, got {} words",
                partials.len()
            ),
        ));
    }
    Ok(())
}

/// Divides the summed matrix by the weights' sum and unscales it, refusing an accumulation
/// that overflowed float32.
pub(super) fn finish_matrix(finish: &Finish, mut matrix: Vec<f64>) -> Result<Vec<f64>> {
    let p = finish.p;
    checks::accumulated(&matrix, p, "float32")?;
    for v in &mut matrix {
        *v /= finish.total;
    }
    let scaling = Scaling {
        columns: finish.column_exponents.clone(),
        weights: finish.weight_exponent,
    };
    if !scaling.is_identity() {
        scaling.unscale(&mut matrix, p);
    }
    Ok(matrix)
}
