//! Fisher information of the diagonal Gaussian family in the parameters
//! `(mu_1..mu_D, var_1..var_D)`: `block-diag(diag(1 / var), diag(1 / (2 var^2)))` per
//! sample. It does not depend on the mean, which is checked but not sent to the devices.

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};

use crate::dtype::Dtype;
use crate::fisher::host_maps::{FisherMap, Value};
use crate::kernel::Kernel;
use crate::plan::{Plan, Strategy};

use super::categorical::matrix_map;
use super::checks;

/// Largest D: one sample's (2D, 2D) output must fit the 128 MiB storage binding every
/// WebGPU device grants.
pub const MAX_GAUSSIAN_DIMENSIONS: usize = 2896;

/// The (2D, 2D) Fisher matrix of rows of `d` float32 variances, one thread per output entry.
pub fn gaussian_diag_kernel(d: usize) -> Kernel {
    gaussian_diag_in(d, Dtype::F32)
}

/// [`gaussian_diag_kernel`] in `dtype` (float32 or float64).
pub(super) fn gaussian_diag_in(d: usize, dtype: Dtype) -> Kernel {
    let edge = 2 * d;
    Kernel {
        // Two divisions per variance.
        flops_per_item: 2.0 * edge as f64,
        ..matrix_map("gaussian_diag", d, edge, FisherMap::GaussianDiag { d, dtype })
    }
}

/// Per-sample Fisher information of N diagonal Gaussians with row-major (N, `d`) `mean` and
/// `var` into `out` (N, 2d, 2d). `var` must be finite and > 0, `mean` finite and of the
/// same shape; errors name the argument. Float64 values compute in float64 on the devices
/// that run it (a context of none refuses the call, naming its devices).
pub fn fisher_gaussian_diag<T: Value>(
    ctx: &MultiGpuContext,
    mean: &[T],
    var: &[T],
    d: usize,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let n = check_shapes(mean, var, d)?;
    let edge = 2 * d;
    if out.len() != n * edge * edge {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({n}, {edge}, {edge})"),
            actual: format!("{} floats", out.len()),
        });
    }
    let large = checks::values_in_parallel(var.len());
    ctx.on_host_threads(large, || check_values(mean, var, d))?;
    ctx.run_map(
        &gaussian_diag_in(d, T::DTYPE),
        &[bytemuck::cast_slice(var)],
        bytemuck::cast_slice_mut(out),
        n,
        strategy,
    )
}

/// The checks of host (N, `d`) `mean` and `var` that need no context and no `out`, in the
/// words of [`fisher_gaussian_diag`]. A driver splitting one call over several contexts
/// runs them on the whole call first.
pub fn check_gaussian_operands<T: Value>(mean: &[T], var: &[T], d: usize) -> Result<()> {
    check_shapes(mean, var, d)?;
    check_values(mean, var, d)
}

/// The shapes of `mean` and `var`; returns N.
fn check_shapes<T>(mean: &[T], var: &[T], d: usize) -> Result<usize> {
    let n = checks::rows("mean", mean, d, MAX_GAUSSIAN_DIMENSIONS)?;
    checks::same_shape("var", var, n, Some(d))?;
    Ok(n)
}

/// The values of `mean` (finite) and `var` (finite and > 0).
fn check_values<T: Value>(mean: &[T], var: &[T], d: usize) -> Result<()> {
    checks::finite("mean", mean, d)?;
    checks::all_values("var", var, d, "finite values > 0", |v| {
        let v: f64 = v.into();
        v.is_finite() && v > 0.0
    })
}
