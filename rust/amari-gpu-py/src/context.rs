//! The native context class: opens devices, plans workloads and runs kernels on borrowed
//! numpy arrays with the GIL released.

use std::sync::Arc;

use amari_gpu::{ContextOptions, MultiGpuContext, Strategy, Workload};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::adapters::adapter_dict;
use crate::detach::run_detached;
use crate::errors::to_pyerr;
use crate::plans::{capabilities_dict, plan_dict, stats_dict};

/// A contiguous view of a float32 matrix, or a ValueError naming the argument.
fn contiguous<'a>(array: &'a PyReadonlyArray2<'_, f32>, name: &str) -> PyResult<&'a [f32]> {
    array.as_slice().map_err(|_| {
        PyValueError::new_err(format!("{name}: expected a C-contiguous float32 array"))
    })
}

fn parse_strategy(py: Python<'_>, name: Option<&str>) -> PyResult<Option<Strategy>> {
    name.map(Strategy::parse)
        .transpose()
        .map_err(|e| to_pyerr(py, e))
}

/// Checks that every array is (rows, width), naming the first that is not.
fn check_batches(
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

/// Devices opened on the selected adapters.
#[pyclass(module = "amari_gpu._native", name = "Context", frozen)]
pub struct PyContext {
    inner: Arc<MultiGpuContext>,
}

#[pymethods]
impl PyContext {
    #[new]
    #[pyo3(signature = (backends=None, device_types=None, adapters=None, max_devices=None, devices_per_adapter=1, chunk_items=None, sync_timeout_ms=None, strategy="auto"))]
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
        strategy: &str,
    ) -> PyResult<Self> {
        let strategy = Strategy::parse(strategy).map_err(|e| to_pyerr(py, e))?;
        let options = ContextOptions {
            backends,
            device_types,
            adapters,
            max_devices,
            devices_per_adapter,
            chunk_items,
            sync_timeout_ms,
            strategy,
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

    /// Measures (or loads) every device's capabilities.
    #[pyo3(signature = (force=false))]
    fn calibrate<'py>(&self, py: Python<'py>, force: bool) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let ctx = Arc::clone(&self.inner);
        let caps = run_detached(py, move || ctx.calibrate(force))?;
        caps.iter()
            .enumerate()
            .map(|(id, c)| capabilities_dict(py, id, c))
            .collect()
    }

    /// One device's capabilities (calibrating first if needed).
    fn capabilities<'py>(&self, py: Python<'py>, device_id: usize) -> PyResult<Bound<'py, PyDict>> {
        let ctx = Arc::clone(&self.inner);
        let caps = run_detached(py, move || ctx.capabilities(device_id))?;
        capabilities_dict(py, device_id, &caps)
    }

    /// The plan for a workload, without running it.
    #[pyo3(signature = (kernel, items, bytes_in_per_item, bytes_out_per_item, flops_per_item, strategy=None))]
    #[allow(clippy::too_many_arguments)]
    fn distribute_workload<'py>(
        &self,
        py: Python<'py>,
        kernel: String,
        items: u64,
        bytes_in_per_item: f64,
        bytes_out_per_item: f64,
        flops_per_item: f64,
        strategy: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let strategy = parse_strategy(py, strategy)?;
        let workload = Workload {
            kernel,
            items,
            bytes_in_per_item,
            bytes_out_per_item,
            flops_per_item,
        };
        let ctx = Arc::clone(&self.inner);
        let plan = run_detached(py, move || ctx.distribute_workload(&workload, strategy))?;
        plan_dict(py, &plan)
    }

    /// Cl(3,0) geometric product of two C-contiguous float32 (N, 8) arrays; returns the
    /// product and the plan that was followed.
    #[pyo3(signature = (a, b, strategy=None))]
    fn geometric_product<'py>(
        &self,
        py: Python<'py>,
        a: PyReadonlyArray2<'py, f32>,
        b: PyReadonlyArray2<'py, f32>,
        strategy: Option<&str>,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyDict>)> {
        let strategy = parse_strategy(py, strategy)?;
        let rows = check_batches(py, &[("a", &a), ("b", &b)], amari_gpu::ga::CL3_BLADES)?;
        let (a_slice, b_slice) = (contiguous(&a, "a")?, contiguous(&b, "b")?);
        let ctx = Arc::clone(&self.inner);
        let (out, plan) = run_detached(py, move || {
            // Zeroed allocation is lazily backed by the OS, so it costs nothing up front.
            let mut out = vec![0.0f32; a_slice.len()];
            let plan =
                amari_gpu::ga::geometric_product_cl3(&ctx, a_slice, b_slice, &mut out, strategy)?;
            Ok((out, plan))
        })?;
        let array = Array2::from_shape_vec((rows, amari_gpu::ga::CL3_BLADES), out)
            .map_err(|e| PyValueError::new_err(format!("a: {e}")))?;
        Ok((array.into_pyarray(py), plan_dict(py, &plan)?))
    }

    /// {device_id: {"healthy": bool, "reason": str | None}}.
    fn health<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, healthy, reason) in self.inner.health() {
            let entry = PyDict::new(py);
            entry.set_item("healthy", healthy)?;
            entry.set_item("reason", reason)?;
            d.set_item(id, entry)?;
        }
        Ok(d)
    }

    /// Per-device counters, memory in use and health.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .stats()
            .iter()
            .map(|s| stats_dict(py, s))
            .collect()
    }

    /// Makes a device fail when it starts its next chunk after `after_chunks` more.
    fn inject_fault(&self, py: Python<'_>, device_id: usize, after_chunks: u64) -> PyResult<()> {
        self.inner
            .inject_fault(device_id, after_chunks)
            .map_err(|e| to_pyerr(py, e))
    }

    /// Marks a device (or all) healthy again.
    #[pyo3(signature = (device_id=None))]
    fn reset_health(&self, py: Python<'_>, device_id: Option<usize>) -> PyResult<()> {
        self.inner
            .reset_health(device_id)
            .map_err(|e| to_pyerr(py, e))
    }
}
