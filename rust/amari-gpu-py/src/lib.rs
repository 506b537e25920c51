//! Python bindings of amari-gpu: conversions, GIL release and error mapping only. The logic
//! lives in the `amari-gpu` crate and in the `amari_gpu` Python package.

mod adapters;
mod arrays;
mod context;
mod detach;
mod domain;
mod errors;
mod fisher;
mod ga;
mod plans;
mod profile;
mod tropical;

use pyo3::prelude::*;

/// The native half of the `amari_gpu` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", amari_gpu::VERSION)?;
    m.add_function(wrap_pyfunction!(adapters::adapters, m)?)?;
    m.add_class::<context::PyContext>()?;
    ga::register(m)?;
    tropical::register(m)?;
    fisher::register(m)?;
    profile::register(m)?;
    domain::register(m)?;
    Ok(())
}
