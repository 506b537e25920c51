//! Check-only entries: the core's checks of an operation's operands, without a context and
//! without running it. A cluster's driver calls them on the whole call before it splits the
//! call into chunks for its nodes, so an argument error names the caller's positions and
//! shapes (not a chunk's) and nothing has been written or dispatched.

use amari_gpu::domain;
use amari_gpu::dtype::Dtype;
use amari_gpu::fisher;
use amari_gpu::ga;
use amari_gpu::rows::{self, RowArray, RowsCall};
use amari_gpu::tropical::{self, Operands, Semiring};
use amari_gpu::ResidentOperand as Operand;
use numpy::{PyReadonlyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::arrays::contiguous;
use crate::detach::run_detached;
use crate::errors::to_pyerr;
use crate::ga::{borrows, core_operands, dtype_of, own_shapes, parse};
use crate::resident::PyOperand;

/// The context-free checks of a tropical product (`check`, the core's for the operation)
/// on host operands, `right` naming the right operand.
fn check_product(
    py: Python<'_>,
    (a, b, semiring): (
        &PyReadonlyArrayDyn<'_, f32>,
        &PyReadonlyArrayDyn<'_, f32>,
        &str,
    ),
    right: &str,
    check: fn(Operands<'_>) -> amari_gpu::Result<()>,
) -> PyResult<()> {
    let semiring = Semiring::parse(semiring).map_err(|e| to_pyerr(py, e))?;
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

/// A check-only entry of the tropical product `$op`: `$name(a, $right, semiring)` runs `$check`,
/// the core's checks of the product's operands, without a context: it raises their error,
/// or returns None. One definition for both products (they differ only in these).
macro_rules! product_check {
    ($name:ident, $op:literal, $right:ident, $check:path) => {
        #[doc = concat!(
            "Checks the operands of `", $op, "(ctx, a, ", stringify!($right), ", semiring)` ",
            "as its core entry does, without a context: raises its error, or returns None."
        )]
        #[pyfunction]
        fn $name(
            py: Python<'_>,
            a: PyReadonlyArrayDyn<'_, f32>,
            $right: PyReadonlyArrayDyn<'_, f32>,
            semiring: &str,
        ) -> PyResult<()> {
            check_product(py, (&a, &$right, semiring), stringify!($right), $check)
        }
    };
}

product_check!(
    check_tropical_matmul,
    "tropical_matmul",
    b,
    tropical::check_matmul_operands
);
product_check!(
    check_tropical_matvec,
    "tropical_matvec",
    x,
    tropical::check_matvec_operands
);

/// Checks the operands of `ga_apply(ctx, operation, signature, operands, grades)` as its
/// core entry does (`ga::check` needs no context), in `shapes`, the operands' shapes as the
/// caller gave them (default: their own): raises its error, or returns None. The Python
/// package runs it on the operands it converted, before it runs or uploads anything.
#[pyfunction]
#[pyo3(signature = (operation, signature, operands, grades=0, shapes=None))]
fn check_ga_apply(
    py: Python<'_>,
    operation: &str,
    signature: (u32, u32, u32),
    operands: Vec<PyOperand<'_>>,
    grades: u32,
    shapes: Option<Vec<Vec<usize>>>,
) -> PyResult<()> {
    let (algebra, op) = parse(py, operation, signature, grades)?;
    let dtype = dtype_of(&operands)?;
    let held = borrows(&operands);
    let ops = core_operands(py, op, &operands, &held)?;
    let shapes = shapes.unwrap_or_else(|| own_shapes(&operands));
    ga::check(&algebra, op, &ops, &shapes, dtype)
        .map(drop)
        .map_err(|e| to_pyerr(py, e))
}

/// Checks `fisher_categorical(ctx, values, logits)` as its core entry does on host rows
/// (their shape, then their values), without a context: raises its error, or returns None.
#[pyfunction]
fn check_fisher_categorical(
    py: Python<'_>,
    values: PyReadonlyArrayDyn<'_, f32>,
    logits: bool,
) -> PyResult<()> {
    let name = if logits { "logits" } else { "probs" };
    let data = contiguous(&values, name)?;
    let (_, k) = fisher::categorical_shapes(Operand::Host(data), values.shape(), logits)
        .map_err(|e| to_pyerr(py, e))?;
    run_detached(py, move || {
        fisher::check_categorical_operands(data, k, logits)
    })
}

/// Checks `mean` and `var` of `fisher_gaussian(ctx, mean, var)` as its core entry does on
/// host rows (their shapes, then their values), without a context: raises its error, or
/// returns None.
#[pyfunction]
fn check_fisher_gaussian(
    py: Python<'_>,
    mean: PyReadonlyArrayDyn<'_, f32>,
    var: PyReadonlyArrayDyn<'_, f32>,
) -> PyResult<()> {
    let (mean_data, var_data) = (contiguous(&mean, "mean")?, contiguous(&var, "var")?);
    let operands = (Operand::Host(mean_data), Operand::Host(var_data));
    let shapes = fisher::gaussian_shapes(operands, [mean.shape(), var.shape()])
        .map_err(|e| to_pyerr(py, e))?;
    run_detached(py, move || {
        fisher::check_gaussian(mean_data, var_data, shapes)
    })
}

/// Checks `stencil(ctx, grid, alpha, boundary, {"steps": steps, ...})` as its core entry
/// does without a context (shape, `alpha`, `boundary`, finite cells): raises its error, or
/// returns the power of two the core scales the grid down by (0: it runs as given).
#[pyfunction]
fn check_stencil(
    py: Python<'_>,
    grid: PyReadonlyArray2<'_, f32>,
    alpha: f32,
    boundary: &str,
    steps: u64,
) -> PyResult<i32> {
    domain::Boundary::parse(boundary).map_err(|e| to_pyerr(py, e))?;
    let (height, width) = (grid.shape()[0], grid.shape()[1]);
    let cells = contiguous(&grid, "grid")?;
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
/// its error, or returns the call's items. `arrays` are host rows with the caller's shapes.
#[pyfunction]
fn check_map_rows(
    py: Python<'_>,
    spec: crate::rows::RowsSpec,
    arrays: Vec<(PyReadonlyArrayDyn<'_, f32>, Vec<usize>)>,
) -> PyResult<usize> {
    // The cluster splits float32 rows only (its node chunk calls take float32 arrays); rows
    // of other dtypes run whole on one node, whose own entry checks them.
    if spec.dtype != Dtype::F32.name() {
        let error = amari_gpu::Error::invalid(
            "dtype",
            format!(
                "check_map_rows checks float32 rows, got {} rows (a node running the whole \
                 call checks those)",
                spec.dtype
            ),
        );
        return Err(to_pyerr(py, error));
    }
    let mut views = Vec::with_capacity(arrays.len());
    for (k, (array, shape)) in arrays.iter().enumerate() {
        let data = Operand::Host(contiguous(array, &format!("arrays[{k}]"))?);
        views.push(RowArray { data, shape });
    }
    let call = RowsCall {
        source: &spec.source,
        arrays: views,
        out_cols: spec.out_cols,
        params: spec.params,
        dtype: Dtype::F32,
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
