//! Information-geometry kernels (Fisher information), one function per operation for
//! numpy arrays and DeviceArrays alike; the core checks the operands' shapes as the caller
//! gave them before `out` is taken, and every result is written into the caller's `out`
//! when given.

use amari_gpu::fisher;
use amari_gpu::ResidentOperand as Operand;
use numpy::ndarray::IxDyn;
use numpy::{PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::{claim, contiguous, returned_into};
use crate::context::PyContext;
use crate::detach::{run_sized, Sized};
use crate::errors::to_pyerr;
use crate::resident::{dtype_refused, run_to_in, PyDeviceArray, PyOperand, PyOut, Returned};
use amari_gpu::dtype::f64_words;
use amari_gpu::Dtype;

/// The plan a call followed, as a dict (None when it ran where resident rows live).
type Plan<'py> = Option<Bound<'py, PyAny>>;

/// An operand as Python passes it: a DeviceArray or host rows of any shape (the core checks
/// the shape), with the DeviceArray's shape as the caller sees it (`None`: its rows and
/// width).
type Shaped<'py> = (PyOperand<'py, IxDyn>, Option<Vec<usize>>);

/// The core's view of an operand (a DeviceArray's rows, or C-contiguous host rows) and its
/// shape as the caller gave it: a numpy array's own, a DeviceArray's `shape` (its rows and
/// width when not given).
fn operand<'a>(
    (o, shape): &'a Shaped<'_>,
    held: &'a Option<PyRef<'_, PyDeviceArray>>,
    name: &str,
) -> PyResult<(Operand<'a>, Vec<usize>)> {
    Ok(match (o, held) {
        (PyOperand::Host(h), _) => (Operand::Host(contiguous(h, name)?), h.shape().to_vec()),
        // Beside a float64 DeviceArray (the caller checks the dtypes agree).
        (PyOperand::HostF64(h), _) => (
            Operand::Host(f64_words(contiguous(h, name)?)),
            h.shape().to_vec(),
        ),
        (o @ PyOperand::HostF16(_), _) => return Err(dtype_refused(name, o.dtype())),
        (PyOperand::Resident(_), Some(r)) => {
            let own = || vec![r.inner.rows(), r.inner.cols()];
            (
                Operand::Resident(&r.inner),
                shape.clone().unwrap_or_else(own),
            )
        }
        (PyOperand::Resident(r), None) => {
            let error = amari_gpu::Error::Internal(format!("{name}: DeviceArray not borrowed"));
            return Err(to_pyerr(r.py(), error));
        }
    })
}

/// The dtype a map over `operands` (named) computes in where resident rows live: a
/// DeviceArray's (float32 or float64), which host operands must hold too.
fn resident_dtype(operands: &[(&str, &Shaped<'_>)]) -> PyResult<Dtype> {
    let dtype = operands
        .iter()
        .find_map(|(_, (o, _))| matches!(o, PyOperand::Resident(_)).then(|| o.dtype()))
        .unwrap_or(Dtype::F32);
    for (name, (o, _)) in operands {
        if o.dtype() != dtype {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "{name}: expected a {dtype} array or DeviceArray (the DeviceArray operand's \
                 dtype), got a {} one",
                o.dtype()
            )));
        }
    }
    Ok(dtype)
}

/// The borrow of a DeviceArray operand (None for host rows).
fn held<'py>((o, _): &Shaped<'py>) -> Option<PyRef<'py, PyDeviceArray>> {
    match o {
        PyOperand::Resident(r) => Some(r.borrow()),
        PyOperand::Host(_) | PyOperand::HostF64(_) | PyOperand::HostF16(_) => None,
    }
}

/// Optional (N,) weights, in the scores' dtype (the Python package converts them).
#[derive(FromPyObject)]
enum Weights<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
}

/// Empirical Fisher matrix of (N, P) `scores` (a DeviceArray, reduced where its rows live,
/// of shape `scores_shape` as the caller sees it, C-contiguous float32 rows, or float64 rows
/// accumulated in float64) with optional (N,) weights of the scores' dtype; returns the
/// float64 (P, P) matrix and the plan (None for a DeviceArray). The core checks the shapes
/// before `out` is taken.
#[pyfunction]
#[pyo3(signature = (ctx, scores, weights=None, strategy=None, out=None, scores_shape=None))]
fn fisher_information<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    scores: PyOperand<'py, IxDyn>,
    weights: Option<Weights<'py>>,
    strategy: Option<&str>,
    out: Option<Bound<'py, PyArrayDyn<f64>>>,
    scores_shape: Option<Vec<usize>>,
) -> PyResult<(Bound<'py, PyArrayDyn<f64>>, Plan<'py>)> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    if scores.dtype() == Dtype::F64 {
        let weights = match weights {
            None => None,
            Some(Weights::F64(w)) => Some(w),
            Some(Weights::F32(_)) => return Err(weights_refused("float64")),
        };
        return information_f64(
            py,
            ctx,
            (&scores, scores_shape),
            weights.as_ref(),
            strategy,
            out,
        );
    }
    let weights = match weights {
        None => None,
        Some(Weights::F32(w)) => Some(w),
        Some(Weights::F64(_)) => return Err(weights_refused("float32")),
    };
    let scores = (scores, scores_shape);
    let borrowed = held(&scores);
    let (scores, dims) = operand(&scores, &borrowed, "scores")?;
    let weights_dims = weights.as_ref().map(|w| w.shape().to_vec());
    let (n, p) = fisher::information_shapes(scores, &dims, weights_dims.as_deref())
        .map_err(|e| to_pyerr(py, e))?;
    let weights_slice = weights
        .as_ref()
        .map(|w| contiguous(w, "weights"))
        .transpose()?;
    let claimed = claim(py, IxDyn(&[p, p]), out)?;
    let inner = ctx.context(py)?;
    let sized = Sized {
        calls: &ctx.short,
        size: n * p,
    };
    let (matrix, plan) = run_sized(py, Some(sized), move || {
        fisher::fisher_information_of(&inner, scores, p, weights_slice, strategy)
    })?;
    let matrix = returned_into(py, IxDyn(&[p, p]), claimed, matrix)?;
    let plan = plan.map(|p| ctx.plans.record(py, &p)).transpose()?;
    Ok((matrix, plan))
}

/// Weights of another dtype than the scores' (the Python package converts them first).
fn weights_refused(scores: &str) -> PyErr {
    pyo3::exceptions::PyTypeError::new_err(format!(
        "weights: expected {scores} weights with {scores} scores"
    ))
}

/// [`fisher_information`] of float64 `scores` (host rows, or a DeviceArray of shape
/// `scores_shape`), accumulated in float64.
fn information_f64<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    (scores, scores_shape): (&PyOperand<'py, IxDyn>, Option<Vec<usize>>),
    weights: Option<&PyReadonlyArrayDyn<'py, f64>>,
    strategy: Option<amari_gpu::Strategy>,
    out: Option<Bound<'py, PyArrayDyn<f64>>>,
) -> PyResult<(Bound<'py, PyArrayDyn<f64>>, Plan<'py>)> {
    let weights_dims = weights.map(|w| w.shape().to_vec());
    let (rows, resident) = match scores {
        PyOperand::HostF64(rows) => (Some(rows), None),
        PyOperand::Resident(r) => (None, Some(r.borrow())),
        PyOperand::Host(_) | PyOperand::HostF16(_) => {
            return Err(dtype_refused("scores", scores.dtype()))
        }
    };
    let dims = match (rows, &resident) {
        (Some(rows), _) => rows.shape().to_vec(),
        (None, Some(r)) => scores_shape.unwrap_or_else(|| vec![r.inner.rows(), r.inner.cols() / 2]),
        (None, None) => Vec::new(),
    };
    let (n, p) = fisher::information_shapes_f64(&dims, weights_dims.as_deref())
        .map_err(|e| to_pyerr(py, e))?;
    let host = rows.map(|rows| contiguous(rows, "scores")).transpose()?;
    let weights = weights.map(|w| contiguous(w, "weights")).transpose()?;
    let claimed = claim(py, IxDyn(&[p, p]), out)?;
    let inner = ctx.context(py)?;
    let sized = Sized {
        calls: &ctx.short,
        size: 2 * n * p,
    };
    let held = resident.as_ref().map(|r| &r.inner);
    // Resident rows are reduced where they live: no plan (as for float32 ones).
    let (matrix, plan) = run_sized(py, Some(sized), move || match (host, held) {
        (Some(scores), _) => fisher::fisher_information_f64(&inner, scores, p, weights, strategy)
            .map(|f| (f.matrix, Some(f.plan))),
        (None, Some(array)) => {
            fisher::fisher_information_resident_f64(&inner, array, &dims, weights)
                .map(|matrix| (matrix, None))
        }
        (None, None) => Err(amari_gpu::Error::Internal("scores not borrowed".into())),
    })?;
    let matrix = returned_into(py, IxDyn(&[p, p]), claimed, matrix)?;
    let plan = plan.map(|p| ctx.plans.record(py, &p)).transpose()?;
    Ok((matrix, plan))
}

/// Per-sample categorical Fisher `diag(p) - p p^T` of (N, K) `values` (a DeviceArray of
/// shape `values_shape` as the caller sees it, or C-contiguous float32 or float64 rows):
/// probabilities, or logits when `logits` is true (the Python package says which). The
/// (N, K, K) result (float64 for float64 rows, computed in float64; float32 otherwise) is
/// a numpy array, a new DeviceArray (K rows per sample) for DeviceArray `values`, or
/// written into `out`; with the plan. The core checks the shape before `out` is taken.
#[pyfunction]
#[pyo3(signature = (ctx, values, logits, strategy=None, out=None, values_shape=None))]
fn fisher_categorical<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    values: PyOperand<'py, IxDyn>,
    logits: bool,
    strategy: Option<&str>,
    out: Option<PyOut<'py, IxDyn>>,
    values_shape: Option<Vec<usize>>,
) -> Returned<'py> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let name = if logits { "logits" } else { "probs" };
    if let PyOperand::HostF64(rows) = &values {
        let (n, k) = fisher::host_shape_f64(name, rows.shape()).map_err(|e| to_pyerr(py, e))?;
        let data = contiguous(rows, name)?;
        let io = (IxDyn(&[n, k, k]), out);
        return run_to_in(py, ctx, (false, Dtype::F64), io, move |inner, out| {
            fisher::fisher_categorical_f64(inner, data, (k, logits), out, strategy)
        });
    }
    let values = (values, values_shape);
    let dtype = resident_dtype(&[(name, &values)])?;
    let borrowed = held(&values);
    let (data, dims) = operand(&values, &borrowed, name)?;
    let (n, k) = fisher::categorical_shapes(data, &dims, logits).map_err(|e| to_pyerr(py, e))?;
    let resident = borrowed.is_some();
    run_to_in(
        py,
        ctx,
        (resident, dtype),
        (IxDyn(&[n, k, k]), out),
        move |inner, out| fisher::fisher_categorical(inner, data, (k, logits), out, strategy),
    )
}

/// Per-sample Fisher matrix of diagonal Gaussians from (N, D) `mean` and `var`, each a
/// DeviceArray (of shape `mean_shape` / `var_shape` as the caller sees it) or C-contiguous
/// float32 rows, or both float64 rows. The (N, 2D, 2D) result (float64 for float64 rows,
/// computed in float64; float32 otherwise) is a numpy array, a new DeviceArray (2D rows per
/// sample) when an operand is one, or written into `out`; with the plan. The core checks
/// the shapes (`var` of `mean`'s) before `out` is taken.
#[pyfunction]
#[pyo3(signature = (ctx, mean, var, strategy=None, out=None, mean_shape=None, var_shape=None))]
fn fisher_gaussian<'py>(
    // The context as a bound object: the GIL token comes from it, one argument fewer.
    ctx: &Bound<'py, PyContext>,
    mean: PyOperand<'py, IxDyn>,
    var: PyOperand<'py, IxDyn>,
    strategy: Option<&str>,
    out: Option<PyOut<'py, IxDyn>>,
    mean_shape: Option<Vec<usize>>,
    var_shape: Option<Vec<usize>>,
) -> Returned<'py> {
    let (py, ctx) = (ctx.py(), ctx.get());
    let strategy = ctx.strategy_or_default(py, strategy)?;
    if let (PyOperand::HostF64(m), PyOperand::HostF64(v)) = (&mean, &var) {
        let shape = |name, rows: &PyReadonlyArrayDyn<'py, f64>| {
            fisher::host_shape_f64(name, rows.shape()).map_err(|e| to_pyerr(py, e))
        };
        let shapes = [shape("mean", m)?, shape("var", v)?];
        let operands = (contiguous(m, "mean")?, contiguous(v, "var")?);
        let (n, d) = shapes[0];
        let io = (IxDyn(&[n, 2 * d, 2 * d]), out);
        return run_to_in(py, ctx, (false, Dtype::F64), io, move |inner, out| {
            fisher::fisher_gaussian_f64(inner, operands, shapes, out, strategy)
        });
    }
    let (mean, var) = ((mean, mean_shape), (var, var_shape));
    let dtype = resident_dtype(&[("mean", &mean), ("var", &var)])?;
    let (mean_held, var_held) = (held(&mean), held(&var));
    let (mean_rows, mean_dims) = operand(&mean, &mean_held, "mean")?;
    let (var_rows, var_dims) = operand(&var, &var_held, "var")?;
    let operands = (mean_rows, var_rows);
    let shapes =
        fisher::gaussian_shapes(operands, [&mean_dims, &var_dims]).map_err(|e| to_pyerr(py, e))?;
    let resident = mean_held.is_some() || var_held.is_some();
    let (n, d) = shapes[0];
    let dim = IxDyn(&[n, 2 * d, 2 * d]);
    run_to_in(py, ctx, (resident, dtype), (dim, out), move |inner, out| {
        fisher::fisher_gaussian(inner, operands, shapes, out, strategy)
    })
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fisher_information, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_categorical, m)?)?;
    m.add_function(wrap_pyfunction!(fisher_gaussian, m)?)?;
    Ok(())
}
