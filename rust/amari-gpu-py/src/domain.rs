//! Domain decomposition on numpy grids: heat-equation steps and Game of Life. A heat run
//! writes its grid into the caller's `out`, or a new array (a reused block for a large one,
//! `pool`); Life's final grid is copied into `out` when given (the core assembles it from
//! the bands). The run's report is the package's `amari_gpu.domain.DomainReport`.

use amari_gpu::context::MultiGpuContext;
use amari_gpu::domain::host_grid::HeatCell;
use amari_gpu::domain::{self, Boundary, Options, Report};
use numpy::ndarray::Ix2;
use numpy::{Element, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::arrays::{claim, contiguous, output, partly_written, returned_into, writable};
use crate::context::PyContext;
use crate::detach::{run_watched, Sized};
use crate::errors::to_pyerr;
use crate::fields::fields;
use crate::plans::record;
use crate::resident::PyOut;
use crate::tropical::PyWeights;

type Returned<'py, T> = PyResult<(Bound<'py, PyArray2<T>>, Bound<'py, PyAny>)>;

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

/// A run's report as `amari_gpu.domain.DomainReport` (its one description in Python); its
/// rounds and layouts are dicts (the stub's `RoundDict` and `LayoutDict`).
fn report_record<'py>(py: Python<'py>, report: &Report) -> PyResult<Bound<'py, PyAny>> {
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
    let fields = fields!(py, report; steps, halo, wall_s, download_s, failures, left_out;
        "rounds" => rounds,
        "layouts" => layouts);
    record(py, "amari_gpu.domain", "DomainReport", fields)
}

/// The size class of a run of `opts.steps` steps on a grid of `shape`: its cells times its
/// steps.
fn grid_class<'a>(
    ctx: &'a PyContext,
    (height, width): (usize, usize),
    opts: &Options,
) -> Sized<'a> {
    Sized {
        calls: &ctx.short,
        size: (height * width).saturating_mul(usize::try_from(opts.steps).unwrap_or(usize::MAX)),
    }
}

/// A grid call's arguments as Python passed them, for [`run_grid`].
struct Grid<'py, T: Element> {
    cells: PyReadonlyArray2<'py, T>,
    options: RunOptions,
    progress: Option<Bound<'py, PyAny>>,
    out: Option<Bound<'py, PyArray2<T>>>,
}

/// Runs `steps` (the core's Life run) on `grid`: checks the grid, claims `out` before any
/// work, runs it without the GIL ([`run_watched`]), and returns the (H, W) grid copied into
/// `out` or as a new array, with the run's report.
fn run_grid<'py, T, F>(
    py: Python<'py>,
    ctx: &PyContext,
    grid: Grid<'py, T>,
    steps: F,
) -> Returned<'py, T>
where
    T: Element + Copy + Send + Sync,
    F: FnOnce(
            &MultiGpuContext,
            &[T],
            (usize, usize),
            &Options,
        ) -> amari_gpu::Result<(Vec<T>, Report)>
        + Send,
{
    let (height, width) = grid.cells.as_array().dim();
    let cells = contiguous(&grid.cells, "grid")?;
    let opts = Options::from(grid.options);
    let claimed = claim(py, Ix2(height, width), grid.out)?;
    let inner = ctx.context(py)?;
    let sized = grid_class(ctx, (height, width), &opts);
    let (cells, report) = run_watched(py, grid.progress.as_ref(), sized, move || {
        steps(&inner, cells, (height, width), &opts)
    })?;
    let array = returned_into(py, Ix2(height, width), claimed, cells)?;
    Ok((array, report_record(py, &report)?))
}

/// Explicit heat-equation steps on a C-contiguous float32 or float64 (H, W) grid, computed
/// in its dtype (`out`, when given, of that dtype); `options` holds steps, halo, rebalance
/// and split; `progress(steps_done, steps_total)` is called between rounds (at most every
/// 0.1 s). Returns the grid and the run's report.
#[pyfunction]
#[pyo3(signature = (ctx, grid, alpha, boundary, options, progress=None, out=None))]
fn stencil<'py>(
    // The context as a bound object: the GIL token comes from it, one argument fewer.
    ctx: &Bound<'py, PyContext>,
    grid: PyWeights<'py>,
    alpha: f64,
    boundary: &str,
    options: RunOptions,
    progress: Option<Bound<'py, PyAny>>,
    out: Option<PyOut<'py, Ix2>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let py = ctx.py();
    let boundary = Boundary::parse(boundary).map_err(|e| to_pyerr(py, e))?;
    let ctx = &ctx.borrow();
    let heat = (boundary, options, progress);
    // alpha as the float32 run has always taken it: Python's float rounded to float32.
    match (grid, out) {
        (PyWeights::F32(cells), None) => heat_in(py, ctx, cells, alpha as f32, heat, None),
        (PyWeights::F32(cells), Some(PyOut::Host(out))) => {
            heat_in(py, ctx, cells, alpha as f32, heat, Some(out))
        }
        (PyWeights::F64(cells), None) => heat_in(py, ctx, cells, alpha, heat, None),
        (PyWeights::F64(cells), Some(PyOut::HostF64(out))) => {
            heat_in(py, ctx, cells, alpha, heat, Some(out))
        }
        (PyWeights::F32(_), Some(_)) => Err(wrong_out("float32")),
        (PyWeights::F64(_), Some(_)) => Err(wrong_out("float64")),
    }
}

/// The error of an `out` of another dtype than the grid's (`want`).
fn wrong_out(want: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "out: expected a {want} array (the grid's dtype), got one of another dtype"
    ))
}

/// [`stencil`] on cells of `T`: the core's heat run in `T`, written into the caller's `out`
/// (checked and borrowed before any work) or a new array (`arrays::output`: a large one in
/// reused memory, so its pages do not fault again), run without the GIL ([`run_watched`]). An
/// error after the run began writing the caller's `out` says that it may hold part of the
/// result.
fn heat_in<'py, T: HeatCell + Element>(
    py: Python<'py>,
    ctx: &PyContext,
    cells: PyReadonlyArray2<'py, T>,
    alpha: T,
    (boundary, options, progress): (Boundary, RunOptions, Option<Bound<'py, PyAny>>),
    out: Option<Bound<'py, PyArray2<T>>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (height, width) = cells.as_array().dim();
    let grid = contiguous(&cells, "grid")?;
    let opts = Options::from(options);
    let callers = out.is_some();
    let array = output(py, Ix2(height, width), out)?;
    let inner = ctx.context(py)?;
    let result = {
        let mut view = writable(py, "out", &array)?;
        let out = view
            .as_slice_mut()
            .map_err(|e| PyValueError::new_err(format!("out: {e}")))?;
        let sized = grid_class(ctx, (height, width), &opts);
        // A new array may be written before the grid's cells are all checked (the run
        // checks them as it reads them); the caller's may not, and neither may a run whose
        // progress the caller watches (it would report steps of a grid then refused).
        let dest = if callers || progress.is_some() {
            domain::Dest::Callers(out)
        } else {
            domain::Dest::New(out)
        };
        run_watched(py, progress.as_ref(), sized, move || {
            domain::heat_into(
                &inner,
                grid,
                (height, width),
                (alpha, boundary),
                &opts,
                dest,
            )
        })
    };
    let report = match result {
        Ok(report) => report,
        Err(error) if callers => return Err(partly_written(py, error)),
        Err(error) => return Err(error),
    };
    Ok((array.into_any(), report_record(py, &report)?))
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
    let grid = Grid {
        cells: grid,
        options,
        progress,
        out,
    };
    run_grid(py, ctx, grid, |inner, cells, shape, opts| {
        domain::life(inner, cells, shape.0, shape.1, opts)
    })
}

/// The core's band balancer for a grid run whose bands live elsewhere (a cluster's nodes):
/// smoothed rates per band owner from measured rounds, and a new split when moving the rows
/// pays, by the rule and cost model of a local run.
#[pyclass(module = "amari_gpu._native", name = "Balancer")]
#[derive(Default)]
pub struct PyBalancer {
    inner: domain::Balancer,
}

#[pymethods]
impl PyBalancer {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Records that `owner` computed `cells` cells in `seconds`, `overhead_s` of them its
    /// fixed cost per round.
    fn observe(&mut self, owner: usize, cells: u64, seconds: f64, overhead_s: f64) {
        self.inner.observe(owner, cells, seconds, overhead_s);
    }

    /// Marks the end of a round.
    fn round_done(&mut self) {
        self.inner.round_done();
    }

    /// Marks a new layout: its first rounds are measured before it is judged again.
    fn relaid(&mut self) {
        self.inner.relaid();
    }

    /// The new split ((owner, rows) in band order) when moving to it pays over
    /// `remaining_rounds` rounds of `round_s` seconds, a move costing two round trips of
    /// `latency_s` plus `row_s` per row that changes owner (the new ghost rows of `halo`
    /// included); None otherwise.
    fn propose(
        &self,
        split: Vec<(usize, usize)>,
        round_s: f64,
        remaining_rounds: usize,
        latency_s: f64,
        row_s: f64,
        halo: usize,
    ) -> Option<Vec<(usize, usize)>> {
        let cost = |to: &[(usize, usize)]| {
            2.0 * latency_s + domain::moved_rows(&split, to, halo) as f64 * row_s
        };
        self.inner
            .propose(&split, round_s, remaining_rounds, &cost)
            .map(|p| p.split)
    }
}

/// Adds the domain-decomposition functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stencil, m)?)?;
    m.add_function(wrap_pyfunction!(life, m)?)?;
    m.add_class::<PyBalancer>()?;
    Ok(())
}
