//! Shared conversions for kernel bindings: contiguous views of numpy arrays, shape checks
//! that name the argument.

use numpy::ndarray::Dimension;
use numpy::{Element, PyArray, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::{PyMemoryError, PyValueError};
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

/// A zeroed numpy array of shape `dim`, allocated by numpy (lazily backed by the OS);
/// `OutOfMemoryError` naming `argument` and the bytes asked when it cannot be.
pub fn zeros<'py, T: Element, D: Dimension>(
    py: Python<'py>,
    argument: &str,
    dim: D,
) -> PyResult<Bound<'py, PyArray<T, D>>> {
    let shape = dim.slice().to_vec();
    let bytes = shape
        .iter()
        .fold(std::mem::size_of::<T>() as u128, |b, &d| {
            b.saturating_mul(d as u128)
        });
    let too_big = || {
        let error = amari_gpu::Error::HostOutOfMemory {
            argument: argument.to_string(),
            bytes,
        };
        to_pyerr(py, error)
    };
    if bytes > isize::MAX as u128 {
        return Err(too_big());
    }
    let array = py
        .import("numpy")?
        .getattr("zeros")?
        .call1((shape, numpy::dtype::<T>(py)))
        .map_err(|e| {
            if e.is_instance_of::<PyMemoryError>(py) {
                too_big()
            } else {
                e
            }
        })?;
    Ok(array.cast_into::<PyArray<T, D>>()?)
}

/// Runs `work` without the GIL on a zeroed output of shape `dim` and returns the output as
/// a numpy array with what `work` returned (usually the plan).
pub fn run_into<'py, T, D, R, F>(
    py: Python<'py>,
    dim: D,
    work: F,
) -> PyResult<(Bound<'py, PyArray<T, D>>, R)>
where
    T: Element + Send,
    D: Dimension,
    R: Send,
    F: FnOnce(&mut [T]) -> amari_gpu::Result<R> + Send,
{
    let array = zeros::<T, D>(py, "output", dim)?;
    let result = {
        let mut view = array.readwrite();
        let out = view
            .as_slice_mut()
            .map_err(|e| PyValueError::new_err(format!("output: {e}")))?;
        run_detached(py, move || work(out))?
    };
    Ok((array, result))
}
