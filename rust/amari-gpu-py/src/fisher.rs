//! Information-geometry kernels (Fisher information), one function per operation for
//! numpy arrays and DeviceArrays alike; every result is written into the caller's `out`
//! when given.

use amari_gpu::ResidentOperand as Operand;
use numpy::ndarray::{Ix2, Ix3};
use numpy::{PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::arrays::{claim, contiguous, returned_into};
use crate::context::PyContext;
use crate::detach::{run_sized, Sized};
use crate::errors::to_pyerr;
use crate::resident::{run_to, PyDeviceArray, PyOperand, PyOut, Returned};

/// The plan a call followed, as a dict (None when it ran where resident rows live).
type Plan<'py> = Option<Bound<'py, PyAny>>;

/// The core's view of an operand: a DeviceArray's rows, or host rows (C-contiguous), and
/// its width.
fn operand<'a>(
    o: &'a PyOperand<'_>,
    held: &'a Option<PyRef<'_, PyDeviceArray>>,
    name: &str,
) -> PyResult<(Operand<'a>, usize)> {
    Ok(match (o, held) {
        (PyOperand::Host(h), _) => (Operand::Host(contiguous(h, name)?), h.as_array().ncols()),
        (PyOperand::Resident(_), Some(r)) => (Operand::Resident(&r.inner), r.inner.cols()),
        (PyOperand::Resident(r), None) => {
            let error = amari_gpu::Error::Internal(format!("{name}: DeviceArray not borrowed"));
            return Err(to_pyerr(r.py(), error));
        }
    })
}

/// The borrow of a DeviceArray operand (None for host rows).
fn held<'py>(o: &PyOperand<'py>) -> Option<PyRef<'py, PyDeviceArray>> {
    match o {
        PyOperand::Resident(r) => Some(r.borrow()),
        PyOperand::Host(_) => None,
    }
}

/// The rows of an operand.
fn rows(o: &PyOperand<'_>) -> usize {
    match o {
        PyOperand::Resident(r) => r.get().inner.rows(),
        PyOperand::Host(h) => h.as_array().nrows(),
    }
}

/// Empirical Fisher matrix of (N, P) `scores` (a DeviceArray, reduced where its rows live,
/// or C-contiguous float32 rows) with optional (N,) weights; returns the float64 (P, P)
/// matrix and the plan (None for a DeviceArray).
#[pyfunction]
#[pyo3(signature = (ctx, scores, weights=None, strategy=None, out=None))]
fn fisher_information<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    scores: PyOperand<'py>,
    weights: Option<PyReadonlyArray1<'py, f32>>,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray2<f64>>>,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Plan<'py>)> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let scores_operand = scores;
    let borrowed = held(&scores_operand);
    let (scores, p) = operand(&scores_operand, &borrowed, "scores")?;
    let weights_slice = weights
        .as_ref()
        .map(|w| contiguous(w, "weights"))
        .transpose()?;
    let claimed = claim(py, Ix2(p, p), out)?;
    let inner = ctx.context(py)?;
    let sized = Sized {
        calls: &ctx.short,
        size: rows(&scores_operand) * p,
    };
    let (matrix, plan) = run_sized(py, Some(sized), move || {
        amari_gpu::fisher::fisher_information_of(&inner, scores, p, weights_slice, strategy)
    })?;
    let matrix = returned_into(py, Ix2(p, p), claimed, matrix)?;
    let plan = plan.map(|p| ctx.plans.record(py, &p)).transpose()?;
    Ok((matrix, plan))
}

/// Per-sample categorical Fisher `diag(p) - p p^T` of (N, K) `values` (a DeviceArray or
/// C-contiguous float32 rows): probabilities, or logits when `logits` is true (the Python
/// package says which). The (N, K, K) float32 result is a numpy array, a new DeviceArray
/// (K rows per sample) for DeviceArray `values`, or written into `out`; with the plan.
#[pyfunction]
#[pyo3(signature = (ctx, values, logits, strategy=None, out=None))]
fn fisher_categorical<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    values: PyOperand<'py>,
    logits: bool,
    strategy: Option<&str>,
    out: Option<PyOut<'py, Ix3>>,
) -> Returned<'py> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let n = rows(&values);
    let borrowed = held(&values);
    let (data, k) = operand(&values, &borrowed, if logits { "logits" } else { "probs" })?;
    let resident = borrowed.is_some();
    run_to(py, ctx, resident, (Ix3(n, k, k), out), move |inner, out| {
        amari_gpu::fisher::fisher_categorical(inner, data, (k, logits), out, strategy)
    })
}

/// Per-sample Fisher matrix of diagonal Gaussians from (N, D) `mean` and `var`, each a
/// DeviceArray or C-contiguous float32 rows (the core checks `var` has the shape of
/// `mean`). The (N, 2D, 2D) float32 result is a numpy array, a new DeviceArray (2D rows
/// per sample) when an operand is one, or written into `out`; with the plan.
#[pyfunction]
#[pyo3(signature = (ctx, mean, var, strategy=None, out=None))]
fn fisher_gaussian<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    mean: PyOperand<'py>,
    var: PyOperand<'py>,
    strategy: Option<&str>,
    out: Option<PyOut<'py, Ix3>>,
) -> Returned<'py> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let (n, var_n) = (rows(&mean), rows(&var));
    let (mean_held, var_held) = (held(&mean), held(&var));
    let (mean_rows, d) = operand(&mean, &mean_held, "mean")?;
    let (var_rows, var_d) = operand(&var, &var_held, "var")?;
    let resident = mean_held.is_some() || var_held.is_some();
    let (operands, shapes) = ((mean_rows, var_rows), [(n, d), (var_n, var_d)]);
    let dim = Ix3(n, 2 * d, 2 * d);
    run_to(py, ctx, resident, (dim, out), move |inner, out| {
        amari_gpu::fisher::fisher_gaussian(inner, operands, shapes, out, strategy)
    })
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fisher_information, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_categorical, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_gaussian, m)?)?;
    Ok(())
}
