//! Shared conversions for kernel bindings: contiguous views of numpy arrays, shape checks
//! that name the argument.

use numpy::ndarray::Dimension;
use numpy::{Element, PyArray, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;

use crate::detach::{run_sized, Sized};
use crate::errors::to_pyerr;
use crate::pool::pooled;

/// A contiguous view of an array, or a ValueError naming the argument.
pub fn contiguous<'a, T: Element, D: Dimension>(
    array: &'a numpy::PyReadonlyArray<'_, T, D>,
    name: &str,
) -> PyResult<&'a [T]> {
    array
        .as_slice()
        .map_err(|_| PyValueError::new_err(format!("{name}: expected a C-contiguous array")))
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

/// The array a kernel writes its result into: the caller's `out` (checked again here, for
/// callers of `_native` that bypass the package's checks) or a new one, which the call
/// writes whole: a large float one in reused memory (`pool`), else a zeroed one.
pub fn output<'py, T: Element, D: Dimension>(
    py: Python<'py>,
    dim: D,
    out: Option<Bound<'py, PyArray<T, D>>>,
) -> PyResult<Bound<'py, PyArray<T, D>>> {
    let Some(array) = out else {
        if let Some(array) = pooled::<T, D>(py, &dim)? {
            return Ok(array);
        }
        return zeros::<T, D>(py, "output", dim);
    };
    if array.shape() != dim.slice() {
        let error = amari_gpu::Error::Shape {
            argument: "out".into(),
            expected: format!("{:?}", dim.slice()),
            actual: format!("{:?}", array.shape()),
        };
        return Err(to_pyerr(py, error));
    }
    if !array.is_c_contiguous() {
        let error = amari_gpu::Error::invalid("out", "expected a C-contiguous array");
        return Err(to_pyerr(py, error));
    }
    Ok(array)
}

/// A mutable view of `array` (the argument `name`); the borrow fails when `array` is
/// read-only or overlaps an input the call holds (rust-numpy tracks borrows by memory
/// region).
pub(crate) fn writable<'py, T: Element, D: Dimension>(
    py: Python<'py>,
    name: &str,
    array: &Bound<'py, PyArray<T, D>>,
) -> PyResult<numpy::PyReadwriteArray<'py, T, D>> {
    array.try_readwrite().map_err(|e| {
        let reason = match e {
            numpy::BorrowError::NotWriteable => "expected a writeable array",
            _ => "expected an array that shares no memory with the inputs",
        };
        to_pyerr(py, amari_gpu::Error::invalid(name, reason))
    })
}

/// `error` with a note that the caller's `out` may hold part of the result: it was
/// raised after the work began writing into it. Exceptions other than the package's own
/// (KeyboardInterrupt) are left as they are; the docs say the same of them.
pub(crate) fn partly_written(py: Python<'_>, error: PyErr) -> PyErr {
    let Ok(root) = py
        .import("amari_gpu.errors")
        .and_then(|m| m.getattr("AmariGpuError"))
    else {
        return error;
    };
    if !error.is_instance(py, &root) {
        return error;
    }
    let message = format!(
        "{}; out may hold part of the result (the call failed after it began writing)",
        error.value(py)
    );
    let noted = PyErr::from_type(error.get_type(py), message);
    noted.set_cause(py, Some(error));
    noted
}

/// Runs `work` without the GIL on the output — the caller's `out`, or a new array of
/// shape `dim` — and returns that array with what `work` returned (usually the plan); on
/// the calling thread when `sized` says the call is short (see [`run_sized`]).
pub fn run_into<'py, T, D, R, F>(
    py: Python<'py>,
    (dim, sized): (D, Option<Sized<'_>>),
    out: Option<Bound<'py, PyArray<T, D>>>,
    work: F,
) -> PyResult<(Bound<'py, PyArray<T, D>>, R)>
where
    T: Element + Send,
    D: Dimension,
    R: Send,
    F: FnOnce(&mut [T]) -> amari_gpu::Result<R> + Send,
{
    let callers = out.is_some();
    let array = output(py, dim, out)?;
    let result = {
        let mut view = writable(py, "out", &array)?;
        let out = view
            .as_slice_mut()
            .map_err(|e| PyValueError::new_err(format!("out: {e}")))?;
        run_sized(py, sized, move || work(out))
    };
    match result {
        Ok(result) => Ok((array, result)),
        Err(error) if callers => Err(partly_written(py, error)),
        Err(error) => Err(error),
    }
}

/// The caller's `out` for a call whose core entry point allocates its own result (grids,
/// the reduced Fisher matrix), checked and borrowed before the work starts.
pub type Claimed<'py, T, D> = Option<numpy::PyReadwriteArray<'py, T, D>>;

/// Checks and borrows the caller's `out` (as [`run_into`] does) before any work.
pub fn claim<'py, T: Element, D: Dimension>(
    py: Python<'py>,
    dim: D,
    out: Option<Bound<'py, PyArray<T, D>>>,
) -> PyResult<Claimed<'py, T, D>> {
    match out {
        None => Ok(None),
        Some(out) => {
            let array = output(py, dim, Some(out))?;
            Ok(Some(writable(py, "out", &array)?))
        }
    }
}

/// Copies `data`, the result the core returned, into the claimed `out`, or wraps it in a
/// new array of shape `dim`.
pub fn returned_into<'py, T: Element + Copy, D: Dimension>(
    py: Python<'py>,
    dim: D,
    claimed: Claimed<'py, T, D>,
    data: Vec<T>,
) -> PyResult<Bound<'py, PyArray<T, D>>> {
    let Some(mut view) = claimed else {
        let array = numpy::ndarray::Array::from_shape_vec(dim, data)
            .map_err(|e| PyValueError::new_err(format!("output: {e}")))?;
        return Ok(numpy::IntoPyArray::into_pyarray(array, py));
    };
    let slice = view
        .as_slice_mut()
        .map_err(|e| PyValueError::new_err(format!("out: {e}")))?;
    if slice.len() != data.len() {
        return Err(PyValueError::new_err(format!(
            "out: expected {} elements, the result has {}",
            slice.len(),
            data.len()
        )));
    }
    slice.copy_from_slice(&data);
    let array: Bound<'py, PyArray<T, D>> = (**view).clone();
    Ok(array)
}
