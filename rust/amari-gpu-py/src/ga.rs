//! Geometric-algebra kernels on numpy batches.

use std::sync::Arc;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{check_batches, contiguous, parse_strategy};
use crate::context::PyContext;
use crate::detach::run_detached;
use crate::plans::plan_dict;

/// Cl(3,0) geometric product of two C-contiguous float32 (N, 8) arrays; returns the
/// product and the plan that was followed.
#[pyfunction]
#[pyo3(signature = (ctx, a, b, strategy=None))]
fn geometric_product<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    a: PyReadonlyArray2<'py, f32>,
    b: PyReadonlyArray2<'py, f32>,
    strategy: Option<&str>,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyDict>)> {
    let strategy = parse_strategy(py, strategy)?;
    let rows = check_batches(py, &[("a", &a), ("b", &b)], amari_gpu::ga::CL3_BLADES)?;
    let (a_slice, b_slice) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
    let inner = Arc::clone(&ctx.inner);
    let (out, plan) = run_detached(py, move || {
        // Zeroed allocation is lazily backed by the OS, so it costs nothing up front.
        let mut out = vec![0.0f32; a_slice.len()];
        let plan =
            amari_gpu::ga::geometric_product_cl3(&inner, a_slice, b_slice, &mut out, strategy)?;
        Ok((out, plan))
    })?;
    let array = Array2::from_shape_vec((rows, amari_gpu::ga::CL3_BLADES), out)
        .map_err(|e| PyValueError::new_err(format!("a: {e}")))?;
    Ok((array.into_pyarray(py), plan_dict(py, &plan)?))
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(geometric_product, m)?)?;
    Ok(())
}
