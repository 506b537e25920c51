//! Tropical products and shortest paths. Each product is one function for numpy and
//! DeviceArray left operands: the core checks the operands in the caller's shapes and runs
//! them where they live; the result is written into the caller's `out` when given.

use amari_gpu::context::MultiGpuContext;
use amari_gpu::dtype::{as_f64_mut, Dtype};
use amari_gpu::tropical::{self, HostOperands, Operands, Semiring};
use amari_gpu::{Destination, Outcome};
use amari_gpu::{Error, Ready, ResidentOperand};
use numpy::ndarray::{Ix2, IxDyn};
use numpy::{PyArray2, PyReadonlyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::arrays::{contiguous, run_into};
use crate::context::PyContext;
use crate::detach::{run_sized, Sized};
use crate::errors::to_pyerr;
use crate::resident::{dtype_refused, run_to, run_to_in, PyOperand, PyOut, Returned};

type Paths<'py, T> = PyResult<(Bound<'py, PyArray2<T>>, Bound<'py, PyAny>)>;

/// A float64 product of the core.
type Product64 = for<'a> fn(
    &MultiGpuContext,
    HostOperands<'a, f64>,
    &mut [f64],
    Option<amari_gpu::Strategy>,
) -> amari_gpu::Result<amari_gpu::Plan>;

/// A right operand (or vector) as Python passes it: float32 or float64 numpy.
#[derive(FromPyObject)]
enum PyRight<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// The checks of a tropical product in the core (what runs it comes with their result).
type Check = for<'a> fn(&MultiGpuContext, Operands<'a>) -> amari_gpu::Result<Ready<'a>>;

/// One tropical product of the core, as the bindings call it.
struct Op {
    /// The core's checks.
    check: Check,
    /// The core's float64 product (host operands only).
    run_f64: Product64,
    /// The right operand's argument name.
    right: &'static str,
    /// Whether the result keeps the right operand's last axis (a matrix product's n).
    keeps_n: bool,
}

/// A product call's arguments as Python passed them.
struct Call<'py, 's> {
    a: PyOperand<'py, IxDyn>,
    a_shape: Option<Vec<usize>>,
    b: PyRight<'py>,
    semiring: &'s str,
    strategy: Option<&'s str>,
    out: Option<PyOut<'py, IxDyn>>,
}

/// Runs `op` on `call`: the result is a numpy array for a numpy `a`; for a DeviceArray `a`
/// a new DeviceArray, or written into the caller's `out` (a DeviceArray or numpy array).
fn run_product<'py>(ctx: &PyContext, op: &Op, call: Call<'py, '_>) -> Returned<'py> {
    let b = match call.b {
        PyRight::F64(b) => {
            return run_product_f64(ctx, op, call.a, b, (call.semiring, call.strategy, call.out))
        }
        PyRight::F32(b) => b,
    };
    let py = b.py();
    let semiring = Semiring::parse(call.semiring).map_err(|e| to_pyerr(py, e))?;
    let strategy = ctx.strategy_or_default(py, call.strategy)?;
    let b_shape = b.shape().to_vec();
    let b = contiguous(&b, op.right)?;
    let (resident, a_shape) = match &call.a {
        PyOperand::Host(a) => (None, a.shape().to_vec()),
        o @ (PyOperand::HostF64(_) | PyOperand::HostF16(_)) => {
            return Err(dtype_refused("a", o.dtype()))
        }
        PyOperand::Resident(r) => {
            let r = r.borrow();
            let own = vec![r.inner.rows(), r.inner.cols()];
            (Some(r), call.a_shape.clone().unwrap_or(own))
        }
    };
    let a = match (&call.a, &resident) {
        (PyOperand::Host(a), _) => ResidentOperand::Host(contiguous(a, "a")?),
        (o @ (PyOperand::HostF64(_) | PyOperand::HostF16(_)), _) => {
            return Err(dtype_refused("a", o.dtype()))
        }
        (PyOperand::Resident(_), Some(r)) => ResidentOperand::Resident(&r.inner),
        (PyOperand::Resident(_), None) => {
            return Err(to_pyerr(
                py,
                Error::Internal("resident a not borrowed".into()),
            ))
        }
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
    let (check, inner) = (op.check, ctx.context(py)?);
    let sized = Sized {
        calls: &ctx.short,
        size: a_shape
            .iter()
            .product::<usize>()
            .max(b_shape.iter().product()),
    };
    let checked = run_sized(py, Some(sized), move || check(&inner, operands))?;
    run_to(
        py,
        ctx,
        resident.is_some(),
        (IxDyn(&dims), call.out),
        move |inner, out| checked.run(inner, out, strategy),
    )
}

/// The error of a float64 right operand (`right`) with a float32 `a`: they share a dtype.
pub(crate) fn mixed_dtypes(right: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "{right}: expected float32 like a, got a float64 array (a and {right} share a dtype)"
    ))
}

/// Runs `op` on float64 numpy operands in float64 (a float64 `a` and `b`; a DeviceArray
/// holds float32, so a float64 `b` with one is refused): the result a float64 array, or the
/// caller's float64 `out`.
fn run_product_f64<'py>(
    ctx: &PyContext,
    op: &Op,
    a: PyOperand<'py, IxDyn>,
    b: PyReadonlyArrayDyn<'py, f64>,
    (semiring, strategy, out): (&str, Option<&str>, Option<PyOut<'py, IxDyn>>),
) -> Returned<'py> {
    let py = b.py();
    let a = match a {
        PyOperand::HostF64(a) => a,
        PyOperand::HostF16(_) => return Err(dtype_refused("a", Dtype::F16)),
        PyOperand::Host(_) | PyOperand::Resident(_) => return Err(mixed_dtypes(op.right)),
    };
    let semiring = Semiring::parse(semiring).map_err(|e| to_pyerr(py, e))?;
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let (a_shape, b_shape) = (a.shape().to_vec(), b.shape().to_vec());
    let (a_values, b_values) = (contiguous(&a, "a")?, contiguous(&b, op.right)?);
    let mut dims = a_shape[..a_shape.len().saturating_sub(1)].to_vec();
    if op.keeps_n {
        dims.push(b_shape.last().copied().unwrap_or(0));
    }
    let run = op.run_f64;
    run_to_in(
        py,
        ctx,
        (false, Dtype::F64),
        (IxDyn(&dims), out),
        move |inner, out| {
            let Destination::Host(words) = out else {
                return Err(Error::invalid(
                    "out",
                    "expected a float64 numpy array, got DeviceArray",
                ));
            };
            let out = as_f64_mut(words)
                .ok_or_else(|| Error::Internal("a float64 result not 8-byte aligned".into()))?;
            let operands = HostOperands {
                semiring,
                a: a_values,
                a_shape: &a_shape,
                b: b_values,
                b_shape: &b_shape,
            };
            let plan = run(inner, operands, out, strategy)?;
            Ok(Outcome {
                plan: Some(plan),
                array: None,
            })
        },
    )
}

/// Defines the binding of one tropical product: `$name(ctx, a, $right, semiring, strategy=None,
/// out=None, a_shape=None)` running `$check` through [`run_product`]. The two products differ
/// only in the right operand's name (a Python keyword) and what the result keeps of it.
macro_rules! product_binding {
    ($(#[$doc:meta])* $name:ident, $right:ident, $check:path, $run_f64:path,
     keeps_n: $keeps_n:expr) => {
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
                run_f64: $run_f64,
                right: stringify!($right),
                keeps_n: $keeps_n,
            };
            let call = Call {
                a,
                a_shape,
                b: $right,
                semiring,
                strategy,
                out,
            };
            run_product(ctx, &op, call)
        }
    };
}

product_binding!(
    /// Tropical product `a ⊗ b` in `semiring`: `a` a float32 (m, k) / (batch, m, k) array or a
    /// DeviceArray of that shape (`a_shape`: a handle knows only its rows and width), `b` a
    /// float32 (k, n) / (batch, k, n) array; or both float64 arrays, computed in float64.
    /// Returns the result and the plan (see `Returned`).
    tropical_matmul,
    b,
    tropical::tropical_matmul,
    tropical::tropical_matmul_f64,
    keeps_n: true
);

product_binding!(
    /// Tropical matrix-vector product `a ⊗ x` in `semiring`: `a` as for `tropical_matmul`, `x`
    /// a float32 (k,) / (batch, k) array (float64 with a float64 `a`); the result of shape
    /// (m,) / (batch, m), never written into a DeviceArray.
    tropical_matvec,
    x,
    tropical::tropical_matvec,
    tropical::tropical_matvec_f64,
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

/// Weights as Python passes them: float32 or float64 (n, n).
#[derive(FromPyObject)]
enum PyWeights<'py> {
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
