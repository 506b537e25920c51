//! Tropical products and shortest paths. Each product is one function for numpy and
//! DeviceArray left operands, float32 or float64: the core checks the operands in the caller's shapes and runs
//! them where they live; the result is written into the caller's `out` when given.

use amari_gpu::context::MultiGpuContext;
use amari_gpu::dtype::{f64_words, Dtype};
use amari_gpu::tropical::{self, Operands, Semiring};
use amari_gpu::{Ready, ResidentOperand};
use numpy::ndarray::{Ix2, IxDyn};
use numpy::{PyArray2, PyReadonlyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::arrays::{contiguous, run_into};
use crate::context::PyContext;
use crate::detach::{run_sized, Sized};
use crate::errors::to_pyerr;
use crate::resident::{dtype_refused, run_to_in, PyOperand, PyOut, Returned};

type Paths<'py, T> = PyResult<(Bound<'py, PyArray2<T>>, Bound<'py, PyAny>)>;

/// A right operand (or vector) as Python passes it: float32 or float64 numpy.
#[derive(FromPyObject)]
enum PyRight<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// The checks of a tropical product in the core, computing in `T` (what runs it comes with
/// their result).
type Check<T> = for<'a> fn(&MultiGpuContext, Operands<'a, T>) -> amari_gpu::Result<Ready<'a>>;

/// One tropical product of the core, as the bindings call it.
struct Op {
    /// The core's checks in float32.
    check: Check<f32>,
    /// The core's checks in float64.
    check_f64: Check<f64>,
    /// The right operand's argument name.
    right: &'static str,
    /// Whether the result keeps the right operand's last axis (a matrix product's n).
    keeps_n: bool,
}

/// A product call's arguments as Python passed them.
struct Call<'py, 's> {
    a: PyOperand<'py, IxDyn>,
    a_shape: Option<Vec<usize>>,
    semiring: &'s str,
    strategy: Option<&'s str>,
    out: Option<PyOut<'py, IxDyn>>,
}

/// Runs `op` on `call` in the right operand's dtype (`a`, numpy or DeviceArray, holds the
/// same): the result is a numpy array for a numpy `a`; for a DeviceArray `a` a new
/// DeviceArray, or written into the caller's `out` (a DeviceArray or numpy array).
fn run_product<'py>(
    ctx: &PyContext,
    op: &Op,
    call: Call<'py, '_>,
    b: PyRight<'py>,
) -> Returned<'py> {
    match b {
        PyRight::F32(b) => run_in(ctx, op, op.check, call, b),
        PyRight::F64(b) => run_in(ctx, op, op.check_f64, call, b),
    }
}

/// [`run_product`] computing in `T`, the dtype of `b`.
fn run_in<'py, T>(
    ctx: &PyContext,
    op: &Op,
    check: Check<T>,
    call: Call<'py, '_>,
    b: PyReadonlyArrayDyn<'py, T>,
) -> Returned<'py>
where
    T: tropical::Scalar + numpy::Element,
{
    let py = b.py();
    let semiring = Semiring::parse(call.semiring).map_err(|e| to_pyerr(py, e))?;
    let strategy = ctx.strategy_or_default(py, call.strategy)?;
    let b_shape = b.shape().to_vec();
    let b = contiguous(&b, op.right)?;
    let resident = match &call.a {
        PyOperand::Resident(r) => Some(r.borrow()),
        _ => None,
    };
    let (a, a_shape) = match (&call.a, &resident) {
        (PyOperand::Host(a), _) if T::DTYPE == Dtype::F32 => (
            ResidentOperand::Host(contiguous(a, "a")?),
            a.shape().to_vec(),
        ),
        (PyOperand::HostF64(a), _) if T::DTYPE == Dtype::F64 => (
            ResidentOperand::Host(f64_words(contiguous(a, "a")?)),
            a.shape().to_vec(),
        ),
        (PyOperand::HostF16(_), _) => return Err(dtype_refused("a", Dtype::F16)),
        (PyOperand::Resident(_), Some(r)) => {
            let own = vec![r.inner.rows(), r.inner.cols()];
            let shape = call.a_shape.clone().unwrap_or(own);
            (ResidentOperand::Resident(&r.inner), shape)
        }
        (o, _) => return Err(mixed_dtypes(op.right, o.dtype(), T::DTYPE)),
    };
    let operands = Operands {
        semiring,
        a,
        a_shape: &a_shape,
        b,
        b_shape: &b_shape,
    };
    let mut dims = a_shape[..a_shape.len().saturating_sub(1)].to_vec();
    if op.keeps_n {
        dims.push(b_shape.last().copied().unwrap_or(0));
    }
    // Checked before `out` is taken: an argument error is not a call that began writing.
    let inner = ctx.context(py)?;
    let sized = Sized {
        calls: &ctx.short,
        size: a_shape
            .iter()
            .product::<usize>()
            .max(b_shape.iter().product()),
    };
    let checked = run_sized(py, Some(sized), move || check(&inner, operands))?;
    run_to_in(
        py,
        ctx,
        (resident.is_some(), T::DTYPE),
        (IxDyn(&dims), call.out),
        move |inner, out| checked.run(inner, out, strategy),
    )
}

/// Defines the binding of one tropical product: `$name(ctx, a, $right, semiring, strategy=None,
/// out=None, a_shape=None)` running `$check` through [`run_product`]. The two products differ
/// only in the right operand's name (a Python keyword) and what the result keeps of it.
macro_rules! product_binding {
    ($(#[$doc:meta])* $name:ident, $right:ident, $check:path, keeps_n: $keeps_n:expr) => {
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(signature = (ctx, a, $right, semiring, strategy=None, out=None, a_shape=None))]
        fn $name<'py>(
            ctx: &PyContext,
            a: PyOperand<'py, IxDyn>,
            $right: PyRight<'py>,
            semiring: &str,
            strategy: Option<&str>,
            out: Option<PyOut<'py, IxDyn>>,
            a_shape: Option<Vec<usize>>,
        ) -> Returned<'py> {
            let op = Op {
                check: $check,
                check_f64: $check,
                right: stringify!($right),
                keeps_n: $keeps_n,
            };
            let call = Call {
                a,
                a_shape,
                semiring,
                strategy,
                out,
            };
            run_product(ctx, &op, call, $right)
        }
    };
}

product_binding!(
    /// Tropical product `a ⊗ b` in `semiring`, computed in `b`'s dtype (float32 or float64):
    /// `a` an (m, k) / (batch, m, k) array or a DeviceArray of that shape (`a_shape`: a handle
    /// knows only its rows and width) of that dtype, `b` a (k, n) / (batch, k, n) array.
    /// Returns the result and the plan (see `Returned`).
    tropical_matmul,
    b,
    tropical::tropical_matmul,
    keeps_n: true
);

product_binding!(
    /// Tropical matrix-vector product `a ⊗ x` in `semiring`: `a` as for `tropical_matmul`, `x`
    /// a (k,) / (batch, k) array of `a`'s dtype (float32 or float64); the result of shape
    /// (m,) / (batch, m), never written into a DeviceArray.
    tropical_matvec,
    x,
    tropical::tropical_matvec,
    keeps_n: false
);

/// All-pairs shortest paths of `w` in its dtype: the (n, n) distances and the plan of the
/// last product run.
fn paths<'py, T>(
    py: Python<'py>,
    ctx: &PyContext,
    w: PyReadonlyArray2<'py, T>,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArray2<T>>>,
) -> Paths<'py, T>
where
    T: tropical::Scalar + numpy::Element,
{
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let n = w.as_array().nrows();
    let w_slice = contiguous(&w, "w")?;
    let inner = ctx.context(py)?;
    let sized = Sized {
        calls: &ctx.short,
        size: n * n,
    };
    let (array, plan) = run_into(py, (Ix2(n, n), Some(sized)), out, move |out| {
        tropical::shortest_paths(&inner, w_slice, n, out, strategy)
    })?;
    Ok((array, ctx.plans.record(py, &plan)?))
}

/// A float32 or float64 2-D array as Python passes it: weights (n, n), a grid (H, W).
#[derive(FromPyObject)]
pub(crate) enum PyWeights<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

/// All-pairs shortest paths of the digraph with C-contiguous float32 or float64 (n, n)
/// weights, computed in their dtype; returns the (n, n) distances (of that dtype, into
/// `out`, which must have it, when given) and the plan of the last product run.
#[pyfunction]
#[pyo3(signature = (ctx, w, strategy=None, out=None))]
fn shortest_paths<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    w: PyWeights<'py>,
    strategy: Option<&str>,
    out: Option<PyOut<'py, Ix2>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let wrong = |want: &str| {
        PyTypeError::new_err(format!(
            "out: expected a {want} array (the result's dtype), got one of another dtype"
        ))
    };
    match (w, out) {
        (PyWeights::F32(w), None) => {
            paths(py, ctx, w, strategy, None).map(|(a, p)| (a.into_any(), p))
        }
        (PyWeights::F32(w), Some(PyOut::Host(out))) => {
            paths(py, ctx, w, strategy, Some(out)).map(|(a, p)| (a.into_any(), p))
        }
        (PyWeights::F64(w), None) => {
            paths(py, ctx, w, strategy, None).map(|(a, p)| (a.into_any(), p))
        }
        (PyWeights::F64(w), Some(PyOut::HostF64(out))) => {
            paths(py, ctx, w, strategy, Some(out)).map(|(a, p)| (a.into_any(), p))
        }
        (PyWeights::F32(_), Some(_)) => Err(wrong("float32")),
        (PyWeights::F64(_), Some(_)) => Err(wrong("float64")),
    }
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tropical_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(tropical_matvec, m)?)?;
    m.add_function(wrap_pyfunction!(shortest_paths, m)?)?;
    Ok(())
}

/// The error of a right operand (`right`) of another dtype (`got`) than `a`'s (`expected`):
/// the operands of a product share a dtype.
pub(crate) fn mixed_dtypes(right: &str, expected: Dtype, got: Dtype) -> PyErr {
    PyTypeError::new_err(format!(
        "{right}: expected {expected} like a, got a {got} array (a and {right} share a dtype)"
    ))
}
