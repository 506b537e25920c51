//! Domain decomposition of 2-D grids: the grid is cut into row bands across the devices,
//! each band stays on its device with ghost rows around it, `halo` steps run between
//! exchanges of border rows through the host, and bands are rebalanced from measured round
//! times. Rules: explicit Jacobi steps of the heat equation (Dirichlet or periodic) and
//! Conway's Game of Life on a torus. A band on the host device is held in host memory and
//! stepped by the host kernels (`domain::host_grid`), exchanging halos through the same board.
//!
//! Every cell is computed by the same arithmetic whatever band it is in and however many
//! steps its band runs between exchanges, so results are bit-identical for any number of
//! devices, halo width, layout and device kind. A device that fails is marked unhealthy and the run
//! starts again from the caller's grid on the others (same bits, by the same argument).

mod attempt;
mod balance;
mod bands;
mod board;
mod heat_simd;
mod host_blocked;
#[cfg(test)]
mod host_blocked_tests;
#[cfg(test)]
mod host_calls_tests;
pub mod host_grid;
mod parallel;
mod record;
mod relayout;
mod report;
mod round;
mod rule;
mod run;
mod scan;
mod state;

pub use balance::{Balancer, Proposal};
pub use bands::{caller_split, Band, Geometry};
pub use relayout::moved_rows;
pub use report::{DeviceRoundReport, Layout, Report, RoundReport};
pub use rule::{Boundary, Options, Rule};

use std::sync::Arc;

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::host::HostPool;
use board::{cells_board, heat_board, heat_result};
use host_grid::HeatCell;
use run::{evolve, Built, Source, Written};
use scan::{top_bits_on, GridScan};
use state::Spec;

/// The grid after `opts.steps` heat steps (row-major, `height` × `width`), computed in the
/// cells' type (float32 or float64; float64 only on the devices that run it).
pub fn heat<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    height: usize,
    width: usize,
    alpha: T,
    boundary: Boundary,
    opts: &Options,
) -> Result<(Vec<T>, Report)> {
    let (spec, shift) = heat_spec(ctx, grid, (height, width), (alpha, boundary), opts)?;
    heat_checked(ctx, grid, (height, width), boundary, opts, (&spec, shift))
}

/// [`heat`] of a grid already checked, run as `spec`, scaled down by 2^`shift`.
fn heat_checked<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    (height, width): (usize, usize),
    boundary: Boundary,
    opts: &Options,
    (spec, shift): (&Spec, i32),
) -> Result<(Vec<T>, Report)> {
    let row_bytes = spec.row_bytes;
    if shift == 0 && row_bytes == width * size_of::<T>() {
        // Rows without padding, unscaled: the board's words are the result's cells.
        let board = || cells_board(ctx, grid, width);
        let mut board = Built::new(&board)?;
        let report = evolve(ctx, spec, (&mut board, None), opts)?;
        return Ok((board.board, report));
    }
    let board = || heat_board(ctx, grid, width, row_bytes, shift);
    let mut board = Built::new(&board)?;
    let report = evolve(ctx, spec, (&mut board, None), opts)?;
    let mut out = heat_result(ctx, board.board, height, width, row_bytes)?;
    if shift != 0 {
        unscale_heat(&mut out, grid, height, width, boundary, shift)?;
    }
    Ok((out, report))
}

/// Where [`heat_into`] writes, and so when it may check the grid's cells.
pub enum Dest<'a, T> {
    /// The caller's array: the grid is checked before any row of it is written.
    Callers(&'a mut [T]),
    /// A new result array, of no use to anyone if the grid is refused: where the context has
    /// the host device, the grid's cells are checked as the run reads them
    /// ([`scan::GridScan`]), and the run's result returned only once they all were.
    New(&'a mut [T]),
}

/// [`heat`] into `out` (`height` × `width` cells, not `grid`'s): its result is written
/// there, whatever `out` held. A grid whose rows need no padding and no scaling, stepped at
/// least once, is laid out on the devices straight from `grid`, and the run writes its rows
/// into `out` as it finishes them (where [`heat`] copies the grid into a new board first);
/// any other grid runs as [`heat`] does and its result is copied into `out`. On an error,
/// `out` may hold part of the result; bad input is refused before any row of a
/// [`Dest::Callers`] array is written, and into a [`Dest::New`] one the grid's cells are
/// checked while the run reads them, a grid that must be scaled then run again scaled
/// (the checks' outcome is the same either way).
pub fn heat_into<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    (height, width): (usize, usize),
    (alpha, boundary): (T, Boundary),
    opts: &Options,
    out: Dest<'_, T>,
) -> Result<Report> {
    let (out, during) = match out {
        Dest::Callers(out) => (out, false),
        Dest::New(out) => (out, true),
    };
    check_heat_args(grid.len(), (height, width), alpha)?;
    if out.len() != grid.len() {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({height}, {width})"),
            actual: format!("{} cells", out.len()),
        });
    }
    let in_place = |spec: &Spec| spec.row_bytes == width * size_of::<T>() && opts.steps > 0;
    // The bits of the grid's largest |u|, once found (the grid is read for them once).
    let mut top = None;
    // Without the host device no pass reads the grid on the host: the check would only
    // move after the run, and a refused grid cost a whole run first.
    if during && ctx.host_pool().is_some() {
        let spec = heat_rule::<T>((height, width), (alpha, boundary), opts)?;
        if in_place(&spec) {
            let scan = Arc::new(GridScan::new(grid, width));
            let run = run_lent(ctx, grid, &spec, opts, &mut *out, Some(&scan));
            if let Err(Error::Cancelled) = run {
                return run;
            }
            // The run read (or uploaded) every row; only a grid found finite and within
            // the limit keeps its result (one near the limit runs again below, scaled).
            let found = scan.finish(ctx.host_pool(), grid);
            if heat_shift_of(grid, width, found, opts.steps)? == 0 {
                return run;
            }
            top = Some(found);
        }
    }
    let top = top.unwrap_or_else(|| top_bits_on(ctx.host_pool(), grid));
    let shift = heat_shift_of(grid, width, top, opts.steps)?;
    let spec = heat_rule::<T>((height, width), (alpha, boundary), opts)?;
    if shift == 0 && in_place(&spec) {
        return run_lent(ctx, grid, &spec, opts, out, None);
    }
    let (cells, report) = heat_checked(ctx, grid, (height, width), boundary, opts, (&spec, shift))?;
    let row = width * size_of::<T>();
    crate::host::rows::copy_rows(
        ctx.host_pool(),
        (bytemuck::cast_slice_mut::<T, u8>(out), row),
        (bytemuck::cast_slice::<T, u8>(&cells), row),
        row,
        |_| (),
    );
    Ok(report)
}

/// The run of `spec` laid out from `grid` (rows without padding, more than no steps), its
/// rows written into `out`; the grid's cells fed to `scan` as its first layout's host
/// passes read them in place, when given.
fn run_lent<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    spec: &Spec,
    opts: &Options,
    out: &mut [T],
    scan: Option<&Arc<GridScan>>,
) -> Result<Report> {
    let mut board = Written {
        board: bytemuck::cast_slice_mut(out),
    };
    let source = Source {
        grid: bytemuck::cast_slice(grid),
        scan,
    };
    evolve(ctx, spec, (&mut board, Some(source)), opts)
}

/// A heat run's checks and spec: the grid's shape, `alpha` and cells checked, the power of
/// two it is scaled down by (see [`check_heat`]).
fn heat_spec<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    (height, width): (usize, usize),
    (alpha, boundary): (T, Boundary),
    opts: &Options,
) -> Result<(Spec, i32)> {
    let shift = check_heat_on(ctx.host_pool(), grid, (height, width), alpha, opts.steps)?;
    Ok((
        heat_rule::<T>((height, width), (alpha, boundary), opts)?,
        shift,
    ))
}

/// A heat run's spec in cells of `T` (its halo checked; not the grid's cells).
fn heat_rule<T: HeatCell>(
    (height, width): (usize, usize),
    (alpha, boundary): (T, Boundary),
    opts: &Options,
) -> Result<Spec> {
    // Rows padded to whole vec4s: the kernel updates four cells per thread.
    let row_bytes = width.div_ceil(4) * 4 * size_of::<T>();
    Ok(Spec {
        rule: Rule::Heat {
            alpha: alpha.to_f64(),
            dtype: T::DTYPE,
        },
        geometry: geometry(height, opts, boundary == Boundary::Periodic)?,
        width,
        row_bytes,
    })
}

/// The power of two a heat grid whose largest |u| is `top` (finite) is scaled down by
/// (`u / 2^shift`) so that no step overflows (see [`HeatCell::LIMIT`]):
/// 0 for every grid whose largest |u| is at most 2^LIMIT (float32: 2^123, about 1.06e37;
/// float64: 2^1019, about 5.6e306), which runs bit for bit as given. The scaling is chosen
/// from the whole grid on the host, before bands are cut, and heat steps are linear, so the
/// scaled run is the same on every device layout and halo.
fn heat_shift<T: HeatCell>(top: T, steps: u64) -> i32 {
    let top = top.to_f64();
    if steps == 0 || top <= 2f64.powi(T::LIMIT) {
        return 0;
    }
    // top is below 2^(LIMIT + 5) (the power of two above the largest finite), so the shift
    // is at most 5; its exponent is float64's (exact for either type's values).
    let e = ((top.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    e - T::LIMIT + 1
}

/// Multiplies every cell by 2^`e` (|e| <= 5: exact for normal results).
fn scale_cells<T: HeatCell>(cells: &mut [T], e: i32) {
    let f = 2f64.powi(e);
    for v in cells {
        *v = T::from_f64(v.to_f64() * f);
    }
}

/// Undoes `heat_shift` on the result: exact, except that cells whose scaled value fell below
/// the type's normal range (float32: below about 1e-38 · 2^shift) carry its subnormal
/// spacing. Dirichlet edges keep their initial values by definition, so they are copied from
/// `grid` bit for bit. A result beyond the type's range after unscaling is an error, never an
/// inf.
fn unscale_heat<T: HeatCell>(
    out: &mut [T],
    grid: &[T],
    height: usize,
    width: usize,
    boundary: Boundary,
    shift: i32,
) -> Result<()> {
    scale_cells(out, shift);
    if boundary == Boundary::Dirichlet {
        for i in 0..height {
            for j in 0..width {
                if i == 0 || j == 0 || i + 1 == height || j + 1 == width {
                    out[i * width + j] = grid[i * width + j];
                }
            }
        }
    }
    if let Some(i) = out.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(
            "grid",
            format!(
                "the heat steps left the {dtype} range at ({}, {}): values this close to \
                 the {dtype} limit (max |u| near {}) cannot be stepped; scale the grid down",
                i / width,
                i % width,
                T::RANGE.trim_start_matches('±'),
                dtype = T::DTYPE
            ),
        ));
    }
    Ok(())
}

/// The checks of a heat run (the grid's shape, `alpha`, finite cells), without a context:
/// the power of two the grid is scaled down by so that no step overflows (0 for every grid
/// whose largest |u| is at most 2^LIMIT, which runs bit for bit as given).
/// A cluster's driver calls it on the whole grid before it cuts bands for its nodes.
pub fn check_heat<T: HeatCell>(
    grid: &[T],
    height: usize,
    width: usize,
    alpha: T,
    steps: u64,
) -> Result<i32> {
    check_heat_on(None, grid, (height, width), alpha, steps)
}

/// [`check_heat`], the grid read on `pool`'s threads where there is one.
fn check_heat_on<T: HeatCell>(
    pool: Option<&HostPool>,
    grid: &[T],
    (height, width): (usize, usize),
    alpha: T,
    steps: u64,
) -> Result<i32> {
    check_heat_args(grid.len(), (height, width), alpha)?;
    heat_shift_of(grid, width, top_bits_on(pool, grid), steps)
}

/// The checks of a heat run that do not read the grid's cells: its shape (`len` cells)
/// and `alpha`.
fn check_heat_args<T: HeatCell>(
    len: usize,
    (height, width): (usize, usize),
    alpha: T,
) -> Result<()> {
    check_shape(len, height, width)?;
    if !(alpha.is_finite() && (0.0..=0.25).contains(&alpha.to_f64())) {
        return Err(Error::invalid(
            "alpha",
            format!(
                "expected 0 <= alpha <= 0.25 (explicit steps are unstable above 1/4), got {alpha}"
            ),
        ));
    }
    Ok(())
}

/// The check of a heat grid's cells from the bits of its largest |u|, `top`: the first
/// cell that is not finite refused, else the power of two it is scaled down by
/// ([`heat_shift`]).
fn heat_shift_of<T: HeatCell>(grid: &[T], width: usize, top: T::Bits, steps: u64) -> Result<i32> {
    if top >= T::INFINITY.abs_bits() {
        // Only here, on a grid already known to hold one, is the first one looked for.
        let i = grid.iter().position(|v| !v.is_finite()).unwrap_or(0);
        // Written as Python writes it ("nan", "inf"): this is the only finiteness check.
        let found = if grid[i].is_nan() {
            "nan".to_string()
        } else {
            grid[i].to_string()
        };
        return Err(Error::invalid(
            "grid",
            format!(
                "expected finite values, found {found} at ({}, {})",
                i / width,
                i % width
            ),
        ));
    }
    Ok(heat_shift(T::from_abs_bits(top), steps))
}

/// The grid after `opts.steps` Game of Life steps on a torus (cells 0 or 1).
pub fn life(
    ctx: &MultiGpuContext,
    grid: &[u8],
    height: usize,
    width: usize,
    opts: &Options,
) -> Result<(Vec<u8>, Report)> {
    check_life(grid, height, width)?;
    // Rows padded to whole words: four cells per u32 on the device.
    let row_bytes = width.div_ceil(4) * 4;
    let board = || -> Result<Vec<f32>> {
        let mut board = ctx.spare.take(
            "grid",
            crate::alloc::product("grid", &[height, row_bytes / 4], 4)?,
        )?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut board);
        for (row, cells) in bytes
            .chunks_exact_mut(row_bytes)
            .zip(grid.chunks_exact(width))
        {
            row[..width].copy_from_slice(cells);
        }
        Ok(board)
    };
    let spec = Spec {
        rule: Rule::Life,
        geometry: geometry(height, opts, true)?,
        width,
        row_bytes,
    };
    let mut board = Built::new(&board)?;
    let report = evolve(ctx, &spec, (&mut board, None), opts)?;
    let board = board.board;
    let mut out = Vec::with_capacity(height * width);
    let bytes: &[u8] = bytemuck::cast_slice(&board);
    for row in bytes.chunks_exact(row_bytes) {
        out.extend_from_slice(&row[..width]);
    }
    ctx.spare.keep(board);
    Ok((out, report))
}

/// The checks of a Game of Life run (the grid's shape, cells 0 or 1), without a context.
pub fn check_life(grid: &[u8], height: usize, width: usize) -> Result<()> {
    check_shape(grid.len(), height, width)?;
    if let Some(i) = grid.iter().position(|&v| v > 1) {
        return Err(Error::invalid(
            "grid",
            format!(
                "expected cells 0 or 1, found {} at ({}, {})",
                grid[i],
                i / width,
                i % width
            ),
        ));
    }
    Ok(())
}

fn check_shape(len: usize, height: usize, width: usize) -> Result<()> {
    if height == 0 || width == 0 || height.checked_mul(width) != Some(len) {
        return Err(Error::Shape {
            argument: "grid".into(),
            expected: "(H, W) with H >= 1 and W >= 1".into(),
            actual: format!("({height}, {width}) holding {len} cells"),
        });
    }
    Ok(())
}

fn geometry(height: usize, opts: &Options, periodic: bool) -> Result<Geometry> {
    if opts.halo == 0 {
        return Err(Error::invalid("halo", "expected at least 1, got 0"));
    }
    Ok(Geometry {
        height,
        halo: opts.halo,
        periodic,
    })
}

#[cfg(test)]
mod tests {
    use super::scan::top_bits;
    use super::*;

    #[test]
    fn heat_grids_are_scaled_only_near_the_float32_limit() {
        let heat_shift =
            |grid: &[f32], steps| heat_shift(f32::from_abs_bits(top_bits(grid)), steps);
        assert_eq!(heat_shift(&[1e37, -1e37], 5), 0);
        assert_eq!(heat_shift(&[2f32.powi(123)], 5), 0);
        assert_eq!(heat_shift(&[1e38], 0), 0);
        assert_eq!(heat_shift(&[-1e38], 5), 4);
        assert_eq!(heat_shift(&[f32::MAX], 5), 5);
        let mut cells = [f32::MAX, 1.0, -3e38];
        scale_cells(&mut cells, -5);
        assert!(cells.iter().all(|v| v.abs() <= 2f32.powi(123)));
        scale_cells(&mut cells, 5);
        assert_eq!(cells, [f32::MAX, 1.0, -3e38]);
    }

    /// float64 grids by the same rule at float64's edge: 8 max|u| below the largest finite
    /// with a factor 2 to spare, so 2^1019 runs as given and the next value up is scaled.
    #[test]
    fn float64_heat_grids_are_scaled_only_near_the_float64_limit() {
        let heat_shift =
            |grid: &[f64], steps| heat_shift(f64::from_abs_bits(top_bits(grid)), steps);
        let edge = 2f64.powi(1019);
        assert_eq!(heat_shift(&[edge, -edge], 5), 0);
        assert_eq!(
            heat_shift(&[1e38, -3e38], 5),
            0,
            "float32's limit is not float64's"
        );
        assert_eq!(heat_shift(&[f64::from_bits(edge.to_bits() + 1)], 5), 1);
        assert_eq!(heat_shift(&[-2f64.powi(1022)], 5), 4);
        assert_eq!(heat_shift(&[f64::MAX], 0), 0);
        assert_eq!(heat_shift(&[f64::MAX], 5), 5);
        // Scaled by the shift, the largest grid is back within the limit, and 8 times it
        // stays finite.
        let mut cells = [f64::MAX, 1.0, -1.5e308];
        scale_cells(&mut cells, -5);
        assert!(cells.iter().all(|v| v.abs() <= edge));
        assert!((8.0 * cells[0]).is_finite() && (8.0 * edge).is_finite());
        scale_cells(&mut cells, 5);
        assert_eq!(cells, [f64::MAX, 1.0, -1.5e308]);
        assert_eq!(check_heat(&[f64::MAX, 0.0], 1, 2, 0.25, 3), Ok(5));
        assert_eq!(check_heat(&[edge, 0.0], 1, 2, 0.25, 3), Ok(0));
    }

    /// A grid call hands its board back to the context and its host bands' buffers back to
    /// the host device, and the next call of the same size runs in those buffers (mapped
    /// pages, no fresh ones faulted in), with the same bits.
    #[test]
    fn grid_calls_on_the_host_reuse_the_buffers_of_the_last_call() {
        let ctx = MultiGpuContext::on(&["host"]);
        let crate::device::DeviceKind::Host(host) = &ctx.devices()[0].kind else {
            panic!("a host device");
        };
        // Rows padded (41 cells to 44): the board is copied out and kept.
        let (h, w) = (64, 41);
        let grid: Vec<f32> = (0..h * w)
            .map(|i| ((i * 37) % 101) as f32 / 101.0)
            .collect();
        let opts = Options {
            steps: 16,
            halo: 16,
            rebalance: false,
            split: None,
        };
        let run = || {
            heat(&ctx, &grid, h, w, 0.2, Boundary::Periodic, &opts)
                .unwrap()
                .0
        };
        let first = run();
        let (bands, board) = (host.spare.kept(), ctx.spare.kept());
        assert_eq!(bands.len(), 2, "both buffers of the one band");
        assert!(!board.is_empty(), "the board");
        let second = run();
        assert_eq!(host.spare.kept(), bands);
        assert_eq!(ctx.spare.kept(), board);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&first), bits(&second));
    }
}
