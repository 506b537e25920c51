//! The per-sample Fisher maps (categorical, diagonal Gaussian) on resident inputs: the
//! numpy path's kernels run where the rows live ([`MultiGpuContext::run_resident`]) and the
//! result, K² or (2D)² words per sample, stays there. The numpy path's checks come first,
//! without moving the rows: a reduction on the devices (`shaders/fisher_checks.wgsl`)
//! flags rows that break a rule or that a float32 check cannot clear for certain, and only
//! then are the rows gathered for the exact checks (which raise the numpy path's error, or
//! pass a row the float32 sum could not clear). Logits are gathered: their softmax is taken
//! on the host in float64, as the numpy path does (see `categorical`), and the
//! probabilities uploaded beside the logits' rows.

use std::sync::Arc;

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::fisher::host_checks::{FlagRows, Rule, CHECK_SLICES, NONE};
use crate::kernel::{Dispatch, Input, Kernel, Output};
use crate::resident::{Operand, ResidentArray};

use super::categorical::{categorical_outer_kernel, check_probs, MAX_CATEGORIES};
use super::checks;
use super::gaussian::{gaussian_diag_kernel, MAX_GAUSSIAN_DIMENSIONS};

/// The WGSL of the checks.
pub const CHECKS_SOURCE: &str = include_str!("../../../../shaders/fisher_checks.wgsl");

fn flag_grid(_items: u32, _params: &[u32]) -> [u32; 3] {
    [1, CHECK_SLICES as u32, 1]
}

/// Rows of a chunk of the checks at most: each of a run's 64 threads takes every 64th row
/// and walks its `k` words (k + 2 loop trips a row), within
/// [`LOOP_BUDGET`](crate::kernel::LOOP_BUDGET). Whether a row is flagged does not depend on
/// the grid.
fn flag_chunk_rows(k: usize) -> usize {
    CHECK_SLICES * 64 * (32_000 / (k + 2)).max(1)
}

/// Per chunk of rows of `k` words: for each of [`CHECK_SLICES`] runs of its rows, the first
/// row that breaks `rule` or that a float32 check cannot clear (u32 bits; `u32::MAX` when
/// none).
pub fn flag_kernel(k: usize, rule: Rule) -> Kernel {
    Kernel {
        entry: "flag_rows",
        inputs: vec![Input::PerItem(k)],
        output: Output::PerChunk(CHECK_SLICES),
        params: vec![k as u32, rule.code(), 0, 0],
        dispatch: Dispatch::Custom(flag_grid),
        max_chunk_items: Some(flag_chunk_rows(k)),
        flops_per_item: k as f64,
        host: Some(Arc::new(FlagRows { k, rule })),
        ..Kernel::map(
            "fisher_flag_rows",
            Family::InformationGeometry,
            CHECKS_SOURCE,
        )
    }
}

/// Whether some row of `array` is flagged under `rule` (its rows then need the exact check).
fn any_flagged(
    ctx: &MultiGpuContext,
    array: &ResidentArray,
    argument: &str,
    rule: Rule,
) -> Result<bool> {
    let kernel = flag_kernel(array.cols(), rule);
    let grid = ctx.kernel_chunk_items(&kernel, array.rows());
    let flags = ctx.run_resident_chunks(&kernel, array, argument, None, grid)?;
    Ok(flags.iter().any(|v| v.to_bits() != NONE))
}

/// The rows of `array` on the host.
fn gathered(ctx: &MultiGpuContext, array: &ResidentArray) -> Result<Vec<f32>> {
    let mut rows = crate::alloc::zeroed("resident rows", array.rows() * array.cols())?;
    ctx.gather(array, &mut rows)?;
    Ok(rows)
}

fn check_width(argument: &str, array: &ResidentArray, max: usize) -> Result<()> {
    let cols = array.cols();
    if cols == 0 || cols > max {
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!("(N, W) with 1 <= W <= {max}"),
            actual: format!("W = {cols}"),
        });
    }
    Ok(())
}

/// Runs the map `kernel` (an `edge` x `edge` matrix per sample) on the resident `operand`:
/// a new array of `edge` rows per sample, or written into `out` (returning None).
fn run(
    ctx: &MultiGpuContext,
    kernel: &Kernel,
    operand: (&str, &ResidentArray),
    edge: usize,
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    let operands = [(operand.0, Operand::Resident(operand.1))];
    match out {
        Some(out) => ctx
            .run_resident_into_split(kernel, &operands, out, edge)
            .map(|()| None),
        None => {
            let mut result = ctx.run_resident(kernel, &operands)?;
            ctx.split_rows(&mut result, edge)?;
            Ok(Some(result))
        }
    }
}

/// [`super::categorical::fisher_categorical_probs`] of resident (N, K) `values` (probabilities, or
/// logits when `logits`), where their rows live: a resident (N·K, K) result (K rows per
/// sample) with their sharding, or written into `out` (returning None); bit for bit the
/// numpy path's.
pub fn fisher_categorical_resident(
    ctx: &MultiGpuContext,
    values: &ResidentArray,
    logits: bool,
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    let argument = if logits { "logits" } else { "probs" };
    check_width(argument, values, MAX_CATEGORIES)?;
    let k = values.cols();
    let kernel = categorical_outer_kernel(k);
    if logits {
        let rows = gathered(ctx, values)?;
        checks::finite("logits", &rows, k)?;
        let mut probs = crate::alloc::zeroed("probs", rows.len())?;
        crate::fisher::host_maps::softmax_rows(&rows, k, &mut probs);
        drop(rows);
        let probs = ctx.upload_like(&probs, k, values, &kernel, "logits")?;
        return run(ctx, &kernel, ("probs", &probs), k, out);
    }
    if any_flagged(ctx, values, "probs", Rule::Probabilities)? {
        // The numpy path's checks on the rows: its error, or none for rows the float32
        // sum could not clear.
        check_probs(&gathered(ctx, values)?, k)?;
    }
    run(ctx, &kernel, ("probs", values), k, out)
}

/// [`super::gaussian::fisher_gaussian_diag`] with `mean` or `var` (or both) resident, where the rows
/// live: a resident (N·2D, 2D) result (2D rows per sample) with the sharding of `var` (of `mean` when only it is
/// resident; host variances are then uploaded beside its rows), or written into `out`
/// (returning None); bit for bit the numpy path's.
pub fn fisher_gaussian_resident(
    ctx: &MultiGpuContext,
    mean: Operand<'_>,
    var: Operand<'_>,
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    let (n, d) = match (mean, var) {
        (Operand::Resident(m), _) => {
            check_width("mean", m, MAX_GAUSSIAN_DIMENSIONS)?;
            (m.rows(), m.cols())
        }
        (Operand::Host(_), Operand::Resident(v)) => {
            check_width("var", v, MAX_GAUSSIAN_DIMENSIONS)?;
            (v.rows(), v.cols())
        }
        (Operand::Host(_), Operand::Host(_)) => {
            return Err(Error::Internal("no resident Gaussian operand".into()))
        }
    };
    let shape_of = |argument: &str, rows: Operand<'_>| -> Result<()> {
        let (r, c) = match rows {
            Operand::Resident(a) => (a.rows(), a.cols()),
            Operand::Host(h) => {
                return checks::same_shape(argument, h, n, Some(d));
            }
        };
        if (r, c) != (n, d) {
            return Err(Error::Shape {
                argument: argument.into(),
                expected: format!("({n}, {d})"),
                actual: format!("({r}, {c})"),
            });
        }
        Ok(())
    };
    shape_of("mean", mean)?;
    shape_of("var", var)?;
    // The numpy path's order: mean finite, then var finite and > 0.
    match mean {
        Operand::Host(m) => checks::finite("mean", m, d)?,
        Operand::Resident(m) => {
            if any_flagged(ctx, m, "mean", Rule::Finite)? {
                checks::finite("mean", &gathered(ctx, m)?, d)?;
            }
        }
    }
    let check_var = |v: &[f32]| {
        checks::all_values("var", v, d, "finite values > 0", |x| {
            x.is_finite() && x > 0.0
        })
    };
    let kernel = gaussian_diag_kernel(d);
    let uploaded;
    let var = match (var, mean) {
        (Operand::Resident(v), _) => {
            if any_flagged(ctx, v, "var", Rule::Positive)? {
                check_var(&gathered(ctx, v)?)?;
            }
            v
        }
        (Operand::Host(v), Operand::Resident(m)) => {
            check_var(v)?;
            uploaded = ctx.upload_like(v, d, m, &kernel, "var")?;
            &uploaded
        }
        (Operand::Host(_), Operand::Host(_)) => {
            return Err(Error::Internal("no resident Gaussian operand".into()))
        }
    };
    run(ctx, &kernel, ("var", var), 2 * d, out)
}
