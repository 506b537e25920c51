//! Check-only entries: the core's checks of an operation's operands, without a context and
//! without running it. A cluster's driver calls them on the whole call before it splits the
//! call into chunks for its nodes, so an argument error names the caller's positions and
//! shapes (not a chunk's) and nothing has been written or dispatched.

use amari_gpu::domain;
use amari_gpu::domain::host_grid::HeatCell;
use amari_gpu::dtype::{f64_words, Dtype};
use amari_gpu::fisher;
use amari_gpu::ga;
use amari_gpu::rows::{self, RowArray, RowsCall};
use amari_gpu::tropical::{self, Operands, Semiring};
use amari_gpu::ResidentOperand as Operand;
use numpy::ndarray::IxDyn;
use numpy::{Element, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::contiguous;
use crate::detach::run_detached;
use crate::errors::to_pyerr;
use crate::ga::{borrows, core_operands, dtype_of, own_shapes, parse, OpArg};
use crate::resident::{dtype_refused, PyOperand};
use crate::rows::host_words;
use crate::tropical::{mixed_dtypes, PyWeights};

/// A tropical product's context-free checks in the core: on float32 operands, and on
/// float64 ones.
type ProductChecks = (
    fn(Operands<'_>) -> amari_gpu::Result<()>,
    fn(Operands<'_, f64>) -> amari_gpu::Result<()>,
);

/// The context-free checks of a tropical product (`checks`, the core's for the operation,
/// in the operands' dtype: float32 or float64, the same for both) on host operands, `right`
/// naming the right operand.
fn check_product(
    py: Python<'_>,
    (a, b, semiring): (&PyOperand<'_, IxDyn>, &PyOperand<'_, IxDyn>, &str),
    right: &str,
    (check, check_f64): ProductChecks,
) -> PyResult<()> {
    let semiring = Semiring::parse(semiring).map_err(|e| to_pyerr(py, e))?;
    match (a, b) {
        (PyOperand::Host(a), PyOperand::Host(b)) => {
            let (a_shape, b_shape) = (a.shape().to_vec(), b.shape().to_vec());
            let operands = Operands {
                semiring,
                a: Operand::Host(contiguous(a, "a")?),
                a_shape: &a_shape,
                b: contiguous(b, right)?,
                b_shape: &b_shape,
            };
            // The NaN scan reads every word: without the GIL.
            run_detached(py, move || check(operands))
        }
        (PyOperand::HostF64(a), PyOperand::HostF64(b)) => {
            let (a_shape, b_shape) = (a.shape().to_vec(), b.shape().to_vec());
            let operands = Operands {
                semiring,
                a: Operand::Host(f64_words(contiguous(a, "a")?)),
                a_shape: &a_shape,
                b: contiguous(b, right)?,
                b_shape: &b_shape,
            };
            run_detached(py, move || check_f64(operands))
        }
        (PyOperand::Host(_), b) => Err(mixed_dtypes(right, Dtype::F32, b.dtype())),
        (a, _) => Err(dtype_refused("a", a.dtype())),
    }
}

/// A check-only entry of the tropical product `$op`: `$name(a, $right, semiring)` runs `$check`
/// (float32 operands) or `$check_f64` (float64 ones), the core's checks of the product's
/// operands, without a context: it raises their error, or returns None. One definition for
/// both products (they differ only in these).
macro_rules! product_check {
    ($name:ident, $op:literal, $right:ident, $check:path, $check_f64:path) => {
        #[doc = concat!(
            "Checks the operands of `", $op, "(ctx, a, ", stringify!($right), ", semiring)` ",
            "(float32 or float64) as its core entry does, without a context: raises its ",
            "error, or returns None."
        )]
        #[pyfunction]
        fn $name(
            py: Python<'_>,
            a: PyOperand<'_, IxDyn>,
            $right: PyOperand<'_, IxDyn>,
            semiring: &str,
        ) -> PyResult<()> {
            let checks: ProductChecks = ($check, $check_f64);
            check_product(py, (&a, &$right, semiring), stringify!($right), checks)
        }
    };
}

product_check!(
    check_tropical_matmul,
    "tropical_matmul",
    b,
    tropical::check_matmul_operands::<f32>,
    tropical::check_matmul_operands::<f64>
);
product_check!(
    check_tropical_matvec,
    "tropical_matvec",
    x,
    tropical::check_matvec_operands::<f32>,
    tropical::check_matvec_operands::<f64>
);

/// Checks the operands of `ga_apply(ctx, operation, signature, operands, grades)` as its
/// core entry does (`ga::check` needs no context), in `shapes`, the operands' shapes as the
/// caller gave them (default: their own): raises its error, or returns None. The Python
/// package runs it on the operands it converted, before it runs or uploads anything.
#[pyfunction]
#[pyo3(
    signature = (operation, signature, operands, grades=OpArg::Mask(0), shapes=None),
    text_signature = "(operation, signature, operands, grades=0, shapes=None)"
)]
fn check_ga_apply(
    py: Python<'_>,
    operation: &str,
    signature: (u32, u32, u32),
    operands: Vec<PyOperand<'_>>,
    grades: OpArg,
    shapes: Option<Vec<Vec<usize>>>,
) -> PyResult<()> {
    let (algebra, op) = parse(py, operation, signature, grades)?;
    let dtype = dtype_of(&operands)?;
    // Before the rows are viewed as words: float16 rows of an odd width do not pack into
    // words, which the dtype's own error says.
    op.check_dtype(dtype).map_err(|e| to_pyerr(py, e))?;
    let held = borrows(&operands);
    let ops = core_operands(py, op, &operands, &held)?;
    let shapes = shapes.unwrap_or_else(|| own_shapes(&operands));
    ga::check(&algebra, op, &ops, &shapes, dtype)
        .map(drop)
        .map_err(|e| to_pyerr(py, e))
}

/// Checks `fisher_categorical(ctx, values, logits)` as its core entry does on host rows
/// (float32 or float64; their shape, then their values), without a context: raises its
/// error, or returns None.
#[pyfunction]
fn check_fisher_categorical(
    py: Python<'_>,
    values: PyOperand<'_, IxDyn>,
    logits: bool,
) -> PyResult<()> {
    let name = if logits { "logits" } else { "probs" };
    match &values {
        PyOperand::Host(values) => {
            let data = contiguous(values, name)?;
            let (_, k) = fisher::categorical_shapes(Operand::Host(data), values.shape(), logits)
                .map_err(|e| to_pyerr(py, e))?;
            run_detached(py, move || {
                fisher::check_categorical_operands(data, k, logits)
            })
        }
        PyOperand::HostF64(values) => {
            let (_, k) =
                fisher::host_shape_f64(name, values.shape()).map_err(|e| to_pyerr(py, e))?;
            let data = contiguous(values, name)?;
            run_detached(py, move || {
                fisher::check_categorical_operands(data, k, logits)
            })
        }
        other => Err(dtype_refused(name, other.dtype())),
    }
}

/// Checks `mean` and `var` of `fisher_gaussian(ctx, mean, var)` as its core entry does on
/// host rows (both float32 or both float64; their shapes, then their values), without a
/// context: raises its error, or returns None.
#[pyfunction]
fn check_fisher_gaussian(
    py: Python<'_>,
    mean: PyOperand<'_, IxDyn>,
    var: PyOperand<'_, IxDyn>,
) -> PyResult<()> {
    match (&mean, &var) {
        (PyOperand::Host(mean), PyOperand::Host(var)) => {
            let (mean_data, var_data) = (contiguous(mean, "mean")?, contiguous(var, "var")?);
            let operands = (Operand::Host(mean_data), Operand::Host(var_data));
            let shapes = fisher::gaussian_shapes(operands, [mean.shape(), var.shape()])
                .map_err(|e| to_pyerr(py, e))?;
            run_detached(py, move || {
                fisher::check_gaussian(mean_data, var_data, shapes)
            })
        }
        (PyOperand::HostF64(mean), PyOperand::HostF64(var)) => {
            let shape = |name, dims: &[usize]| {
                fisher::host_shape_f64(name, dims).map_err(|e| to_pyerr(py, e))
            };
            let shapes = [shape("mean", mean.shape())?, shape("var", var.shape())?];
            let (mean_data, var_data) = (contiguous(mean, "mean")?, contiguous(var, "var")?);
            run_detached(py, move || {
                fisher::check_gaussian(mean_data, var_data, shapes)
            })
        }
        (PyOperand::Host(_), other) => Err(dtype_refused("var", other.dtype())),
        (other, _) => Err(dtype_refused("mean", other.dtype())),
    }
}

/// Checks `stencil(ctx, grid, alpha, boundary, {"steps": steps, ...})` as its core entry
/// does without a context (shape, `alpha`, `boundary`, finite cells) on a float32 or float64
/// grid, in its dtype: raises its error, or returns the power of two the core scales the
/// grid down by (0: it runs as given).
#[pyfunction]
fn check_stencil(
    py: Python<'_>,
    grid: PyWeights<'_>,
    alpha: f64,
    boundary: &str,
    steps: u64,
) -> PyResult<i32> {
    domain::Boundary::parse(boundary).map_err(|e| to_pyerr(py, e))?;
    match grid {
        // alpha as the float32 run takes it (rounded to float32).
        PyWeights::F32(grid) => check_grid(py, &grid, alpha as f32, steps),
        PyWeights::F64(grid) => check_grid(py, &grid, alpha, steps),
    }
}

/// [`check_stencil`] on cells of `T`.
fn check_grid<T: HeatCell + Element>(
    py: Python<'_>,
    grid: &PyReadonlyArray2<'_, T>,
    alpha: T,
    steps: u64,
) -> PyResult<i32> {
    let (height, width) = (grid.shape()[0], grid.shape()[1]);
    let cells = contiguous(grid, "grid")?;
    run_detached(py, move || {
        domain::check_heat(cells, height, width, alpha, steps)
    })
}

/// Checks `life(ctx, grid, options)` as its core entry does without a context (shape,
/// cells 0 or 1): raises its error, or returns None.
#[pyfunction]
fn check_life(py: Python<'_>, grid: PyReadonlyArray2<'_, u8>) -> PyResult<()> {
    let (height, width) = (grid.shape()[0], grid.shape()[1]);
    let cells = contiguous(&grid, "grid")?;
    run_detached(py, move || domain::check_life(cells, height, width))
}

/// Checks a caller's `split` of `stencil`/`life` as a run's first layout does (an entry per
/// device of `devices`, adding up to `height` rows, none for a device outside `healthy`):
/// raises its error, or returns the rows per healthy device as `(device, rows)` pairs.
#[pyfunction]
fn check_split(
    py: Python<'_>,
    split: Vec<usize>,
    devices: usize,
    healthy: Vec<usize>,
    height: usize,
) -> PyResult<Vec<(usize, usize)>> {
    domain::caller_split(&split, devices, &healthy, height).map_err(|e| to_pyerr(py, e))
}

/// Checks `map_rows(ctx, spec, arrays)` as its core entry does without a context (the
/// arrays' shapes in the caller's terms, `spec["source"]` against them by naga): raises
/// its error, or returns the call's items. `arrays` are host rows in `spec["dtype"]`
/// (float32 or float64) with the caller's shapes.
#[pyfunction]
fn check_map_rows(
    py: Python<'_>,
    spec: crate::rows::RowsSpec,
    arrays: Vec<(PyOperand<'_, IxDyn>, Vec<usize>)>,
) -> PyResult<usize> {
    let dtype = Dtype::parse("dtype", &spec.dtype).map_err(|e| to_pyerr(py, e))?;
    let mut views = Vec::with_capacity(arrays.len());
    for (k, (array, shape)) in arrays.iter().enumerate() {
        let Some(words) = host_words(py, k, array, dtype)? else {
            return Err(dtype_refused(&format!("arrays[{k}]"), array.dtype()));
        };
        views.push(RowArray {
            data: Operand::Host(words),
            shape,
        });
    }
    let call = RowsCall {
        source: &spec.source,
        arrays: views,
        out_cols: spec.out_cols,
        params: spec.params,
        dtype,
    };
    rows::check_call(&call)
        .map(|(items, _)| items)
        .map_err(|e| to_pyerr(py, e))
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_tropical_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(check_tropical_matvec, m)?)?;
    m.add_function(wrap_pyfunction!(check_ga_apply, m)?)?;
    m.add_function(wrap_pyfunction!(check_fisher_categorical, m)?)?;
    m.add_function(wrap_pyfunction!(check_fisher_gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(check_map_rows, m)?)?;
    m.add_function(wrap_pyfunction!(check_stencil, m)?)?;
    m.add_function(wrap_pyfunction!(check_life, m)?)?;
    m.add_function(wrap_pyfunction!(check_split, m)?)?;
    Ok(())
}
