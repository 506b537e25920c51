//! Users' own WGSL row kernels (`map_rows`) on numpy arrays and DeviceArrays, one function:
//! the core checks the arrays in the caller's shapes and runs them where they live.

use amari_gpu::dtype::{f64_words, Dtype};
use amari_gpu::rows::{self, RowArray, RowsCall};
use amari_gpu::ResidentOperand as Operand;
use numpy::ndarray::{Ix2, IxDyn};
use pyo3::prelude::*;

use crate::arrays::contiguous;
use crate::context::PyContext;
use crate::errors::to_pyerr;
use crate::resident::{run_to_in, PyDeviceArray, PyOperand, PyOut, Returned};

/// The kernel of a call, read from a dict with one key per field.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct RowsSpec {
    pub(crate) source: String,
    pub(crate) out_cols: usize,
    pub(crate) params: Vec<(String, f32)>,
    pub(crate) dtype: String,
}

/// Runs the user's `fn row` of `spec["source"]` over `arrays`: each a DeviceArray or a
/// C-contiguous array of `spec["dtype"]` ("float32" or "float64"), paired with its shape as the caller gave it, `(N, C)` or
/// `(C,)` (one row for every item; a numpy array only). `spec["params"]` are (name, value)
/// pairs read in WGSL as `params.NAME`. The `(N, out_cols)` result is a numpy array, a new
/// DeviceArray when an array is one, or written into `out`; returned with the plan (None
/// when the call ran where resident rows live).
#[pyfunction]
#[pyo3(signature = (ctx, spec, arrays, strategy=None, out=None))]
fn map_rows<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    spec: RowsSpec,
    arrays: Vec<(PyOperand<'py, IxDyn>, Vec<usize>)>,
    strategy: Option<&str>,
    out: Option<PyOut<'py, Ix2>>,
) -> Returned<'py> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let dtype = Dtype::parse("dtype", &spec.dtype).map_err(|e| to_pyerr(py, e))?;
    let refs: Vec<Option<PyRef<'_, PyDeviceArray>>> = arrays
        .iter()
        .map(|(o, _)| match o {
            PyOperand::Resident(r) => Some(r.borrow()),
            PyOperand::Host(_) | PyOperand::HostF64(_) | PyOperand::HostF16(_) => None,
        })
        .collect();
    let mut views = Vec::with_capacity(arrays.len());
    for (k, ((array, shape), held)) in arrays.iter().zip(&refs).enumerate() {
        let data = match (host_words(py, k, array, dtype)?, held) {
            (Some(words), _) => Operand::Host(words),
            (None, Some(r)) => Operand::Resident(&r.inner),
            (None, None) => {
                let error = amari_gpu::Error::Internal("a DeviceArray not borrowed".into());
                return Err(to_pyerr(py, error));
            }
        };
        views.push(RowArray { data, shape });
    }
    // The rows of the first array with a row per item (one item when every array is one
    // row); the core checks the others against it.
    let items = views
        .iter()
        .find(|a| a.shape.len() == 2)
        .map_or(1, |a| a.shape[0]);
    let resident = refs.iter().any(Option::is_some);
    let call = RowsCall {
        source: &spec.source,
        arrays: views,
        out_cols: spec.out_cols,
        params: spec.params,
        dtype,
    };
    let dim = Ix2(items, call.out_cols);
    // Checked before `out` is taken: a kernel that does not compile costs nothing, and an
    // argument error is not a call that began writing.
    let checked = rows::map_rows(&*ctx.context(py)?, call).map_err(|e| to_pyerr(py, e))?;
    run_to_in(py, ctx, (resident, dtype), (dim, out), move |inner, out| {
        checked.run(inner, out, strategy)
    })
}

/// The words of `arrays[k]` when it is a host array in the call's `dtype` (float32, or
/// float64 as pairs of words), its error for another dtype; None for a DeviceArray (its
/// rows are where they live).
pub(crate) fn host_words<'a>(
    py: Python<'_>,
    k: usize,
    array: &'a PyOperand<'_, IxDyn>,
    dtype: Dtype,
) -> PyResult<Option<&'a [f32]>> {
    match array {
        PyOperand::Host(a) if dtype == Dtype::F32 => {
            Ok(Some(contiguous(a, &format!("arrays[{k}]"))?))
        }
        PyOperand::HostF64(a) if dtype == Dtype::F64 => {
            Ok(Some(f64_words(contiguous(a, &format!("arrays[{k}]"))?)))
        }
        PyOperand::Host(_) | PyOperand::HostF64(_) | PyOperand::HostF16(_) => {
            let error = amari_gpu::Error::invalid(
                format!("arrays[{k}]"),
                format!("expected a {dtype} array (the call's dtype), got another dtype"),
            );
            Err(to_pyerr(py, error))
        }
        PyOperand::Resident(_) => Ok(None),
    }
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(map_rows, m)?)?;
    Ok(())
}
