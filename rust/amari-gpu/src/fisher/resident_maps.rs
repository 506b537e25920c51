//! The per-sample Fisher maps (categorical, diagonal Gaussian) on resident inputs: the
//! numpy path's kernels run where the rows live ([`MultiGpuContext::run_resident`]) and the
//! result, K² or (2D)² words per sample, stays there. The numpy path's checks come first,
//! without moving the rows: a reduction on the devices (`shaders/fisher_checks.wgsl`)
//! flags rows that break a rule or that a float32 check cannot clear for certain, and only
//! then are the rows gathered for the exact checks (which raise the numpy path's error, or
//! pass a row the float32 sum could not clear). Logits are gathered: their softmax is taken
//! on the host in float64, as the numpy path does (see `categorical`), and the
//! probabilities uploaded beside the logits' rows.
//!
//! A float64 resident operand computes in float64 (the numpy path's float64 kernels; the
//! checks read its values' words), its host partner and `out` float64 too; float32 as
//! always. Every entry is one function over [`Value`], the dtype the resident operand holds.

use std::sync::Arc;

use crate::context::MultiGpuContext;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::fisher::host_checks::{FlagRows, Rule, CHECK_SLICES, NONE};
use crate::kernel::{Dispatch, Input, Kernel, Output};
use crate::resident::{Operand, ResidentArray};

use super::categorical::{categorical_outer_in, check_probs, MAX_CATEGORIES};
use super::checks;
use super::gaussian::{gaussian_diag_in, MAX_GAUSSIAN_DIMENSIONS};
use super::host_maps::Value;

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

/// Per chunk of rows of `k` float32 words: for each of [`CHECK_SLICES`] runs of its rows,
/// the first row that breaks `rule` or that a float32 check cannot clear (u32 bits;
/// `u32::MAX` when none).
pub fn flag_kernel(k: usize, rule: Rule) -> Kernel {
    flag_kernel_in(k, rule, Dtype::F32)
}

/// [`flag_kernel`] over rows of `k` words holding values of `dtype` (float32, or float64:
/// two words each).
fn flag_kernel_in(k: usize, rule: Rule, dtype: Dtype) -> Kernel {
    let wide = dtype == Dtype::F64;
    Kernel {
        entry: "flag_rows",
        inputs: vec![Input::PerItem(k)],
        output: Output::PerChunk(CHECK_SLICES),
        params: vec![k as u32, rule.code(), u32::from(wide), 0],
        dispatch: Dispatch::Custom(flag_grid),
        max_chunk_items: Some(flag_chunk_rows(k)),
        flops_per_item: k as f64,
        host: Some(Arc::new(FlagRows { k, rule, wide })),
        dtype,
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
    let kernel = flag_kernel_in(array.cols(), rule, array.dtype());
    let grid = ctx.kernel_chunk_items(&kernel, array.rows());
    let flags = ctx.run_resident_chunks(&kernel, array, argument, None, grid)?;
    Ok(flags.iter().any(|v| v.to_bits() != NONE))
}

/// The values of `array` (of `T`) on the host.
fn gathered<T: Value>(ctx: &MultiGpuContext, array: &ResidentArray) -> Result<Vec<T>> {
    let values = array.rows() * array.cols() / words::<T>();
    let mut rows = crate::alloc::zeroed::<T>("resident rows", values)?;
    ctx.gather(array, bytemuck::cast_slice_mut(&mut rows))?;
    Ok(rows)
}

/// Words of one value of `T`.
fn words<T: Value>() -> usize {
    T::DTYPE.bytes() / 4
}

/// Host words of `T` values as the values (a float64 host operand's words are 8-byte
/// aligned: numpy's float64 arrays are).
fn host_values<'a, T: Value>(argument: &str, words: &'a [f32]) -> Result<&'a [T]> {
    bytemuck::try_cast_slice(words)
        .map_err(|_| Error::Internal(format!("{argument}: host words that are not its values")))
}

/// The values per row of `array` (named `argument`), at most `max`.
fn check_width<T: Value>(argument: &str, array: &ResidentArray, max: usize) -> Result<usize> {
    let cols = array.cols() / words::<T>();
    if cols == 0 || cols > max {
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!("(N, W) with 1 <= W <= {max}"),
            actual: format!("W = {cols}"),
        });
    }
    Ok(cols)
}

/// Refuses a resident operand of a dtype the maps do not compute in.
fn refused(argument: &str, dtype: Dtype) -> Error {
    Error::invalid(
        argument,
        format!("expected a DeviceArray of float32 or float64, got one of {dtype}"),
    )
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
/// logits when `logits`), where their rows live, in the dtype they hold: a resident
/// (N·K, K) result (K rows per sample) with their sharding, or written into `out`
/// (returning None); bit for bit the numpy path's.
pub fn fisher_categorical_resident(
    ctx: &MultiGpuContext,
    values: &ResidentArray,
    logits: bool,
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    match values.dtype() {
        Dtype::F32 => categorical_in::<f32>(ctx, values, logits, out),
        Dtype::F64 => categorical_in::<f64>(ctx, values, logits, out),
        other => Err(refused(if logits { "logits" } else { "probs" }, other)),
    }
}

/// [`fisher_categorical_resident`] of values of `T`.
fn categorical_in<T: Value>(
    ctx: &MultiGpuContext,
    values: &ResidentArray,
    logits: bool,
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    let argument = if logits { "logits" } else { "probs" };
    let k = check_width::<T>(argument, values, MAX_CATEGORIES)?;
    let kernel = categorical_outer_in(k, T::DTYPE);
    if logits {
        let rows = gathered::<T>(ctx, values)?;
        checks::finite("logits", &rows, k)?;
        let mut probs = crate::alloc::zeroed::<T>("probs", rows.len())?;
        crate::fisher::host_maps::softmax_rows(&rows, k, &mut probs);
        drop(rows);
        let words = bytemuck::cast_slice(&probs);
        let probs = ctx.upload_like(words, values.cols(), values, &kernel, "logits")?;
        return run(ctx, &kernel, ("probs", &probs), k, out);
    }
    if any_flagged(ctx, values, "probs", Rule::Probabilities)? {
        // The numpy path's checks on the rows: its error, or none for rows the float32
        // sum could not clear.
        check_probs(&gathered::<T>(ctx, values)?, k)?;
    }
    run(ctx, &kernel, ("probs", values), k, out)
}

/// [`super::gaussian::fisher_gaussian_diag`] with `mean` or `var` (or both) resident, where the rows
/// live, in the dtype the resident one holds (a host partner's words are values of it): a
/// resident (N·2D, 2D) result (2D rows per sample) with the sharding of `var` (of `mean`
/// when only it is resident; host variances are then uploaded beside its rows), or written
/// into `out` (returning None); bit for bit the numpy path's.
pub fn fisher_gaussian_resident(
    ctx: &MultiGpuContext,
    mean: Operand<'_>,
    var: Operand<'_>,
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    let (argument, dtype) = match (mean, var) {
        (Operand::Resident(m), _) => ("mean", m.dtype()),
        (Operand::Host(_), Operand::Resident(v)) => ("var", v.dtype()),
        (Operand::Host(_), Operand::Host(_)) => {
            return Err(Error::Internal("no resident Gaussian operand".into()))
        }
    };
    match dtype {
        Dtype::F32 => gaussian_in::<f32>(ctx, (mean, var), out),
        Dtype::F64 => gaussian_in::<f64>(ctx, (mean, var), out),
        other => Err(refused(argument, other)),
    }
}

/// [`fisher_gaussian_resident`] of values of `T`.
fn gaussian_in<T: Value>(
    ctx: &MultiGpuContext,
    (mean, var): (Operand<'_>, Operand<'_>),
    out: Option<&ResidentArray>,
) -> Result<Option<ResidentArray>> {
    let (n, d) = match (mean, var) {
        (Operand::Resident(m), _) => (m.rows(), check_width::<T>("mean", m, MAX_GAUSSIAN_DIMENSIONS)?),
        (Operand::Host(_), Operand::Resident(v)) => {
            (v.rows(), check_width::<T>("var", v, MAX_GAUSSIAN_DIMENSIONS)?)
        }
        (Operand::Host(_), Operand::Host(_)) => {
            return Err(Error::Internal("no resident Gaussian operand".into()))
        }
    };
    let shape_of = |argument: &str, rows: Operand<'_>| -> Result<()> {
        let (r, c) = match rows {
            Operand::Resident(a) if a.dtype() != T::DTYPE => {
                return Err(Error::invalid(
                    argument,
                    format!(
                        "expected a DeviceArray of {} (the other operand's), got one of {}",
                        T::DTYPE,
                        a.dtype()
                    ),
                ))
            }
            Operand::Resident(a) => (a.rows(), a.cols() / words::<T>()),
            Operand::Host(h) => {
                return checks::same_shape(argument, host_values::<T>(argument, h)?, n, Some(d));
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
        Operand::Host(m) => checks::finite("mean", host_values::<T>("mean", m)?, d)?,
        Operand::Resident(m) => {
            if any_flagged(ctx, m, "mean", Rule::Finite)? {
                checks::finite("mean", &gathered::<T>(ctx, m)?, d)?;
            }
        }
    }
    let check_var = |v: &[T]| {
        checks::all_values("var", v, d, "finite values > 0", |x: T| {
            let x: f64 = x.into();
            x.is_finite() && x > 0.0
        })
    };
    let kernel = gaussian_diag_in(d, T::DTYPE);
    let uploaded;
    let var = match (var, mean) {
        (Operand::Resident(v), _) => {
            if any_flagged(ctx, v, "var", Rule::Positive)? {
                check_var(&gathered::<T>(ctx, v)?)?;
            }
            v
        }
        (Operand::Host(v), Operand::Resident(m)) => {
            check_var(host_values::<T>("var", v)?)?;
            uploaded = ctx.upload_like(v, m.cols(), m, &kernel, "var")?;
            &uploaded
        }
        (Operand::Host(_), Operand::Host(_)) => {
            return Err(Error::Internal("no resident Gaussian operand".into()))
        }
    };
    run(ctx, &kernel, ("var", var), 2 * d, out)
}
