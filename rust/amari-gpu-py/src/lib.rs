//! Python bindings of amari-gpu: conversions, GIL release and error mapping only. The logic
//! lives in the `amari-gpu` crate and in the `amari_gpu` Python package.

mod adapters;
mod arrays;
mod checks;
mod context;
mod detach;
mod domain;
mod errors;
mod fields;
mod fisher;
mod fisher_split;
mod ga;
mod logs;
mod plans;
mod profile;
mod resident;
mod rows;
mod tropical;

use amari_gpu::adapter::{BACKEND_NAMES, DEVICE_TYPE_NAMES};
use amari_gpu::domain::Boundary;
use amari_gpu::tropical::Semiring;
use amari_gpu::Strategy;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The names the core accepts, as tuples: the Python package checks against these.
fn add_names(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add(
        "STRATEGIES",
        PyTuple::new(py, Strategy::ALL.map(Strategy::name))?,
    )?;
    m.add(
        "SEMIRINGS",
        PyTuple::new(py, Semiring::ALL.map(Semiring::name))?,
    )?;
    m.add(
        "BOUNDARIES",
        PyTuple::new(py, Boundary::ALL.map(Boundary::name))?,
    )?;
    m.add("BACKENDS", PyTuple::new(py, BACKEND_NAMES)?)?;
    m.add("DEVICE_TYPES", PyTuple::new(py, DEVICE_TYPE_NAMES)?)?;
    Ok(())
}

/// The kernel family a workload named `kernel` belongs to (a family name, a public
/// operation's name, or a `family/kernel` label), from the families' own definitions;
/// `None` for a name of no family.
#[pyfunction]
fn family_of(kernel: &str) -> Option<&'static str> {
    amari_gpu::Family::of(kernel).map(amari_gpu::Family::name)
}

/// The native half of the `amari_gpu` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", amari_gpu::VERSION)?;
    logs::register(m)?;
    add_names(m)?;
    m.add_function(wrap_pyfunction!(adapters::adapters, m)?)?;
    m.add_function(wrap_pyfunction!(adapters::default_selection, m)?)?;
    m.add_class::<context::PyContext>()?;
    m.add_function(wrap_pyfunction!(context::check_workload, m)?)?;
    m.add_function(wrap_pyfunction!(family_of, m)?)?;
    checks::register(m)?;
    ga::register(m)?;
    tropical::register(m)?;
    fisher::register(m)?;
    fisher_split::register(m)?;
    profile::register(m)?;
    domain::register(m)?;
    resident::register(m)?;
    rows::register(m)?;
    Ok(())
}
