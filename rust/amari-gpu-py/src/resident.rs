//! Device-resident arrays: the native handle behind `amari_gpu.DeviceArray`, upload and
//! gather; the operands (`PyOperand`) and `out` (`PyOut`) every operation takes, and the one
//! rule for where its result goes (`run_to_in`). The core places, runs and rebuilds.

use amari_gpu::context::MultiGpuContext;
use amari_gpu::dtype::{f16_words_mut, f64_words_mut};
use amari_gpu::{Destination, Dtype, Outcome, Plan, ResidentArray};
use half::slice::HalfFloatSliceExt;
use numpy::ndarray::{Dimension, Ix2};
use numpy::{PyArray, PyArray2, PyReadonlyArray, PyReadonlyArray2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::arrays::{contiguous, run_into};
use crate::context::PyContext;
use crate::detach::{run_detached, Sized};
use crate::errors::to_pyerr;

/// Rows of 4-byte words holding values of one dtype, on a context's devices
/// (`amari_gpu.DeviceArray` wraps it).
#[pyclass(module = "amari_gpu._native", name = "DeviceArray", frozen)]
pub struct PyDeviceArray {
    pub(crate) inner: ResidentArray,
    /// The upload's placement (None for an array a call computed, or of no rows).
    pub(crate) placement: Option<Plan>,
}

impl From<ResidentArray> for PyDeviceArray {
    fn from(inner: ResidentArray) -> Self {
        PyDeviceArray {
            inner,
            placement: None,
        }
    }
}

#[pymethods]
impl PyDeviceArray {
    /// Rows.
    #[getter]
    fn rows(&self) -> usize {
        self.inner.rows()
    }
    /// 4-byte words per row.
    #[getter]
    fn cols(&self) -> usize {
        self.inner.cols()
    }
    /// numpy's name of the values' dtype.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.dtype().name()
    }
    /// The plan that placed an uploaded array's rows (its `left_out` names the devices
    /// skipped and why); None for a computed array or one of no rows.
    #[getter]
    fn placement<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.placement
            .as_ref()
            .map(|plan| crate::plans::plan_record(py, plan))
            .transpose()
    }
    /// Whether the shards are still held.
    #[getter]
    fn live(&self) -> bool {
        self.inner.is_live()
    }
    /// `(device_id, start_row, stop_row)` of every shard, in row order.
    fn sharding(&self, py: Python<'_>, argument: &str) -> PyResult<Vec<(usize, usize, usize)>> {
        self.inner.sharding(argument).map_err(|e| to_pyerr(py, e))
    }
    /// Bytes of host memory kept to rebuild lost shards.
    fn lineage_host_bytes(&self) -> u64 {
        self.inner.lineage_host_bytes()
    }
    /// Releases the shards now.
    fn free(&self) {
        self.inner.free();
    }
}

/// Uploads a C-contiguous (N, W) array of words holding values of `dtype` (numpy's name: a
/// float64 array's rows viewed as float32 words, two per value; float16, two values per
/// word) into shards placed by `strategy` on the devices that run `dtype`.
#[pyfunction]
#[pyo3(signature = (ctx, x, strategy=None, dtype="float32"))]
fn resident_upload(
    py: Python<'_>,
    ctx: &PyContext,
    x: PyReadonlyArray2<'_, f32>,
    strategy: Option<&str>,
    dtype: &str,
) -> PyResult<PyDeviceArray> {
    let strategy = ctx.strategy_or_default(py, strategy)?;
    let dtype = Dtype::parse("dtype", dtype).map_err(|e| to_pyerr(py, e))?;
    let cols = x.as_array().ncols();
    let data = contiguous(&x, "x")?;
    let inner = ctx.context(py)?;
    let (array, placement) =
        run_detached(py, move || inner.upload_in(data, cols, dtype, strategy))?;
    Ok(PyDeviceArray {
        inner: array,
        placement,
    })
}

/// Gathers every row of `x` into a new (rows, cols) float32 array, or into `out`
/// (C-contiguous, of that shape: the caller checked it).
#[pyfunction]
#[pyo3(signature = (ctx, x, out=None))]
fn resident_gather<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    x: &PyDeviceArray,
    out: Option<Bound<'py, PyArray2<f32>>>,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let inner = ctx.context(py)?;
    let array = &x.inner;
    let (out, ()) = run_into(
        py,
        (Ix2(array.rows(), array.cols()), None),
        out,
        move |out| inner.gather(array, out),
    )?;
    Ok(out)
}

/// Rows `start..stop` of `x` as a new DeviceArray, each shard's part on its device (a
/// copy: it outlives `x`); with `cols`, its rows viewed as rows of `cols` words (`cols`
/// dividing `x`'s width: a row of a 2-D array taken as a 1-D one).
#[pyfunction]
#[pyo3(signature = (ctx, x, start, stop, cols=None))]
fn resident_rows(
    py: Python<'_>,
    ctx: &PyContext,
    x: &PyDeviceArray,
    start: usize,
    stop: usize,
    cols: Option<usize>,
) -> PyResult<PyDeviceArray> {
    let inner = ctx.context(py)?;
    let array = &x.inner;
    let taken = run_detached(py, move || {
        let mut taken = inner.take_rows(array, start..stop)?;
        if let Some(cols) = cols {
            let factor = taken.cols().checked_div(cols).unwrap_or(0);
            if factor * cols != taken.cols() {
                return Err(amari_gpu::Error::invalid(
                    "cols",
                    format!("expected a divisor of {}, got {cols}", taken.cols()),
                ));
            }
            inner.split_rows(&mut taken, factor)?;
        }
        Ok(taken)
    })?;
    Ok(PyDeviceArray::from(taken))
}

/// One operand as Python passes it: a resident array, a float32, float64 or float16 one (of
/// dimension `D`: (N, C) rows unless an operation takes its operands as the caller shaped
/// them). Only the families with float64 (float16) kernels take float64 (float16) arrays (the
/// package converts the others' operands to float32); the rest refuse them
/// ([`dtype_refused`]).
pub(crate) enum PyOperand<'py, D: Dimension = Ix2> {
    Resident(Bound<'py, PyDeviceArray>),
    Host(PyReadonlyArray<'py, f32, D>),
    HostF64(PyReadonlyArray<'py, f64, D>),
    HostF16(PyReadonlyArray<'py, half::f16, D>),
}

impl<'py, D: Dimension> FromPyObject<'_, 'py> for PyOperand<'py, D> {
    type Error = PyErr;
    fn extract(ob: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(resident) = ob.cast::<PyDeviceArray>() {
            return Ok(PyOperand::Resident(resident.to_owned()));
        }
        match ob.extract() {
            Ok(host) => Ok(PyOperand::Host(host)),
            Err(error) => match ob.extract() {
                Ok(host) => Ok(PyOperand::HostF64(host)),
                Err(_) => match ob.extract() {
                    Ok(host) => Ok(PyOperand::HostF16(host)),
                    Err(_) => Err(error.into()),
                },
            },
        }
    }
}

impl<'py, D: Dimension> PyOperand<'py, D> {
    /// The dtype of the operand's values.
    pub(crate) fn dtype(&self) -> Dtype {
        match self {
            PyOperand::HostF64(_) => Dtype::F64,
            PyOperand::HostF16(_) => Dtype::F16,
            PyOperand::Resident(r) => r.get().inner.dtype(),
            PyOperand::Host(_) => Dtype::F32,
        }
    }
}

/// The error of a float32-only entry point given a `dtype` array (float64 or float16) as
/// `name` (the package converts such operands to float32 first; a direct caller of
/// `_native` may not).
pub(crate) fn dtype_refused(name: &str, dtype: Dtype) -> PyErr {
    PyTypeError::new_err(format!(
        "{name}: expected a float32 array or a DeviceArray, got a {dtype} array"
    ))
}

/// A call's `out` as Python passes it: a resident array, or a float32 or float64 array.
pub(crate) enum PyOut<'py, D: Dimension = Ix2> {
    Resident(Bound<'py, PyDeviceArray>),
    Host(Bound<'py, PyArray<f32, D>>),
    HostF64(Bound<'py, PyArray<f64, D>>),
    HostF16(Bound<'py, PyArray<half::f16, D>>),
}

impl<'py, D: Dimension> FromPyObject<'_, 'py> for PyOut<'py, D> {
    type Error = PyErr;
    fn extract(ob: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(resident) = ob.cast::<PyDeviceArray>() {
            return Ok(PyOut::Resident(resident.to_owned()));
        }
        match ob.cast::<PyArray<f32, D>>() {
            Ok(host) => Ok(PyOut::Host(host.to_owned())),
            Err(error) => match ob.cast::<PyArray<f64, D>>() {
                Ok(host) => Ok(PyOut::HostF64(host.to_owned())),
                Err(_) => match ob.cast::<PyArray<half::f16, D>>() {
                    Ok(host) => Ok(PyOut::HostF16(host.to_owned())),
                    Err(_) => Err(error.into()),
                },
            },
        }
    }
}

/// A call's result as Python gets it (a numpy array, a new DeviceArray, or the caller's
/// `out`) and the plan it followed (None when it ran where resident rows live).
pub(crate) type Returned<'py> = PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)>;

/// Runs `work` without the GIL into the destination the caller's `out` and operands ask
/// for, one rule for every operation: a DeviceArray `out` is written into and returned; with
/// a `resident` operand, a new DeviceArray (gathered into a numpy `out` when given);
/// otherwise host words of shape `dim` (the caller's numpy `out`, or a new array). Results
/// are of `dtype`, host ones arrays of it (`dim` counts its values) which `work` writes as
/// the engine's words.
pub(crate) fn run_to_in<'py, D, F>(
    py: Python<'py>,
    ctx: &PyContext,
    (resident, dtype): (bool, Dtype),
    (dim, out): (D, Option<PyOut<'py, D>>),
    work: F,
) -> Returned<'py>
where
    D: Dimension,
    F: FnOnce(&MultiGpuContext, Destination<'_>) -> amari_gpu::Result<Outcome> + Send,
{
    let inner = ctx.context(py)?;
    // The dtype of a host result (the checks of a numpy `out`; a resident one keeps its own).
    let host = match (&out, dtype) {
        (Some(PyOut::HostF64(_)) | None, Dtype::F64) => Dtype::F64,
        (Some(PyOut::HostF16(_)) | None, Dtype::F16) => Dtype::F16,
        (Some(PyOut::Resident(_)), _) | (Some(PyOut::Host(_)), Dtype::F32) | (None, _) => {
            Dtype::F32
        }
        (Some(_), _) => {
            return Err(PyTypeError::new_err(format!(
                "out: expected a {dtype} array (the result's dtype), got one of another dtype"
            )));
        }
    };
    match out {
        Some(PyOut::Resident(out)) => {
            let target = out.borrow();
            let target_ref = &target.inner;
            run_detached(py, move || {
                work(&inner, Destination::Resident(Some(target_ref)))
            })?;
            drop(target);
            Ok((out.into_any(), None))
        }
        out if resident => {
            // A new resident result first: nothing of a numpy `out` is written before the
            // gather, so an error until then is the call's own (not a partly written out).
            let ran = run_detached(py, || work(&inner, Destination::Resident(None)))?;
            let array = ran.array.ok_or_else(|| {
                to_pyerr(py, amari_gpu::Error::Internal("no resident result".into()))
            })?;
            // A numpy `out` is of the result's dtype (checked above): the words gathered.
            match out {
                Some(PyOut::Host(out)) => {
                    let (out, ()) =
                        run_into(py, (dim, None), Some(out), |o| inner.gather(&array, o))?;
                    return Ok((out.into_any(), None));
                }
                Some(PyOut::HostF64(out)) => {
                    let (out, ()) = run_into(py, (dim, None), Some(out), |o| {
                        inner.gather(&array, f64_words_mut(o))
                    })?;
                    return Ok((out.into_any(), None));
                }
                Some(PyOut::HostF16(out)) => {
                    let (out, ()) = run_into(py, (dim, None), Some(out), |o| {
                        inner.gather(&array, f16_words_mut(o.reinterpret_cast_mut())?)
                    })?;
                    return Ok((out.into_any(), None));
                }
                _ => {}
            }
            let handle = Bound::new(py, PyDeviceArray::from(array))?;
            Ok((handle.into_any(), None))
        }
        out => {
            let sized = Sized {
                calls: &ctx.short,
                size: dim.size(),
            };
            let (array, ran) = if host == Dtype::F16 {
                let host_out = match out {
                    Some(PyOut::HostF16(out)) => Some(out),
                    _ => None,
                };
                let (array, ran) = run_into(py, (dim, Some(sized)), host_out, move |out| {
                    let words = f16_words_mut(out.reinterpret_cast_mut())?;
                    work(&inner, Destination::Host(words))
                })?;
                (array.into_any(), ran)
            } else if host == Dtype::F64 {
                let host_out = match out {
                    Some(PyOut::HostF64(out)) => Some(out),
                    _ => None,
                };
                let (array, ran) = run_into(py, (dim, Some(sized)), host_out, move |out| {
                    work(&inner, Destination::Host(f64_words_mut(out)))
                })?;
                (array.into_any(), ran)
            } else {
                let host_out = match out {
                    Some(PyOut::Host(out)) => Some(out),
                    _ => None,
                };
                let (array, ran) = run_into(py, (dim, Some(sized)), host_out, move |out| {
                    work(&inner, Destination::Host(out))
                })?;
                (array.into_any(), ran)
            };
            let plan = ran.plan.map(|p| ctx.plans.record(py, &p)).transpose()?;
            Ok((array, plan))
        }
    }
}

/// Adds this module's class and functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeviceArray>()?;
    m.add_function(wrap_pyfunction!(resident_upload, m)?)?;
    m.add_function(wrap_pyfunction!(resident_gather, m)?)?;
    m.add_function(wrap_pyfunction!(resident_rows, m)?)?;
    Ok(())
}
