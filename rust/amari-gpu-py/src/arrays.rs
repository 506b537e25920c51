//! Shared conversions for kernel bindings: contiguous views of numpy arrays, shape checks
//! that name the argument.

use numpy::ndarray::{Array, Dimension};
use numpy::{Element, IntoPyArray, PyArray, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::detach::run_detached;
use crate::errors::to_pyerr;

/// A contiguous view of an array, or a ValueError naming the argument.
pub fn contiguous<'a, T: Element, D: Dimension>(
    array: &'a numpy::PyReadonlyArray<'_, T, D>,
    name: &str,
) -> PyResult<&'a [T]> {
    array
        .as_slice()
        .map_err(|_| PyValueError::new_err(format!("{name}: expected a C-contiguous array")))
}

/// Checks that every array is (rows, width) with the rows of the first, naming the first
/// that is not; returns the rows.
pub fn check_batches(
    py: Python<'_>,
    arrays: &[(&str, &PyReadonlyArray2<'_, f32>)],
    width: usize,
) -> PyResult<usize> {
    let rows = arrays[0].1.as_array().nrows();
    for (name, array) in arrays {
        if array.as_array().dim() != (rows, width) {
            let error = amari_gpu::Error::Shape {
                argument: name.to_string(),
                expected: format!("({rows}, {width})"),
                actual: format!("{:?}", array.as_array().dim()),
            };
            return Err(to_pyerr(py, error));
        }
    }
    Ok(rows)
}

/// Runs `work` without the GIL on a zeroed output of shape `dim` and returns the output as
/// a numpy array with what `work` returned (usually the plan).
pub fn run_into<'py, T, D, R, F>(
    py: Python<'py>,
    dim: D,
    work: F,
) -> PyResult<(Bound<'py, PyArray<T, D>>, R)>
where
    T: Element + Default + Clone + Send,
    D: Dimension,
    R: Send,
    F: FnOnce(&mut [T]) -> amari_gpu::Result<R> + Send,
{
    let len = dim.size();
    let (out, result) = run_detached(py, move || {
        // Zeroed allocation is lazily backed by the OS, so it costs nothing up front.
        let mut out = vec![T::default(); len];
        let result = work(&mut out)?;
        Ok((out, result))
    })?;
    let array = Array::from_shape_vec(dim, out)
        .map_err(|e| PyValueError::new_err(format!("output: {e}")))?;
    Ok((array.into_pyarray(py), result))
}
