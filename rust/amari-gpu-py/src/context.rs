//! The native context class: opens devices and runs kernels on borrowed numpy arrays.

use std::sync::Arc;

use amari_gpu::{ContextOptions, MultiGpuContext};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::adapters::adapter_dict;
use crate::detach::run_detached;

/// A contiguous view of a float32 matrix, or a ValueError naming the argument.
fn contiguous<'a>(array: &'a PyReadonlyArray2<'_, f32>, name: &str) -> PyResult<&'a [f32]> {
    array.as_slice().map_err(|_| {
        PyValueError::new_err(format!("{name}: expected a C-contiguous float32 array"))
    })
}

/// Devices opened on the selected adapters.
#[pyclass(module = "amari_gpu._native", name = "Context", frozen)]
pub struct PyContext {
    inner: Arc<MultiGpuContext>,
}

#[pymethods]
impl PyContext {
    #[new]
    #[pyo3(signature = (backends=None, device_types=None, adapters=None, max_devices=None, devices_per_adapter=1, chunk_items=None, sync_timeout_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        backends: Option<Vec<String>>,
        device_types: Option<Vec<String>>,
        adapters: Option<Vec<usize>>,
        max_devices: Option<usize>,
        devices_per_adapter: usize,
        chunk_items: Option<usize>,
        sync_timeout_ms: Option<u64>,
    ) -> PyResult<Self> {
        let options = ContextOptions {
            backends,
            device_types,
            adapters,
            max_devices,
            devices_per_adapter,
            chunk_items,
            sync_timeout_ms,
        };
        let inner = run_detached(py, move || MultiGpuContext::new(options))?;
        Ok(PyContext {
            inner: Arc::new(inner),
        })
    }

    /// The open devices as dicts: `id` and `adapter` (the adapter's description).
    fn devices<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .devices()
            .iter()
            .map(|dev| {
                let d = PyDict::new(py);
                d.set_item("id", dev.id)?;
                d.set_item("adapter", adapter_dict(py, &dev.adapter)?)?;
                Ok(d)
            })
            .collect()
    }

    /// Cl(3,0) geometric product of two C-contiguous float32 (N, 8) arrays.
    fn geometric_product<'py>(
        &self,
        py: Python<'py>,
        a: PyReadonlyArray2<'py, f32>,
        b: PyReadonlyArray2<'py, f32>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let rows = a.as_array().nrows();
        for (name, array) in [("a", &a), ("b", &b)] {
            if array.as_array().dim() != (rows, amari_gpu::ga::CL3_BLADES) {
                let error = amari_gpu::Error::Shape {
                    argument: name.into(),
                    expected: format!("({rows}, {})", amari_gpu::ga::CL3_BLADES),
                    actual: format!("{:?}", array.as_array().dim()),
                };
                return Err(crate::errors::to_pyerr(py, error));
            }
        }
        let (a_slice, b_slice) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
        let ctx = Arc::clone(&self.inner);
        let out = run_detached(py, move || {
            // Zeroed allocation is lazily backed by the OS, so it costs nothing up front.
            let mut out = vec![0.0f32; a_slice.len()];
            amari_gpu::ga::geometric_product_cl3(&ctx, a_slice, b_slice, &mut out)?;
            Ok(out)
        })?;
        let array = Array2::from_shape_vec((rows, amari_gpu::ga::CL3_BLADES), out)
            .map_err(|e| PyValueError::new_err(format!("a: {e}")))?;
        Ok(array.into_pyarray(py))
    }
}
