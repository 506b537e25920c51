//! Tropical products and shortest paths on numpy arrays; every result is written into the
//! caller's `out` when given. The matrix-vector and matrix products also run on a resident
//! `a`, checked from its per-row statistics.

use amari_gpu::tropical::{self, BatchShape, ResidentProduct, Semiring};
use numpy::ndarray::{Ix2, Ix3};
use numpy::{PyArray2, PyArray3, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;

use crate::arrays::{contiguous, run_into};
use crate::context::PyContext;
use crate::detach::run_detached;
use crate::errors::to_pyerr;
use crate::plans::plan_record;
use crate::resident::PyDeviceArray;

type Returned<'py, A> = PyResult<(Bound<'py, A>, Bound<'py, PyAny>)>;

/// Batched tropical product of C-contiguous float32 (batch, m, k) and (batch, k, n)
/// arrays; returns the (batch, m, n) product and the plan that was followed.
#[pyfunction]
#[pyo3(signature = (ctx, a, b, semiring, strategy=None, out=None))]
fn tropical_matmul<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    a: PyReadonlyArray3<'py, f32>,
    b: PyReadonlyArray3<'py, f32>,
    semiring: &str,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray3<f32>>>,
) -> Returned<'py, PyArray3<f32>> {
    let semiring = Semiring::parse(semiring).map_err(|e| to_pyerr(py, e))?;
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let (batch, m, k) = a.as_array().dim();
    let n = b.as_array().dim().2;
    let shape = BatchShape { batch, m, k, n };
    let (a_slice, b_slice) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
    let inner = ctx.context(py)?;
    let (array, plan) = run_into(py, Ix3(batch, m, n), out, move |out| {
        tropical::tropical_matmul(&inner, a_slice, b_slice, shape, semiring, out, strategy)
    })?;
    Ok((array, plan_record(py, &plan)?))
}

/// Batched tropical matrix-vector product of C-contiguous float32 (batch, m, k) and
/// (batch, k) arrays; returns the (batch, m) product and the plan.
#[pyfunction]
#[pyo3(signature = (ctx, a, x, semiring, strategy=None, out=None))]
fn tropical_matvec<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    a: PyReadonlyArray3<'py, f32>,
    x: PyReadonlyArray2<'py, f32>,
    semiring: &str,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray2<f32>>>,
) -> Returned<'py, PyArray2<f32>> {
    let semiring = Semiring::parse(semiring).map_err(|e| to_pyerr(py, e))?;
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let (batch, m, k) = a.as_array().dim();
    let shape = BatchShape { batch, m, k, n: 1 };
    let (a_slice, x_slice) = (contiguous(&a, "a")?, contiguous(&x, "x")?);
    let inner = ctx.context(py)?;
    let (array, plan) = run_into(py, Ix2(batch, m), out, move |out| {
        tropical::tropical_matvec(&inner, a_slice, x_slice, shape, semiring, out, strategy)
    })?;
    Ok((array, plan_record(py, &plan)?))
}

/// All-pairs shortest paths of the digraph with C-contiguous float32 (n, n) weights;
/// returns the (n, n) distances and the plan of the last product run.
#[pyfunction]
#[pyo3(signature = (ctx, w, strategy=None, out=None))]
fn shortest_paths<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    w: PyReadonlyArray2<'py, f32>,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray2<f32>>>,
) -> Returned<'py, PyArray2<f32>> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let n = w.as_array().nrows();
    let w_slice = contiguous(&w, "w")?;
    let inner = ctx.context(py)?;
    let (array, plan) = run_into(py, Ix2(n, n), out, move |out| {
        tropical::shortest_paths(&inner, w_slice, n, out, strategy)
    })?;
    Ok((array, plan_record(py, &plan)?))
}

/// Batched tropical matrix-vector product where the rows of the resident `a` live: `a`
/// holds `batch * m` rows of k words, `x` is a C-contiguous float32 (batch, k) array.
/// Returns the resident (batch * m, 1) result. NaN and overflow are the caller's checks.
#[pyfunction]
fn resident_tropical_matvec(
    py: Python<'_>,
    ctx: &PyContext,
    a: PyRef<'_, PyDeviceArray>,
    x: PyReadonlyArray2<'_, f32>,
    semiring: &str,
) -> PyResult<PyDeviceArray> {
    let semiring = Semiring::parse(semiring).map_err(|e| to_pyerr(py, e))?;
    let (batch, k) = x.as_array().dim();
    let m = a.inner.rows() / batch.max(1);
    let shape = BatchShape { batch, m, k, n: 1 };
    let x_slice = contiguous(&x, "x")?;
    let inner = ctx.context(py)?;
    let array = &a.inner;
    let result = run_detached(py, move || {
        tropical::tropical_matvec_resident(&inner, array, x_slice, shape, semiring)
    })?;
    Ok(PyDeviceArray { inner: result })
}

/// Per row of the resident `a`: the first NaN column (-1 without one) and the largest
/// finite magnitude, as a resident (rows, 2) array with `a`'s sharding.
#[pyfunction]
fn resident_tropical_row_stats(
    py: Python<'_>,
    ctx: &PyContext,
    a: PyRef<'_, PyDeviceArray>,
) -> PyResult<PyDeviceArray> {
    let inner = ctx.context(py)?;
    let array = &a.inner;
    let result = run_detached(py, move || {
        tropical::tropical_row_stats_resident(&inner, array)
    })?;
    Ok(PyDeviceArray { inner: result })
}

/// Batched tropical product where the rows of the resident `a` live: `a` holds
/// `batch * m` rows of k words, `b` is a C-contiguous float32 (batch, k, n) array. Returns
/// the resident (batch * m, n) result, or `None` once written into the resident `out`.
/// NaN and overflow are the caller's checks.
#[pyfunction]
#[pyo3(signature = (ctx, a, b, semiring, out=None))]
fn resident_tropical_matmul(
    py: Python<'_>,
    ctx: &PyContext,
    a: PyRef<'_, PyDeviceArray>,
    b: PyReadonlyArray3<'_, f32>,
    semiring: &str,
    out: Option<PyRef<'_, PyDeviceArray>>,
) -> PyResult<Option<PyDeviceArray>> {
    let semiring = Semiring::parse(semiring).map_err(|e| to_pyerr(py, e))?;
    let (batch, k, n) = b.as_array().dim();
    let m = a.inner.rows() / batch.max(1);
    let shape = BatchShape { batch, m, k, n };
    let b_slice = contiguous(&b, "b")?;
    let inner = ctx.context(py)?;
    let product = ResidentProduct {
        a: &a.inner,
        b: b_slice,
        shape,
        semiring,
    };
    let target = out.as_deref().map(|o| &o.inner);
    let result = run_detached(py, move || {
        tropical::tropical_matmul_resident(&inner, product, target)
    })?;
    Ok(result.map(|inner| PyDeviceArray { inner }))
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(resident_tropical_matvec, m)?)?;
    m.add_function(wrap_pyfunction!(resident_tropical_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(resident_tropical_row_stats, m)?)?;
    m.add_function(wrap_pyfunction!(tropical_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(tropical_matvec, m)?)?;
    m.add_function(wrap_pyfunction!(shortest_paths, m)?)?;
    Ok(())
}
