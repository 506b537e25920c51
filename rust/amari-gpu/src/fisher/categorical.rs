//! Fisher information of the categorical family, `diag(p) - p p^T` per sample, from
//! probabilities or from logits. The softmax of logits is taken once on the host, in float64
//! (`fisher::host_maps::softmax_rows`), before the outer products are cut into chunks: the shader's
//! `exp` is each driver's own approximation, so a softmax computed per chunk would give
//! different bits on different devices; computed once, every device reads the same
//! probabilities and the result is the same for any device mix.
//!
//! Float32 and float64 values run the same code ([`Value`]): float64 probabilities (and the
//! float64 softmax of float64 logits, not rounded further) go to the devices that run float64.

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::family::Family;
use std::sync::Arc;

use crate::dtype::Dtype;
use crate::fisher::host_maps::{FisherMap, Value};
use crate::kernel::FmaMode;
use crate::kernel::{Dispatch, Input, Kernel, Output};
use crate::plan::{Plan, Strategy};

use super::checks;
use super::maps_wgsl;
use super::syrk::SHADER;

/// Largest K: one sample's (K, K) output must fit the 128 MiB storage binding every
/// WebGPU device grants.
pub const MAX_CATEGORIES: usize = 5792;

/// Rows of `probs` must sum to 1 within this (absolute, summed in float64).
pub const PROBS_SUM_TOLERANCE: f64 = 1e-3;

/// Stable softmax of rows of `k` logits on a device, one thread per row. Not used by
/// [`fisher_categorical_logits`] (see the module header); kept to measure the drivers' `exp`
/// against the host's.
pub fn softmax_kernel(k: usize) -> Kernel {
    Kernel {
        entry: "softmax_rows",
        inputs: vec![Input::PerItem(k)],
        output: Output::PerItem(k),
        params: vec![k as u32, 0, 0, 0],
        // max, exp, sum and divide per entry.
        flops_per_item: 4.0 * k as f64,
        // No host twin: the host's exp is correctly rounded, the drivers' is not, so a
        // host chunk would not give the bits a wgpu device gives.
        ..Kernel::map("softmax_rows", Family::InformationGeometry, SHADER)
    }
}

/// `diag(p) - p p^T` of rows of `k` float32 probabilities, one thread per output entry.
pub fn categorical_outer_kernel(k: usize) -> Kernel {
    categorical_outer_in(k, Dtype::F32)
}

/// [`categorical_outer_kernel`] in `dtype` (float32 or float64).
pub(super) fn categorical_outer_in(k: usize, dtype: Dtype) -> Kernel {
    let host = FisherMap::CategoricalOuter {
        k,
        fma: FmaMode::default(),
        dtype,
    };
    Kernel {
        flops_per_item: 2.0 * (k * k) as f64,
        ..matrix_map("categorical_outer", k, k, host)
    }
}

/// A per-sample map of the family's shader from rows of `width` values (the first
/// parameter) to one (`edge`, `edge`) matrix each, one thread per output entry (the shader's
/// `matrix_entry`), with its host twin, in the host twin's dtype (the source of
/// `maps_wgsl` in that dtype); the caller sets its cost.
pub(super) fn matrix_map(
    entry: &'static str,
    width: usize,
    edge: usize,
    host: FisherMap,
) -> Kernel {
    let (input, output) = host.words();
    let dtype = host.dtype();
    Kernel {
        entry,
        inputs: vec![Input::PerItem(input)],
        output: Output::PerItem(output),
        params: vec![width as u32, 0, 0, 0],
        dispatch: Dispatch::Linear {
            threads_per_item: (edge * edge) as u32,
        },
        host: Some(Arc::new(host)),
        dtype,
        ..Kernel::map(entry, Family::InformationGeometry, maps_wgsl::source(dtype))
    }
}

fn check_out<T>(out: &[T], n: usize, k: usize) -> Result<()> {
    if out.len() != n * k * k {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({n}, {k}, {k})"),
            actual: format!("{} floats", out.len()),
        });
    }
    Ok(())
}

/// The checks of host (N, `k`) `values`, logits when `logits` else probabilities, that
/// need no context and no `out`: their shape and values, in the words of
/// [`fisher_categorical_probs`] / [`fisher_categorical_logits`]. A driver splitting one call
/// over several contexts runs them on the whole call first.
pub fn check_categorical_operands<T: Value>(values: &[T], k: usize, logits: bool) -> Result<()> {
    let name = if logits { "logits" } else { "probs" };
    checks::rows(name, values, k, MAX_CATEGORIES)?;
    check_values(values, k, logits)
}

/// The value checks of (N, `k`) logits or probabilities.
fn check_values<T: Value>(values: &[T], k: usize, logits: bool) -> Result<()> {
    if logits {
        checks::finite("logits", values, k)
    } else {
        check_probs(values, k)
    }
}

/// The numpy path's checks of (N, `k`) probabilities, row by row.
pub(super) fn check_probs<T: Value>(probs: &[T], k: usize) -> Result<()> {
    checks::all_values("probs", probs, k, "finite values >= 0", |v| {
        let v: f64 = v.into();
        v.is_finite() && v >= 0.0
    })?;
    for (row, values) in probs.chunks_exact(k).enumerate() {
        let total: f64 = values.iter().map(|&v| v.into()).sum();
        if (total - 1.0).abs() > PROBS_SUM_TOLERANCE {
            return Err(Error::invalid(
                "probs",
                format!(
                    "expected rows summing to 1 (within {PROBS_SUM_TOLERANCE}), \
                     got {total} in row {row}"
                ),
            ));
        }
    }
    Ok(())
}

/// Per-sample Fisher information `diag(p) - p p^T` of row-major (N, `k`) probabilities
/// into `out` (N, k, k). Rows must be finite, non-negative and sum to 1 within
/// [`PROBS_SUM_TOLERANCE`]; errors name `probs`. Float64 values compute in float64 on the
/// devices that run it (a context of none refuses the call, naming its devices).
pub fn fisher_categorical_probs<T: Value>(
    ctx: &MultiGpuContext,
    probs: &[T],
    k: usize,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let n = checks::rows("probs", probs, k, MAX_CATEGORIES)?;
    check_out(out, n, k)?;
    let large = checks::values_in_parallel(probs.len());
    ctx.on_host_threads(large, || check_values(probs, k, false))?;
    outer_products(ctx, (probs, k), out, strategy)
}

/// `diag(p) - p p^T` of checked (N, `k`) probabilities into `out`.
fn outer_products<T: Value>(
    ctx: &MultiGpuContext,
    (probs, k): (&[T], usize),
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    ctx.run_map(
        &categorical_outer_in(k, T::DTYPE),
        &[bytemuck::cast_slice(probs)],
        bytemuck::cast_slice_mut(out),
        probs.len() / k,
        strategy,
    )
}

/// The same from row-major (N, `k`) finite logits: `p = softmax(logits)` per row, once on
/// the host in float64 (stable: the row maximum is subtracted before exponentiating) and
/// rounded to `T`, then `diag(p) - p p^T` on the devices. Returns the plan of the outer
/// products. Errors name `logits`.
pub fn fisher_categorical_logits<T: Value>(
    ctx: &MultiGpuContext,
    logits: &[T],
    k: usize,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let n = checks::rows("logits", logits, k, MAX_CATEGORIES)?;
    check_out(out, n, k)?;
    let large = checks::values_in_parallel(logits.len());
    ctx.on_host_threads(large, || check_values(logits, k, true))?;
    let mut probs = crate::alloc::zeroed::<T>("probs", n * k)?;
    crate::fisher::host_maps::softmax_rows(logits, k, &mut probs);
    outer_products(ctx, (&probs, k), out, strategy)
}
