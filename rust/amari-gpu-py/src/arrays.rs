//! Shared conversions for kernel bindings: contiguous views of numpy arrays, shape checks
//! that name the argument, strategy names.

use amari_gpu::Strategy;
use numpy::{Element, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::to_pyerr;

/// A contiguous view of an array, or a ValueError naming the argument.
pub fn contiguous<'a, T: Element, D: numpy::ndarray::Dimension>(
    array: &'a numpy::PyReadonlyArray<'_, T, D>,
    name: &str,
) -> PyResult<&'a [T]> {
    array
        .as_slice()
        .map_err(|_| PyValueError::new_err(format!("{name}: expected a C-contiguous array")))
}

/// The strategy named `name`, if any, as the core's enum.
pub fn parse_strategy(py: Python<'_>, name: Option<&str>) -> PyResult<Option<Strategy>> {
    name.map(Strategy::parse)
        .transpose()
        .map_err(|e| to_pyerr(py, e))
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
