//! The empirical Fisher call in three steps, for a cluster: `fisher_prepare` and
//! `fisher_finish` on the driver (no context), `fisher_partials` on each node for its run
//! of chunks of the whole problem's grid.

use std::borrow::Cow;

use numpy::ndarray::Array2;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArrayDyn,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use amari_gpu::fisher::information_shapes;
use amari_gpu::fisher::split::{self, Finish};
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

/// Checks C-contiguous float32 (N, P) `scores` and optional (N,) `weights` (their shapes,
/// then their values) as `fisher_information` does and returns what the devices see: `scores` and `weights`
/// (None when the input is used as given; weights are ones when none were given), `n`,
/// `p`, `chunk_items` of the whole problem's grid, and `total`, `column_exponents`,
/// `weight_exponent` for `fisher_finish`.
#[pyfunction]
#[pyo3(signature = (scores, weights=None))]
fn fisher_prepare<'py>(
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

/// Per-chunk float32 partials (one row per chunk, in chunk order) of prepared (n, P)
/// `scores` and (n,) `weights` cut into chunks of `chunk_items` rows, and the plan.
#[pyfunction]
#[pyo3(signature = (ctx, scores, weights, chunk_items, strategy=None))]
fn fisher_partials<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    scores: PyReadonlyArray2<'py, f32>,
    weights: PyReadonlyArray1<'py, f32>,
    chunk_items: usize,
    strategy: Option<&str>,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyAny>)> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let p = scores.as_array().ncols();
    let scores_slice = contiguous(&scores, "scores")?;
    let weights_slice = contiguous(&weights, "weights")?;
    let inner = ctx.context(py)?;
    let ran = run_detached(py, move || {
        split::partials(
            &inner,
            scores_slice,
            p,
            weights_slice,
            chunk_items,
            strategy,
        )
    })?;
    let chunks = ran.plan.n_chunks as usize;
    let words = ran.partials.len().checked_div(chunks).unwrap_or(0);
    let array = Array2::from_shape_vec((chunks, words), ran.partials)
        .map_err(|e| PyValueError::new_err(format!("partials: {e}")))?;
    Ok((array.into_pyarray(py), plan_record(py, &ran.plan)?))
}

/// The float64 (P, P) Fisher matrix from every chunk's partials (rows of `partials`, in
/// chunk order) and what `fisher_prepare` returned.
#[pyfunction]
fn fisher_finish<'py>(
    py: Python<'py>,
    partials: PyReadonlyArray2<'py, f32>,
    p: usize,
    total: f64,
    column_exponents: Vec<i32>,
    weight_exponent: i32,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
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
