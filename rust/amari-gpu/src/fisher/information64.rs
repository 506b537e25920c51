//! The empirical Fisher information of float64 scores, accumulated in float64: the same
//! mean `sum_i w_i g_i g_i^T / sum_i w_i` as the float32 call, its partials the packed
//! triangles of `syrk64` (one per chunk, in float64 on every device that runs float64),
//! summed on the host in chunk order, so the result is the same bits for any device set and
//! strategy. No scaling: float64 products of finite scores only leave float64's range at
//! magnitudes near 1e154 (refused after the fact) or below 1e-154 (gradual underflow, as
//! numpy's `g.T @ g` gives it).

use std::borrow::Cow;

use crate::context::{MultiGpuContext, Ran, Target};
use crate::dtype::f64_words;
use crate::error::{Error, Result};
use crate::plan::Strategy;

use super::checks;
use super::information::FisherMatrix;
use super::shape::SyrkShape;
use super::split::{check_weights, no_rows, whole_chunks};
use super::syrk::MAX_SCORE_COLUMNS;
use super::syrk64::{kernel, reduce};

/// The shapes of a float64 `fisher_information` call as the caller gave them: (N, P)
/// `scores` (`dims`) and, when given, (N,) weights. Returns (N, P).
pub fn information_shapes_f64(
    dims: &[usize],
    weights: Option<&[usize]>,
) -> Result<(usize, usize)> {
    let &[n, p] = dims else {
        return Err(Error::Shape {
            argument: "scores".into(),
            expected: "(N, W)".into(),
            actual: crate::error::shape_text(dims),
        });
    };
    if let Some(weights) = weights {
        checks::vector("weights", weights, n)?;
    }
    Ok((n, p))
}

/// Empirical Fisher information of row-major (N, `p`) float64 `scores`, with optional (N,)
/// float64 `weights`, accumulated in float64 on every device that runs float64 (a context
/// without one refuses the call, naming its devices). Errors as [`super::fisher_information`]'s.
/// The three steps a cluster runs apart ([`prepare_f64`], [`partials_f64`] on the nodes,
/// [`finish_f64`]), in a row.
pub fn fisher_information_f64(
    ctx: &MultiGpuContext,
    scores: &[f64],
    p: usize,
    weights: Option<&[f64]>,
    strategy: Option<Strategy>,
) -> Result<FisherMatrix> {
    // The scores' finite check is left to the end: a non-finite score makes its column's
    // diagonal entry non-finite (`s · w · s` is >= 0, +inf or NaN, and no later term
    // brings such a sum back), so a finite matrix proves the scores finite, and the check
    // (a read of every score, a tenth of a large call) runs only when the call fails, first
    // of all its checks, naming the entry it names today.
    let run = || -> Result<FisherMatrix> {
        let prepared = prepare_rows_f64(scores, p, weights)?;
        let weights = device_weights(weights, prepared.n)?;
        let ran = partials_f64(ctx, scores, p, &weights, None, strategy)?;
        let matrix = finish_f64(p, prepared.total, &ran.partials);
        ctx.recycle_partials(ran.partials);
        Ok(FisherMatrix {
            matrix: matrix?,
            p,
            plan: ran.plan,
        })
    };
    run().map_err(|e| finite_scores(scores, p).err().unwrap_or(e))
}

/// A checked float64 call: its rows, the float64 sum of its weights (N without weights)
/// and the chunk grid of the whole problem (a context's default sizing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prepared64 {
    /// Rows.
    pub n: usize,
    /// Sum of the weights (N without weights).
    pub total: f64,
    /// Items per chunk of the whole problem's chunk grid.
    pub chunk_items: usize,
}

/// Checks row-major (N, `p`) float64 `scores` and optional (N,) `weights` as
/// [`fisher_information_f64`] does (float64 needs no scaling: the devices see them as given).
pub fn prepare_f64(scores: &[f64], p: usize, weights: Option<&[f64]>) -> Result<Prepared64> {
    finite_scores(scores, p)?;
    prepare_rows_f64(scores, p, weights)
}

/// Every score finite, else the error naming the first that is not (a shape error first,
/// as [`prepare_f64`] gives it).
fn finite_scores(scores: &[f64], p: usize) -> Result<()> {
    let n = checks::rows("scores", scores, p, MAX_SCORE_COLUMNS)?;
    if n == 0 {
        return Err(no_rows(p));
    }
    checks::all_values("scores", scores, p, "finite values", f64::is_finite)
}

/// [`prepare_f64`] but for the scores' finite check.
fn prepare_rows_f64(scores: &[f64], p: usize, weights: Option<&[f64]>) -> Result<Prepared64> {
    let n = checks::rows("scores", scores, p, MAX_SCORE_COLUMNS)?;
    if n == 0 {
        return Err(no_rows(p));
    }
    let total = check_weights(weights, n)?;
    let width = SyrkShape::new(p).width;
    Ok(Prepared64 {
        n,
        total,
        chunk_items: kernel(p, width).chunk_items(n),
    })
}

/// (`n`,) ones: the weights of an unweighted call.
pub fn ones_f64(n: usize) -> Result<Vec<f64>> {
    let mut all = crate::alloc::zeroed::<f64>("weights", n)?;
    all.fill(1.0);
    Ok(all)
}

/// The float64 partials (packed triangles as words, one per chunk in chunk order) of
/// checked (n, `p`) `scores` and (n,) `weights`, cut into chunks of `grid` rows when given
/// (else the context's default sizing): with the rows of chunks `c0..c1` of a larger
/// problem and its grid, these are the partials of those chunks a single context computes
/// for the whole problem.
pub fn partials_f64(
    ctx: &MultiGpuContext,
    scores: &[f64],
    p: usize,
    weights: &[f64],
    grid: Option<usize>,
    strategy: Option<Strategy>,
) -> Result<Ran> {
    let n = checks::rows("scores", scores, p, MAX_SCORE_COLUMNS)?;
    checks::same_shape("weights", weights, n, None)?;
    if grid == Some(0) {
        return Err(Error::invalid("chunk_items", "expected at least 1, got 0"));
    }
    let width = SyrkShape::new(p).width;
    let rows = padded(scores, p, width, n)?;
    ctx.run_on_grid(
        &kernel(p, width),
        &[f64_words(&rows), f64_words(weights)],
        Target::Chunks,
        n,
        grid,
        strategy,
    )
}

/// The Fisher matrix from every chunk's float64 partials (words, in chunk order): summed in
/// float64, refused when the sum left float64's range, divided by the weights' sum `total`.
pub fn finish_f64(p: usize, total: f64, partials: &[f32]) -> Result<Vec<f64>> {
    let width = SyrkShape::new(p).width;
    whole_chunks(partials, 2 * super::syrk64::triangle(width))?;
    mean(reduce(p, width, partials)?, p, total)
}

/// The weights the devices take: the caller's, or ones (multiplying by 1.0 is exact: the
/// unweighted result is the plain mean).
pub(super) fn device_weights(weights: Option<&[f64]>, n: usize) -> Result<Cow<'_, [f64]>> {
    match weights {
        Some(w) => Ok(Cow::Borrowed(w)),
        None => Ok(Cow::Owned(ones_f64(n)?)),
    }
}

/// The summed partials `matrix` (P × P) divided by the weights' `total`, refused (naming
/// the entry) when a sum left float64's range.
pub(super) fn mean(mut matrix: Vec<f64>, p: usize, total: f64) -> Result<Vec<f64>> {
    checks::accumulated(&matrix, p, "float64")?;
    for v in &mut matrix {
        *v /= total;
    }
    Ok(matrix)
}

/// The rows with zero columns appended up to `width` (a copy only when P is not it).
fn padded(scores: &[f64], p: usize, width: usize, n: usize) -> Result<Cow<'_, [f64]>> {
    if width == p {
        return Ok(Cow::Borrowed(scores));
    }
    let len = crate::alloc::product("padded scores", &[n, width], 8)?;
    let mut out = crate::alloc::zeroed::<f64>("padded scores", len)?;
    for (to, from) in out.chunks_exact_mut(width).zip(scores.chunks_exact(p)) {
        to[..p].copy_from_slice(from);
    }
    Ok(Cow::Owned(out))
}
