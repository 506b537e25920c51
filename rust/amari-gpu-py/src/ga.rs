//! Geometric-algebra kernels on numpy batches: one entry point for every operation of
//! Cl(p, q, r); the Python package validates arguments, broadcasts and shapes the result.

use amari_gpu::ga::{apply, shape, Algebra, Operation};
use numpy::ndarray::Ix2;
use numpy::{PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::arrays::{check_batches, contiguous, run_into};
use crate::context::PyContext;
use crate::errors::to_pyerr;
use crate::plans::plan_record;

/// Runs `operation` (a method name of the Python API) of Cl(p, q, r) on C-contiguous
/// float32 operands of shape (N, 2ⁿ), one of a product's two possibly (1, 2ⁿ) to be applied
/// to every row of the other; `grades` is the grade mask of a projection. Returns the
/// (N, output words) result (written into `out` when given) and the plan that was followed.
#[pyfunction]
#[pyo3(signature = (ctx, operation, signature, operands, grades=0, strategy=None, out=None))]
fn ga_apply<'py>(
    // The context as a bound object: the GIL token comes from it, one argument fewer.
    ctx: &Bound<'py, PyContext>,
    operation: &str,
    signature: (u32, u32, u32),
    operands: Vec<PyReadonlyArray2<'py, f32>>,
    grades: u32,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray2<f32>>>,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyAny>)> {
    let py = ctx.py();
    let ctx = ctx.borrow();
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let (p, q, r) = signature;
    let algebra = Algebra::new(p, q, r).map_err(|e| to_pyerr(py, e))?;
    let op = Operation::parse(operation, grades).map_err(|e| to_pyerr(py, e))?;
    let names = op.operands();
    let mut slices = Vec::with_capacity(operands.len());
    for (array, name) in operands
        .iter()
        .zip(names.iter().chain(std::iter::repeat(&"operand")))
    {
        // Rows are the core's business (broadcast); the width must be the algebra's.
        check_batches(py, &[(name, array)], algebra.blades())?;
        slices.push(contiguous(array, name)?);
    }
    let (items, _) = shape(&algebra, op, &slices).map_err(|e| to_pyerr(py, e))?;
    let words = op.output_words(&algebra);
    let inner = ctx.context(py)?;
    let (array, plan) = run_into(py, Ix2(items, words), out, move |out| {
        apply(&inner, &algebra, op, &slices, out, strategy)
    })?;
    Ok((array, plan_record(py, &plan)?))
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ga_apply, m)?)?;
    Ok(())
}
