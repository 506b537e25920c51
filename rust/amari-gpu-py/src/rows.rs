//! Users' own WGSL row kernels (`map_rows`) on numpy arrays and on DeviceArrays.

use amari_gpu::rows::{self, Column, RowArray, RowsCall};
use amari_gpu::ResidentOperand as Operand;
use numpy::ndarray::Ix2;
use numpy::{PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::arrays::{contiguous, run_into};
use crate::context::PyContext;
use crate::errors::to_pyerr;
use crate::plans::plan_record;
use crate::resident::{run_resident_call, PyDeviceArray, PyOperand};

/// The kernel of a call, read from a dict with one key per field.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct RowsSpec {
    source: String,
    out_cols: usize,
    params: Vec<(String, f32)>,
}

/// Runs the user's `fn row` of `spec["source"]` over C-contiguous float32 arrays, each
/// (N, C) or, when its flag is true, (1, C) broadcast to every row; `spec["params"]` are
/// (name, value) pairs read in WGSL as `params.NAME`. Returns the (N, out_cols) result
/// (written into `out` when given) and the plan.
#[pyfunction]
#[pyo3(signature = (ctx, spec, arrays, strategy=None, out=None))]
fn map_rows<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    spec: RowsSpec,
    arrays: Vec<(PyReadonlyArray2<'py, f32>, bool)>,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray2<f32>>>,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyAny>)> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let mut views = Vec::with_capacity(arrays.len());
    for (k, (array, broadcast)) in arrays.iter().enumerate() {
        views.push(RowArray {
            data: contiguous(array, &format!("arrays[{k}]"))?,
            cols: array.as_array().ncols(),
            broadcast: *broadcast,
        });
    }
    let items = views
        .iter()
        .find(|a| !a.broadcast)
        .map_or(1, |a| a.data.len() / a.cols.max(1));
    let call = RowsCall {
        source: &spec.source,
        arrays: views,
        out_cols: spec.out_cols,
        params: spec.params,
    };
    // Checked before the output is allocated: a kernel that does not compile costs nothing.
    rows::kernel(&call).map_err(|e| to_pyerr(py, e))?;
    let inner = ctx.context(py)?;
    let (array, plan) = run_into(py, Ix2(items, call.out_cols), out, move |out| {
        rows::map_rows(&inner, &call, out, strategy)
    })?;
    Ok((array, plan_record(py, &plan)?))
}

/// Runs the user's `fn row` of `spec` where the rows of the DeviceArray operands live:
/// each operand a DeviceArray (rows, C) or a C-contiguous float32 array, (N, C) or, when
/// its flag is true, (1, C) broadcast to every row (uploaded once to each device). At least
/// one operand is a DeviceArray. Returns the resident (N, out_cols) result, or `None` once
/// written into the DeviceArray `out` (its shape the result's).
#[pyfunction]
#[pyo3(signature = (ctx, spec, operands, out=None))]
fn resident_map_rows(
    py: Python<'_>,
    ctx: &PyContext,
    spec: RowsSpec,
    operands: Vec<(PyOperand<'_>, bool)>,
    out: Option<PyRef<'_, PyDeviceArray>>,
) -> PyResult<Option<PyDeviceArray>> {
    let refs: Vec<Option<PyRef<'_, PyDeviceArray>>> = operands
        .iter()
        .map(|(o, _)| match o {
            PyOperand::Resident(r) => Some(r.borrow()),
            PyOperand::Host(_) => None,
        })
        .collect();
    let names: Vec<String> = (0..operands.len())
        .map(|k| format!("arrays[{k}]"))
        .collect();
    let mut columns = Vec::with_capacity(operands.len());
    let mut ops = Vec::with_capacity(operands.len());
    for (k, ((o, broadcast), held)) in operands.iter().zip(&refs).enumerate() {
        let (cols, operand) = match (o, held) {
            (PyOperand::Resident(_), Some(r)) => (r.inner.cols(), Operand::Resident(&r.inner)),
            (PyOperand::Host(a), _) => (
                a.as_array().ncols(),
                Operand::Host(contiguous(a, &names[k])?),
            ),
            (PyOperand::Resident(_), None) => unreachable!("a ref is taken for every DeviceArray"),
        };
        columns.push(Column {
            cols,
            broadcast: *broadcast,
        });
        ops.push((names[k].as_str(), operand));
    }
    let mut kernel = rows::kernel_of(&spec.source, &columns, &spec.params, spec.out_cols)
        .map_err(|e| to_pyerr(py, e))?;
    rows::place(&*ctx.context(py)?, &mut kernel).map_err(|e| to_pyerr(py, e))?;
    run_resident_call(py, ctx, kernel, ops, out.as_deref())
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(map_rows, m)?)?;
    m.add_function(wrap_pyfunction!(resident_map_rows, m)?)?;
    Ok(())
}
