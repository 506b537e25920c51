//! Maps core errors onto the Python exception hierarchy of `amari_gpu.errors`, which is
//! defined in Python because `ShapeError` derives from both `AmariGpuError` and `ValueError`.

use amari_gpu::Error;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The exception class `name` of `amari_gpu.errors`.
fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py
        .import("amari_gpu.errors")?
        .getattr(name)?
        .cast_into::<PyType>()?)
}

/// The Python exception for a core error.
pub fn to_pyerr(py: Python<'_>, error: Error) -> PyErr {
    let name = match &error {
        Error::NoAdapter(_) => "NoAdapterError",
        Error::DeviceLost { .. } | Error::NoHealthyDevice(_) => "DeviceLostError",
        Error::OutOfMemory { .. } | Error::HostOutOfMemory { .. } => "OutOfMemoryError",
        Error::Cancelled | Error::Closed | Error::Internal(_) => "AmariGpuError",
        Error::Shape { .. } | Error::Broadcast { .. } => "ShapeError",
        Error::InvalidArgument { .. } => "InvalidArgumentError",
        Error::KernelCompile(_) => "KernelCompileError",
    };
    match class(py, name) {
        Ok(cls) => PyErr::from_type(cls, error.to_string()),
        Err(import_error) => import_error,
    }
}
