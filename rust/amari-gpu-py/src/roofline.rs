//! `device_limits(ctx)`: each device's roofline limits (streaming bandwidth and the FMA,
//! add and max-plus issue rates), measured on the device by the core's
//! `calibration::limits`, as plain dicts.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::context::PyContext;
use crate::detach::run_detached;
use crate::fields::fields;

/// Each device's measured limits, in device order.
#[pyfunction]
fn device_limits<'py>(py: Python<'py>, ctx: &PyContext) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let inner = ctx.context(py)?;
    let limits = run_detached(py, move || amari_gpu::measure_limits(&inner))?;
    limits
        .iter()
        .map(|l| {
            fields!(py, l; device, stream_bytes_per_s, fma_flops_per_s, add_ops_per_s,
                max_ops_per_s, measured_with, clock)
        })
        .collect()
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device_limits, m)?)?;
    Ok(())
}
