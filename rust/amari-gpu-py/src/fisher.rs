//! Information-geometry kernels (Fisher information) on numpy arrays, and the empirical
//! Fisher matrix of resident scores; every result is written into the caller's `out` when
//! given.

use numpy::ndarray::{Ix2, Ix3};
use numpy::{PyArray2, PyArray3, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::arrays::{claim, contiguous, returned_into, run_into};
use crate::context::PyContext;
use crate::detach::run_detached;
use crate::plans::plan_record;
use crate::resident::PyDeviceArray;

type Matrices<'py> = (Bound<'py, PyArray3<f32>>, Bound<'py, PyAny>);

/// Empirical Fisher matrix of C-contiguous float32 (N, P) scores with optional (N,)
/// weights; returns the float64 (P, P) matrix and the plan.
#[pyfunction]
#[pyo3(signature = (ctx, scores, weights=None, strategy=None, out=None))]
fn fisher_information<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    scores: PyReadonlyArray2<'py, f32>,
    weights: Option<PyReadonlyArray1<'py, f32>>,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray2<f64>>>,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyAny>)> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let p = scores.as_array().ncols();
    let scores_slice = contiguous(&scores, "scores")?;
    let weights_slice = weights
        .as_ref()
        .map(|w| contiguous(w, "weights"))
        .transpose()?;
    let claimed = claim(py, Ix2(p, p), out)?;
    let inner = ctx.context(py)?;
    let fisher = run_detached(py, move || {
        amari_gpu::fisher::fisher_information(&inner, scores_slice, p, weights_slice, strategy)
    })?;
    let matrix = returned_into(py, Ix2(p, p), claimed, fisher.matrix)?;
    Ok((matrix, plan_record(py, &fisher.plan)?))
}

/// Empirical Fisher matrix of the resident (N, P) `scores` with optional C-contiguous
/// float32 (N,) weights, computed where the rows live; returns the float64 (P, P) matrix.
#[pyfunction]
#[pyo3(signature = (ctx, scores, weights=None, out=None))]
fn resident_fisher_information<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    scores: PyRef<'py, PyDeviceArray>,
    weights: Option<PyReadonlyArray1<'py, f32>>,
    out: Option<Bound<'py, PyArray2<f64>>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let p = scores.inner.cols();
    let weights_slice = weights
        .as_ref()
        .map(|w| contiguous(w, "weights"))
        .transpose()?;
    let claimed = claim(py, Ix2(p, p), out)?;
    let inner = ctx.context(py)?;
    let array = &scores.inner;
    let matrix = run_detached(py, move || {
        amari_gpu::fisher::fisher_information_resident(&inner, array, weights_slice)
    })?;
    returned_into(py, Ix2(p, p), claimed, matrix)
}

/// `diag(p) - p p^T` of the resident (N, K) `values` (probabilities, or logits when
/// `logits`) where their rows live: the resident (N, K*K) result, or `None` once written
/// into the resident `out`.
#[pyfunction]
#[pyo3(signature = (ctx, values, logits, out=None))]
fn resident_fisher_categorical(
    py: Python<'_>,
    ctx: &PyContext,
    values: PyRef<'_, PyDeviceArray>,
    logits: bool,
    out: Option<PyRef<'_, PyDeviceArray>>,
) -> PyResult<Option<PyDeviceArray>> {
    let inner = ctx.context(py)?;
    let array = &values.inner;
    let target = out.as_deref().map(|o| &o.inner);
    let result = run_detached(py, move || {
        amari_gpu::fisher::fisher_categorical_resident(&inner, array, logits, target)
    })?;
    Ok(result.map(|inner| PyDeviceArray { inner }))
}

/// The diagonal-Gaussian Fisher map with `mean` or `var` resident (each a DeviceArray or a
/// C-contiguous float32 (N, D) array): the resident (N, (2D)^2) result, or `None` once
/// written into the resident `out`.
#[pyfunction]
#[pyo3(signature = (ctx, mean, var, out=None))]
fn resident_fisher_gaussian(
    py: Python<'_>,
    ctx: &PyContext,
    mean: OperandArg<'_>,
    var: OperandArg<'_>,
    out: Option<PyRef<'_, PyDeviceArray>>,
) -> PyResult<Option<PyDeviceArray>> {
    let mean_rows = mean.rows("mean")?;
    let var_rows = var.rows("var")?;
    let inner = ctx.context(py)?;
    let target = out.as_deref().map(|o| &o.inner);
    let result = run_detached(py, move || {
        amari_gpu::fisher::fisher_gaussian_resident(&inner, mean_rows, var_rows, target)
    })?;
    Ok(result.map(|inner| PyDeviceArray { inner }))
}

/// One operand of the Gaussian map as Python passes it: a DeviceArray's rows, or host rows.
#[derive(FromPyObject)]
enum OperandArg<'py> {
    Resident(PyRef<'py, PyDeviceArray>),
    Host(PyReadonlyArray2<'py, f32>),
}

impl OperandArg<'_> {
    /// The core's view of the operand (host rows must be C-contiguous).
    fn rows(&self, name: &str) -> PyResult<amari_gpu::fisher::Rows<'_>> {
        use amari_gpu::fisher::Rows;
        Ok(match self {
            OperandArg::Resident(r) => Rows::Resident(&r.inner),
            OperandArg::Host(h) => Rows::Host(contiguous(h, name)?),
        })
    }
}

/// (N, K, K) float32 result of `work` writing into `out` or a zeroed buffer.
fn batched<'py>(
    py: Python<'py>,
    rows: usize,
    edge: usize,
    out: Option<Bound<'py, PyArray3<f32>>>,
    work: impl FnOnce(&mut [f32]) -> amari_gpu::Result<amari_gpu::Plan> + Send,
) -> PyResult<Matrices<'py>> {
    let (array, plan) = run_into(py, Ix3(rows, edge, edge), out, work)?;
    Ok((array, plan_record(py, &plan)?))
}

/// Per-sample categorical Fisher `diag(p) - p p^T` of C-contiguous float32 (N, K) `values`:
/// probabilities, or logits when `logits` is true (the Python package says which); returns
/// the (N, K, K) float32 batch and the plan.
#[pyfunction]
#[pyo3(signature = (ctx, values, logits, strategy=None, out=None))]
fn fisher_categorical<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    values: PyReadonlyArray2<'py, f32>,
    logits: bool,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray3<f32>>>,
) -> PyResult<Matrices<'py>> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let inner = ctx.context(py)?;
    let (rows, k) = values.as_array().dim();
    let data = contiguous(&values, if logits { "logits" } else { "probs" })?;
    batched(py, rows, k, out, move |out| {
        if logits {
            amari_gpu::fisher::fisher_categorical_logits(&inner, data, k, out, strategy)
        } else {
            amari_gpu::fisher::fisher_categorical_probs(&inner, data, k, out, strategy)
        }
    })
}

/// Per-sample Fisher matrix of diagonal Gaussians from C-contiguous float32 (N, D) `mean`
/// and `var` (the core checks `var` has the length of `mean`); returns the (N, 2D, 2D)
/// float32 batch and the plan.
#[pyfunction]
#[pyo3(signature = (ctx, mean, var, strategy=None, out=None))]
fn fisher_gaussian<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    mean: PyReadonlyArray2<'py, f32>,
    var: PyReadonlyArray2<'py, f32>,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray3<f32>>>,
) -> PyResult<Matrices<'py>> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let (rows, d) = mean.as_array().dim();
    let (mean_slice, var_slice) = (contiguous(&mean, "mean")?, contiguous(&var, "var")?);
    let inner = ctx.context(py)?;
    batched(py, rows, 2 * d, out, move |out| {
        amari_gpu::fisher::fisher_gaussian_diag(&inner, mean_slice, var_slice, d, out, strategy)
    })
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fisher_information, m)?)?;
    m.add_function(wrap_pyfunction!(resident_fisher_information, m)?)?;
    m.add_function(wrap_pyfunction!(resident_fisher_categorical, m)?)?;
    m.add_function(wrap_pyfunction!(resident_fisher_gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_categorical, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_gaussian, m)?)?;
    Ok(())
}
