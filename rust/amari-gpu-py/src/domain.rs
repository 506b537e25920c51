//! Domain decomposition on numpy grids: heat-equation steps and Game of Life.

use std::sync::Arc;

use amari_gpu::domain::{self, Boundary, Options, Report};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::arrays::contiguous;
use crate::context::PyContext;
use crate::detach::run_detached;
use crate::errors::to_pyerr;

type Returned<'py, T> = PyResult<(Bound<'py, PyArray2<T>>, Bound<'py, PyDict>)>;

fn report_dict<'py>(py: Python<'py>, report: &Report) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("steps", report.steps)?;
    d.set_item("halo", report.halo)?;
    d.set_item("wall_s", report.wall_s)?;
    let rounds = PyList::empty(py);
    for r in &report.rounds {
        let round = PyDict::new(py);
        round.set_item("steps", r.steps)?;
        round.set_item("wall_s", r.wall_s)?;
        round.set_item("assemble_s", r.assemble_s)?;
        round.set_item("compute_s", r.compute_s())?;
        round.set_item("exchange_s", r.exchange_s())?;
        let devices = PyList::empty(py);
        for dev in &r.devices {
            let entry = PyDict::new(py);
            entry.set_item("device", dev.device)?;
            entry.set_item("rows", dev.rows)?;
            entry.set_item("bands", dev.bands)?;
            entry.set_item("work", dev.work)?;
            entry.set_item("upload_s", dev.upload_s)?;
            entry.set_item("compute_s", dev.compute_s)?;
            entry.set_item("readback_s", dev.readback_s)?;
            devices.append(entry)?;
        }
        round.set_item("devices", devices)?;
        rounds.append(round)?;
    }
    d.set_item("rounds", rounds)?;
    let layouts = PyList::empty(py);
    for l in &report.layouts {
        let entry = PyDict::new(py);
        entry.set_item("at_step", l.at_step)?;
        entry.set_item("split", l.split.clone())?;
        entry.set_item("bands", l.bands)?;
        entry.set_item("seconds", l.seconds)?;
        layouts.append(entry)?;
    }
    d.set_item("layouts", layouts)?;
    d.set_item("download_s", report.download_s)?;
    d.set_item("failures", report.failures.clone())?;
    Ok(d)
}

fn options(steps: u64, halo: usize, rebalance: bool, split: Option<Vec<usize>>) -> Options {
    Options {
        steps,
        halo,
        rebalance,
        split,
    }
}

/// Explicit heat-equation steps on a C-contiguous float32 (H, W) grid; returns the grid and
/// the run's report.
#[pyfunction]
#[pyo3(signature = (ctx, grid, steps, alpha, boundary, halo, rebalance=true, split=None))]
#[allow(clippy::too_many_arguments)]
fn stencil<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    grid: PyReadonlyArray2<'py, f32>,
    steps: u64,
    alpha: f32,
    boundary: &str,
    halo: usize,
    rebalance: bool,
    split: Option<Vec<usize>>,
) -> Returned<'py, f32> {
    let boundary = Boundary::parse(boundary).map_err(|e| to_pyerr(py, e))?;
    let (height, width) = grid.as_array().dim();
    let cells = contiguous(&grid, "grid")?;
    let opts = options(steps, halo, rebalance, split);
    let inner = Arc::clone(&ctx.inner);
    let (out, report) = run_detached(py, move || {
        domain::heat(&inner, cells, height, width, alpha, boundary, &opts)
    })?;
    let array = Array2::from_shape_vec((height, width), out)
        .map_err(|e| PyValueError::new_err(format!("grid: {e}")))?;
    Ok((array.into_pyarray(py), report_dict(py, &report)?))
}

/// Game of Life steps on a C-contiguous uint8 (H, W) torus of 0/1 cells; returns the grid
/// and the run's report.
#[pyfunction]
#[pyo3(signature = (ctx, grid, steps, halo, rebalance=true, split=None))]
fn life<'py>(
    py: Python<'py>,
    ctx: &PyContext,
    grid: PyReadonlyArray2<'py, u8>,
    steps: u64,
    halo: usize,
    rebalance: bool,
    split: Option<Vec<usize>>,
) -> Returned<'py, u8> {
    let (height, width) = grid.as_array().dim();
    let cells = contiguous(&grid, "grid")?;
    let opts = options(steps, halo, rebalance, split);
    let inner = Arc::clone(&ctx.inner);
    let (out, report) = run_detached(py, move || {
        domain::life(&inner, cells, height, width, &opts)
    })?;
    let array = Array2::from_shape_vec((height, width), out)
        .map_err(|e| PyValueError::new_err(format!("grid: {e}")))?;
    Ok((array.into_pyarray(py), report_dict(py, &report)?))
}

/// Adds the domain-decomposition functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stencil, m)?)?;
    m.add_function(wrap_pyfunction!(life, m)?)?;
    Ok(())
}
