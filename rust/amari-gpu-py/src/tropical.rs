//! Tropical products and shortest paths on numpy arrays.

use pyo3::prelude::*;

/// Adds this module's functions to `_native`.
pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
