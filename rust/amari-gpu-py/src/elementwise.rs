//! Elementwise arithmetic on DeviceArrays (their operators and numpy ufuncs): one function;
//! the Python package promotes, broadcasts and shapes, the core checks the operands and runs
//! the operation where the rows live.

use amari_gpu::dtype::{f16_words, f64_words};
use amari_gpu::elementwise::{elementwise as checked, Layout, Op};
use amari_gpu::ResidentOperand as Operand;
use half::slice::HalfFloatSliceExt;
use numpy::ndarray::Ix2;
use numpy::PyUntypedArrayMethods;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::arrays::contiguous;
use crate::context::PyContext;
use crate::errors::to_pyerr;
use crate::resident::{run_to_in, PyDeviceArray, PyOperand, PyOut};

/// Runs the ufunc `op` (numpy's name) on the rows of `a` and `b`, in `a`'s dtype: `b` a
/// DeviceArray of `a`'s rows and dtype, or a C-contiguous array of `a`'s dtype and shape,
/// one row `(1, W)` for every row or one value `(1, 1)` for every value (float16: `(1, 2)`,
/// the value twice, filling a word); None for a one-operand `op`. `swap`: `b` is the left
/// operand. The result is a new DeviceArray of `a`'s shape and dtype, or written into `out`.
#[pyfunction]
#[pyo3(signature = (ctx, op, a, b=None, swap=false, out=None))]
fn elementwise<'py>(
    ctx: &Bound<'py, PyContext>,
    op: &str,
    a: Bound<'py, PyDeviceArray>,
    b: Option<PyOperand<'py>>,
    swap: bool,
    out: Option<PyOut<'py>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = ctx.py();
    let ctx = ctx.borrow();
    let op = Op::parse(op).map_err(|e| to_pyerr(py, e))?;
    let held_a = a.borrow();
    let dtype = held_a.inner.dtype();
    // Values per row: the words' count in the dtype.
    let (rows, cols) = (held_a.inner.rows(), held_a.inner.cols() * 4 / dtype.bytes());
    let held_b = match &b {
        Some(PyOperand::Resident(r)) => Some(r.borrow()),
        _ => None,
    };
    let layout_of = |shape: &[usize]| match shape {
        [n, w] if (*n, *w) == (rows, cols) => Layout::Rows,
        [1, w] if *w == cols => Layout::Row,
        _ => Layout::Scalar,
    };
    let second = match (&b, &held_b) {
        (None, _) => None,
        (Some(PyOperand::Resident(_)), Some(r)) => {
            Some((Operand::Resident(&r.inner), Layout::Rows))
        }
        (Some(o), _) if o.dtype() != dtype => {
            return Err(PyTypeError::new_err(format!(
                "b: expected a {dtype} array (a's dtype), got a {} array",
                o.dtype()
            )))
        }
        (Some(PyOperand::Host(array)), _) => Some((
            Operand::Host(contiguous(array, "b")?),
            layout_of(array.shape()),
        )),
        (Some(PyOperand::HostF64(array)), _) => Some((
            Operand::Host(f64_words(contiguous(array, "b")?)),
            layout_of(array.shape()),
        )),
        (Some(PyOperand::HostF16(array)), _) => {
            let bits = contiguous(array, "b")?.reinterpret_cast();
            let words = f16_words(bits).map_err(|e| to_pyerr(py, e))?;
            Some((Operand::Host(words), layout_of(array.shape())))
        }
        (Some(PyOperand::Resident(_)), None) => {
            let error = amari_gpu::Error::Internal("a DeviceArray not borrowed".into());
            return Err(to_pyerr(py, error));
        }
    };
    let first = Operand::Resident(&held_a.inner);
    // Checked before `out` is taken: an argument error is not a call that began writing.
    let ready = checked(op, first, (cols, dtype), second, swap).map_err(|e| to_pyerr(py, e))?;
    let (result, _) = run_to_in(
        py,
        &ctx,
        (true, dtype),
        (Ix2(rows, cols), out),
        move |inner, out| ready.run(inner, out, None),
    )?;
    Ok(result)
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(elementwise, m)?)?;
    Ok(())
}
