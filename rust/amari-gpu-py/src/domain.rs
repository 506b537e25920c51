//! Domain decomposition on numpy grids: heat-equation steps and Game of Life; the final grid
//! is copied into the caller's `out` when given (the core assembles it from the bands).

use amari_gpu::domain::{self, Boundary, Options, Report};
use numpy::ndarray::Ix2;
use numpy::{Element, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{claim, contiguous, returned_into, Claimed};
use crate::context::PyContext;
use crate::detach::run_watched;
use crate::errors::to_pyerr;
use crate::fields::fields;

type Returned<'py, T> = PyResult<(Bound<'py, PyArray2<T>>, Bound<'py, PyDict>)>;

/// How to run a grid, read from a dict with one key per field of the core's `Options`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct RunOptions {
    steps: u64,
    halo: usize,
    rebalance: bool,
    split: Option<Vec<usize>>,
}

impl From<RunOptions> for Options {
    fn from(o: RunOptions) -> Self {
        Options {
            steps: o.steps,
            halo: o.halo,
            rebalance: o.rebalance,
            split: o.split,
        }
    }
}

fn report_dict<'py>(py: Python<'py>, report: &Report) -> PyResult<Bound<'py, PyDict>> {
    let rounds = report
        .rounds
        .iter()
        .map(|r| {
            let devices = r
                .devices
                .iter()
                .map(|dev| {
                    fields!(py, dev; device, rows, bands, work, upload_s, compute_s, readback_s)
                })
                .collect::<PyResult<Vec<_>>>()?;
            fields!(py, r; steps, wall_s, assemble_s;
                "compute_s" => r.compute_s(),
                "exchange_s" => r.exchange_s(),
                "devices" => devices)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let layouts = report
        .layouts
        .iter()
        .map(|l| fields!(py, l; at_step, split, bands, seconds))
        .collect::<PyResult<Vec<_>>>()?;
    fields!(py, report; steps, halo, wall_s, download_s, failures;
        "rounds" => rounds,
        "layouts" => layouts)
}

/// The (H, W) grid `cells` in the claimed `out` or a new array, with the run's report.
fn returned<'py, T: Element + Copy>(
    py: Python<'py>,
    (height, width): (usize, usize),
    claimed: Claimed<'py, T, Ix2>,
    (cells, report): (Vec<T>, Report),
) -> Returned<'py, T> {
    let array = returned_into(py, Ix2(height, width), claimed, cells)?;
    Ok((array, report_dict(py, &report)?))
}

/// Explicit heat-equation steps on a C-contiguous float32 (H, W) grid; `options` holds
/// steps, halo, rebalance and split; `progress(steps_done, steps_total)` is called between
/// rounds (at most every 0.1 s). Returns the grid and the run's report.
#[pyfunction]
#[pyo3(signature = (ctx, grid, alpha, boundary, options, progress=None, out=None))]
fn stencil<'py>(
    // The context as a bound object: the GIL token comes from it, one argument fewer.
    ctx: &Bound<'py, PyContext>,
    grid: PyReadonlyArray2<'py, f32>,
    alpha: f32,
    boundary: &str,
    options: RunOptions,
    progress: Option<Bound<'py, PyAny>>,
    out: Option<Bound<'py, PyArray2<f32>>>,
) -> Returned<'py, f32> {
    let py = ctx.py();
    let ctx = ctx.borrow();
    let boundary = Boundary::parse(boundary).map_err(|e| to_pyerr(py, e))?;
    let (height, width) = grid.as_array().dim();
    let cells = contiguous(&grid, "grid")?;
    let opts = Options::from(options);
    let claimed = claim(py, Ix2(height, width), out)?;
    let inner = ctx.context(py)?;
    let result = run_watched(py, progress.as_ref(), move || {
        domain::heat(&inner, cells, height, width, alpha, boundary, &opts)
    })?;
    returned(py, (height, width), claimed, result)
}

/// Game of Life steps on a C-contiguous uint8 (H, W) torus of 0/1 cells; `options` as for
/// `stencil`. Returns the grid and the run's report.
#[pyfunction]
#[pyo3(signature = (ctx, grid, options, progress=None, out=None))]
fn life<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    grid: PyReadonlyArray2<'py, u8>,
    options: RunOptions,
    progress: Option<Bound<'py, PyAny>>,
    out: Option<Bound<'py, PyArray2<u8>>>,
) -> Returned<'py, u8> {
    let (height, width) = grid.as_array().dim();
    let cells = contiguous(&grid, "grid")?;
    let opts = Options::from(options);
    let claimed = claim(py, Ix2(height, width), out)?;
    let inner = ctx.context(py)?;
    let result = run_watched(py, progress.as_ref(), move || {
        domain::life(&inner, cells, height, width, &opts)
    })?;
    returned(py, (height, width), claimed, result)
}

/// Adds the domain-decomposition functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stencil, m)?)?;
    m.add_function(wrap_pyfunction!(life, m)?)?;
    Ok(())
}
