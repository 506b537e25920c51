//! Geometric-algebra kernels on numpy batches and DeviceArrays: one entry point for every
//! operation of Cl(p, q, r); the Python package broadcasts and shapes the result, the core
//! checks the operands and runs them where they live. Host operands and results are the
//! engine's 4-byte words: a float64 call's arrays come as float32 views of the float64 rows
//! (two words per value), a float16 call's as views of two float16 values per word.

use amari_gpu::dtype::{f16_words, f64_words};
use amari_gpu::ga::{self, Algebra, Blades, Operation};
use amari_gpu::{Dtype, ResidentOperand as Operand};
use half::slice::HalfFloatSliceExt;
use numpy::ndarray::Ix2;
use numpy::PyUntypedArrayMethods;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::arrays::contiguous;
use crate::context::PyContext;
use crate::errors::to_pyerr;
use crate::resident::{run_to_in, PyDeviceArray, PyOperand, PyOut, Returned};

/// Runs `operation` (a method name of the Python API) of Cl(p, q, r) on operands of 2ⁿ
/// values per row, each a DeviceArray or a C-contiguous (N, 2ⁿ) array, float16, float32 or
/// float64 (all operands of one dtype, which the call computes in);
/// one of a product's two may be a single row, applied to every row of the other. `grades`
/// is the grade mask of a projection, or for a sandwich a sequence of blade indices: the
/// blades `x`'s rows (and the result's) hold, column `j` blade `grades[j]`. The core checks the operands in their own shapes (the
/// Python package has it check them in the caller's first, with `check_ga_apply`). The
/// (N, output values) result is a numpy array of the call's dtype, a new DeviceArray when an
/// operand is one, or written into `out`; returned with the plan (None when the call ran
/// where resident rows live).
#[pyfunction]
#[pyo3(
    signature = (ctx, operation, signature, operands, grades=OpArg::Mask(0), strategy=None, out=None),
    text_signature = "(ctx, operation, signature, operands, grades=0, strategy=None, out=None)"
)]
fn ga_apply<'py>(
    // The context as a bound object: the GIL token comes from it, one argument fewer.
    ctx: &Bound<'py, PyContext>,
    operation: &str,
    signature: (u32, u32, u32),
    operands: Vec<PyOperand<'py>>,
    grades: OpArg,
    strategy: Option<&str>,
    out: Option<PyOut<'py>>,
) -> Returned<'py> {
    let py = ctx.py();
    let ctx = ctx.borrow();
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let (algebra, op) = parse(py, operation, signature, grades)?;
    let dtype = dtype_of(&operands)?;
    // Before the rows are viewed as words: float16 rows of an odd width do not pack into
    // words, which the dtype's own error says.
    op.check_dtype(dtype).map_err(|e| to_pyerr(py, e))?;
    let held = borrows(&operands);
    let ops = core_operands(py, op, &operands, &held)?;
    let shapes = own_shapes(&operands);
    // Checked before `out` is taken: an argument error is not a call that began writing.
    let ready = ga::check(&algebra, op, &ops, &shapes, dtype).map_err(|e| to_pyerr(py, e))?;
    let rows: Vec<usize> = ops
        .iter()
        .enumerate()
        .map(|(slot, o)| match o {
            Operand::Host(data) => {
                let row_words = dtype.words_of(op.input_words(slot, &algebra));
                data.len().checked_div(row_words).unwrap_or(0)
            }
            Operand::Resident(r) => r.rows(),
        })
        .collect();
    // A single multivector is applied to every row of the other operand (the core checked
    // that the rest agree).
    let items = rows.iter().copied().find(|&n| n != 1).unwrap_or(1);
    let resident = held.iter().any(Option::is_some);
    let dim = Ix2(items, op.output_words(&algebra));
    run_to_in(
        py,
        &ctx,
        (resident, dtype),
        (dim, out),
        move |inner, out| ready.run(inner, out, strategy),
    )
}

/// The dtype the operands hold, host arrays and DeviceArrays alike: one for all of them.
pub(crate) fn dtype_of(operands: &[PyOperand<'_>]) -> PyResult<Dtype> {
    let all: Vec<Dtype> = operands.iter().map(PyOperand::dtype).collect();
    match all.split_first() {
        None => Ok(Dtype::F32),
        Some((first, rest)) if rest.iter().all(|d| d == first) => Ok(*first),
        Some(_) => Err(PyTypeError::new_err(format!(
            "operands: expected arrays of one dtype (the package converts them to the \
             result's), got {}",
            all.iter()
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(" and ")
        ))),
    }
}

/// What an operation takes besides its operands: the grade mask of a projection (0 for the
/// others), or the blade indices a sandwich's rows hold (`sandwich(..., blades=)`).
#[derive(FromPyObject)]
pub(crate) enum OpArg {
    /// A grade mask.
    Mask(u32),
    /// Blade indices, in the rows' column order.
    Blades(Vec<i64>),
}

/// The algebra Cl(p, q, r) of `signature` and the operation `operation` (with the grade
/// mask of a projection, or the blades of a sandwich on some blades).
pub(crate) fn parse(
    py: Python<'_>,
    operation: &str,
    (p, q, r): (u32, u32, u32),
    arg: OpArg,
) -> PyResult<(Algebra, Operation)> {
    let algebra = Algebra::new(p, q, r).map_err(|e| to_pyerr(py, e))?;
    let op = match arg {
        OpArg::Mask(grades) => Operation::parse(operation, grades),
        OpArg::Blades(blades) => match Operation::parse(operation, 0) {
            Ok(Operation::Sandwich) => {
                Blades::new(&algebra, &blades).map(Operation::SandwichBlades)
            }
            Ok(_) | Err(_) => Err(amari_gpu::Error::invalid(
                "blades",
                format!("only sandwich takes blades, not {operation:?}"),
            )),
        },
    };
    Ok((algebra, op.map_err(|e| to_pyerr(py, e))?))
}

/// The borrows of the DeviceArray operands for the call (None for host rows).
pub(crate) fn borrows<'py>(operands: &[PyOperand<'py>]) -> Vec<Option<PyRef<'py, PyDeviceArray>>> {
    operands
        .iter()
        .map(|o| match o {
            PyOperand::Resident(r) => Some(r.borrow()),
            PyOperand::Host(_) | PyOperand::HostF64(_) | PyOperand::HostF16(_) => None,
        })
        .collect()
}

/// The core's view of the operands (`held`: their [`borrows`]), named as `op` names them.
pub(crate) fn core_operands<'a>(
    py: Python<'_>,
    op: Operation,
    operands: &'a [PyOperand<'_>],
    held: &'a [Option<PyRef<'_, PyDeviceArray>>],
) -> PyResult<Vec<Operand<'a>>> {
    let names = op.operands();
    operands
        .iter()
        .zip(held)
        .zip(names.iter().chain(std::iter::repeat(&"operand")))
        .map(|((operand, held), name)| match (operand, held) {
            (PyOperand::Host(array), _) => Ok(Operand::Host(contiguous(array, name)?)),
            (PyOperand::HostF64(array), _) => {
                Ok(Operand::Host(f64_words(contiguous(array, name)?)))
            }
            (PyOperand::HostF16(array), _) => {
                let bits = contiguous(array, name)?.reinterpret_cast();
                f16_words(bits).map(Operand::Host).map_err(|_| {
                    PyValueError::new_err(format!(
                        "{name}: expected float16 rows starting at a 4-byte aligned address \
                         (as numpy allocates them), got a view that does not: pass a copy"
                    ))
                })
            }
            (PyOperand::Resident(_), Some(r)) => Ok(Operand::Resident(&r.inner)),
            (PyOperand::Resident(_), None) => {
                let error = amari_gpu::Error::Internal("a DeviceArray not borrowed".into());
                Err(to_pyerr(py, error))
            }
        })
        .collect()
}

/// The operands' own shapes: a numpy array's, a DeviceArray's rows and width.
pub(crate) fn own_shapes(operands: &[PyOperand<'_>]) -> Vec<Vec<usize>> {
    operands
        .iter()
        .map(|operand| match operand {
            PyOperand::Host(array) => array.shape().to_vec(),
            PyOperand::HostF64(array) => array.shape().to_vec(),
            PyOperand::HostF16(array) => array.shape().to_vec(),
            PyOperand::Resident(r) => {
                let r = &r.get().inner;
                vec![r.rows(), r.cols() * 4 / r.dtype().bytes()]
            }
        })
        .collect()
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ga_apply, m)?)?;
    Ok(())
}
