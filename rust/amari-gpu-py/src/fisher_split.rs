//! The empirical Fisher call in three steps, for a cluster: `fisher_prepare` and
//! `fisher_finish` on the driver (no context), `fisher_partials` on each node for its run
//! of chunks of the whole problem's grid. float32 scores give float32 partials (summed in
//! float64 by `fisher_finish`), float64 scores float64 partials: the steps of one context's
//! call in each dtype.

use std::borrow::Cow;

use numpy::ndarray::Array2;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use amari_gpu::fisher::split::{self, Finish};
use amari_gpu::fisher::{self as core, information_shapes, information_shapes_f64};
use amari_gpu::ResidentOperand as Operand;

use crate::arrays::contiguous;
use crate::context::PyContext;
use crate::detach::run_detached;
use crate::errors::to_pyerr;
use crate::plans::plan_record;

/// The data of an owned (made-here) array; None for a view of the caller's.
fn owned(data: Cow<'_, [f32]>) -> Option<Vec<f32>> {
    match data {
        Cow::Owned(v) => Some(v),
        Cow::Borrowed(_) => None,
    }
}

/// Host rows of one of the dtypes the split call computes in.
#[derive(FromPyObject)]
enum Host<'py, T> {
    F32(T),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// The error of weights (or partials) of another dtype than the scores' (the package
/// converts them first).
fn mixed(argument: &str) -> PyErr {
    pyo3::exceptions::PyTypeError::new_err(format!(
        "{argument}: expected the dtype of the scores (float32 or float64)"
    ))
}

/// Checks C-contiguous (N, P) `scores` and optional (N,) `weights` of their dtype (their
/// shapes, then their values) as `fisher_information` does and returns what the devices
/// see: `scores` and `weights` (None when the input is used as given; weights are ones
/// when none were given), `n`, `p`, `chunk_items` of the whole problem's grid, and
/// `total`, `column_exponents`, `weight_exponent` for `fisher_finish`. float32 scores may
/// be scaled by exact powers of two; float64 ones never are (exponents 0).
#[pyfunction]
#[pyo3(signature = (scores, weights=None))]
fn fisher_prepare<'py>(
    py: Python<'py>,
    scores: Host<'py, PyReadonlyArrayDyn<'py, f32>>,
    weights: Option<Host<'py, PyReadonlyArrayDyn<'py, f32>>>,
) -> PyResult<Bound<'py, PyDict>> {
    match (scores, weights) {
        (Host::F32(s), None) => prepare_f32(py, s, None),
        (Host::F32(s), Some(Host::F32(w))) => prepare_f32(py, s, Some(w)),
        (Host::F64(s), None) => prepare_f64(py, s, None),
        (Host::F64(s), Some(Host::F64(w))) => prepare_f64(py, s, Some(w)),
        _ => Err(mixed("weights")),
    }
}

/// [`fisher_prepare`] of float64 scores.
fn prepare_f64<'py>(
    py: Python<'py>,
    scores: PyReadonlyArrayDyn<'py, f64>,
    weights: Option<PyReadonlyArrayDyn<'py, f64>>,
) -> PyResult<Bound<'py, PyDict>> {
    let weights_dims = weights.as_ref().map(|w| w.shape().to_vec());
    let (_, p) = information_shapes_f64(scores.shape(), weights_dims.as_deref())
        .map_err(|e| to_pyerr(py, e))?;
    let scores_slice = contiguous(&scores, "scores")?;
    let weights_slice = weights
        .as_ref()
        .map(|w| contiguous(w, "weights"))
        .transpose()?;
    let given = weights_slice.is_some();
    let (prepared, ones) = run_detached(py, move || {
        let prepared = core::prepare_f64(scores_slice, p, weights_slice)?;
        let ones = if given {
            None
        } else {
            Some(core::ones_f64(prepared.n)?)
        };
        Ok((prepared, ones))
    })?;
    let d = PyDict::new(py);
    d.set_item("scores", py.None())?;
    d.set_item("weights", ones.map(|v| PyArray1::from_vec(py, v)))?;
    d.set_item("n", prepared.n)?;
    d.set_item("p", p)?;
    d.set_item("chunk_items", prepared.chunk_items)?;
    d.set_item("total", prepared.total)?;
    d.set_item("column_exponents", vec![0i32; p])?;
    d.set_item("weight_exponent", 0i32)?;
    Ok(d)
}

/// [`fisher_prepare`] of float32 scores.
fn prepare_f32<'py>(
    py: Python<'py>,
    scores: PyReadonlyArrayDyn<'py, f32>,
    weights: Option<PyReadonlyArrayDyn<'py, f32>>,
) -> PyResult<Bound<'py, PyDict>> {
    let scores_slice = contiguous(&scores, "scores")?;
    let weights_dims = weights.as_ref().map(|w| w.shape().to_vec());
    let (_, p) = information_shapes(
        Operand::Host(scores_slice),
        scores.shape(),
        weights_dims.as_deref(),
    )
    .map_err(|e| to_pyerr(py, e))?;
    let weights_slice = weights
        .as_ref()
        .map(|w| contiguous(w, "weights"))
        .transpose()?;
    let (n, scaled, ones_or_scaled, chunk_items, finish) = run_detached(py, move || {
        let prepared = split::prepare(scores_slice, p, weights_slice)?;
        Ok((
            prepared.n,
            owned(prepared.scores),
            owned(prepared.weights),
            prepared.chunk_items,
            prepared.finish,
        ))
    })?;
    let d = PyDict::new(py);
    let scores_out = match scaled {
        Some(v) => Some(
            Array2::from_shape_vec((n, p), v)
                .map_err(|e| PyValueError::new_err(format!("scores: {e}")))?
                .into_pyarray(py),
        ),
        None => None,
    };
    d.set_item("scores", scores_out)?;
    d.set_item("weights", ones_or_scaled.map(|v| PyArray1::from_vec(py, v)))?;
    d.set_item("n", n)?;
    d.set_item("p", p)?;
    d.set_item("chunk_items", chunk_items)?;
    d.set_item("total", finish.total)?;
    d.set_item("column_exponents", finish.column_exponents)?;
    d.set_item("weight_exponent", finish.weight_exponent)?;
    Ok(d)
}

/// Per-chunk partials (one row per chunk, in chunk order; float32 for float32 scores,
/// float64 for float64 ones) of prepared (n, P) `scores` and (n,) `weights` of their dtype
/// cut into chunks of `chunk_items` rows, and the plan.
#[pyfunction]
#[pyo3(signature = (ctx, scores, weights, chunk_items, strategy=None))]
fn fisher_partials<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    scores: Host<'py, PyReadonlyArray2<'py, f32>>,
    weights: Host<'py, PyReadonlyArray1<'py, f32>>,
    chunk_items: usize,
    strategy: Option<&str>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let inner = ctx.context(py)?;
    let (values, plan) = match (scores, weights) {
        (Host::F32(s), Host::F32(w)) => {
            let p = s.as_array().ncols();
            let (s, w) = (contiguous(&s, "scores")?, contiguous(&w, "weights")?);
            let ran = run_detached(py, move || {
                split::partials(&inner, s, p, w, chunk_items, strategy)
            })?;
            (Partials::F32(ran.partials), ran.plan)
        }
        (Host::F64(s), Host::F64(w)) => {
            let (_, p) =
                information_shapes_f64(s.shape(), Some(w.shape())).map_err(|e| to_pyerr(py, e))?;
            let (s, w) = (contiguous(&s, "scores")?, contiguous(&w, "weights")?);
            let ran = run_detached(py, move || {
                core::partials_f64(&inner, s, p, w, Some(chunk_items), strategy)
            })?;
            // The partials' words read as the float64 values they hold.
            let values = (0..ran.partials.len() / 2)
                .map(|k| amari_gpu::dtype::read_f64(&ran.partials, k))
                .collect();
            (Partials::F64(values), ran.plan)
        }
        _ => return Err(mixed("weights")),
    };
    let chunks = plan.n_chunks as usize;
    let array = match values {
        Partials::F32(v) => per_chunk(py, chunks, v)?,
        Partials::F64(v) => per_chunk(py, chunks, v)?,
    };
    Ok((array, plan_record(py, &plan)?))
}

/// A run's partials, in the scores' dtype.
enum Partials {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// `values` as an array of one row per chunk.
fn per_chunk<'py, T: numpy::Element>(
    py: Python<'py>,
    chunks: usize,
    values: Vec<T>,
) -> PyResult<Bound<'py, PyAny>> {
    let words = values.len().checked_div(chunks).unwrap_or(0);
    let array = Array2::from_shape_vec((chunks, words), values)
        .map_err(|e| PyValueError::new_err(format!("partials: {e}")))?;
    Ok(array.into_pyarray(py).into_any())
}

/// The float64 (P, P) Fisher matrix from every chunk's partials (rows of `partials`, in
/// chunk order: float32 ones of float32 scores, float64 ones of float64 scores) and what
/// `fisher_prepare` returned.
#[pyfunction]
fn fisher_finish<'py>(
    py: Python<'py>,
    partials: Host<'py, PyReadonlyArray2<'py, f32>>,
    p: usize,
    total: f64,
    column_exponents: Vec<i32>,
    weight_exponent: i32,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let partials = match partials {
        Host::F32(partials) => partials,
        Host::F64(partials) => {
            if column_exponents.iter().any(|&e| e != 0) || weight_exponent != 0 {
                return Err(PyValueError::new_err(
                    "column_exponents, weight_exponent: expected zeros with float64 partials \
                     (float64 scores are never scaled)",
                ));
            }
            let values = contiguous(&partials, "partials")?;
            let words = amari_gpu::dtype::f64_words(values);
            let matrix = run_detached(py, move || core::finish_f64(p, total, words))?;
            let matrix = Array2::from_shape_vec((p, p), matrix)
                .map_err(|e| PyValueError::new_err(format!("partials: {e}")))?;
            return Ok(matrix.into_pyarray(py));
        }
    };
    let words = contiguous(&partials, "partials")?;
    let finish = Finish {
        p,
        total,
        column_exponents,
        weight_exponent,
    };
    let matrix = run_detached(py, move || split::finish(&finish, words))?;
    let matrix = Array2::from_shape_vec((p, p), matrix)
        .map_err(|e| PyValueError::new_err(format!("partials: {e}")))?;
    Ok(matrix.into_pyarray(py))
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fisher_prepare, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_partials, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_finish, m)?)?;
    Ok(())
}
