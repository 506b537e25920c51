//! The empirical Fisher information `F = sum_i w_i g_i g_i^T / sum_i w_i` from per-sample
//! scores, on every healthy device of a context.

use crate::context::{MultiGpuContext, Target};
use crate::error::Result;
use crate::plan::{Plan, Strategy};

use super::reduce::{reduce_naive, reduce_tiled};
use super::split::{finish_matrix, prepare};
use super::syrk::{naive_kernel, tiled_kernel, SyrkShape};

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

/// Which SYRK kernel computes the partials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyrkVariant {
    /// The tiled kernels (`fisher_tiled`, `fisher_rows` for narrow scores): what
    /// [`fisher_information`] runs.
    Tiled,
    /// One thread per output entry and no data reuse: the benchmark's baseline, kept tested
    /// so that the comparison is between two correct kernels.
    Naive,
}

/// [`fisher_information`] with the partials computed by `variant`'s kernel.
pub fn fisher_information_by(
    ctx: &MultiGpuContext,
    variant: SyrkVariant,
    scores: &[f32],
    p: usize,
    weights: Option<&[f32]>,
    strategy: Option<Strategy>,
) -> Result<FisherMatrix> {
    // Checks, and the exact power-of-two scaling chosen from the whole input before any
    // chunk is cut: the steps a cluster runs on its driver (`split`).
    let large = super::scan::scanned_in_parallel(scores.len(), p);
    let prepared = ctx.on_host_threads(large, || prepare(scores, p, weights))?;
    let kernel = match variant {
        SyrkVariant::Tiled => tiled_kernel(p),
        SyrkVariant::Naive => naive_kernel(p),
    };
    let shape = SyrkShape::new(p);
    let rows = ctx.on_host_threads(large, || shape.padded(&prepared.scores, large))?;
    let ran = ctx.run(
        &kernel,
        &[&rows, &prepared.weights],
        Target::Chunks,
        prepared.n,
        strategy,
    )?;
    drop(rows);
    let matrix = match variant {
        SyrkVariant::Tiled => reduce_tiled(&shape, &ran.partials),
        SyrkVariant::Naive => reduce_naive(&shape, &ran.partials),
    };
    ctx.recycle_partials(ran.partials);
    let matrix = matrix?;
    let matrix = finish_matrix(&prepared.finish, matrix)?;
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
    fisher_information_by(ctx, SyrkVariant::Tiled, scores, p, weights, strategy)
}
