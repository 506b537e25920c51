//! Domain decomposition of 2-D grids: the grid is cut into row bands across the devices,
//! each band stays on its device with ghost rows around it, `halo` steps run between
//! exchanges of border rows through the host, and bands are rebalanced from measured round
//! times. Rules: explicit Jacobi steps of the heat equation (Dirichlet or periodic) and
//! Conway's Game of Life on a torus.
//!
//! Every cell is computed by the same arithmetic whatever band it is in and however many
//! steps its band runs between exchanges, so results are bit-identical for any number of
//! devices, halo width and layout. A device that fails is marked unhealthy and the run
//! starts again from the caller's grid on the others (same bits, by the same argument).

mod attempt;
mod balance;
mod bands;
mod record;
mod relayout;
mod report;
mod round;
mod rule;
mod run;
mod state;

pub use bands::{Band, Geometry};
pub use report::{DeviceRoundReport, Layout, Report, RoundReport};
pub use rule::{Boundary, Options, Rule};

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use run::evolve;
use state::Spec;

/// The grid after `opts.steps` heat steps (row-major, `height` × `width`).
pub fn heat(
    ctx: &MultiGpuContext,
    grid: &[f32],
    height: usize,
    width: usize,
    alpha: f32,
    boundary: Boundary,
    opts: &Options,
) -> Result<(Vec<f32>, Report)> {
    check_shape(grid.len(), height, width)?;
    if !(alpha.is_finite() && (0.0..=0.25).contains(&alpha)) {
        return Err(Error::invalid(
            "alpha",
            format!(
                "expected 0 <= alpha <= 0.25 (explicit steps are unstable above 1/4), got {alpha}"
            ),
        ));
    }
    if let Some(i) = grid.iter().position(|v| !v.is_finite()) {
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
    // Rows padded to whole vec4s: the kernel updates four cells per thread.
    let row_cells = width.div_ceil(4) * 4;
    let spec = Spec {
        rule: Rule::Heat { alpha },
        geometry: geometry(height, opts, boundary == Boundary::Periodic)?,
        width,
        row_bytes: row_cells * 4,
    };
    let mut padded = crate::alloc::zeroed(
        "grid",
        crate::alloc::product("grid", &[height, row_cells], 4)?,
    )?;
    for (row, cells) in padded
        .chunks_exact_mut(row_cells)
        .zip(grid.chunks_exact(width))
    {
        row[..width].copy_from_slice(cells);
    }
    let board: Vec<u8> = bytemuck::cast_slice(&padded).to_vec();
    drop(padded);
    let (board, report) = evolve(ctx, &spec, board, opts)?;
    // Read back word by word: a byte vector need not be aligned for f32.
    let mut out = Vec::with_capacity(height * width);
    for row in board.chunks_exact(spec.row_bytes) {
        out.extend(
            row[..width * 4]
                .chunks_exact(4)
                .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        );
    }
    Ok((out, report))
}

/// The grid after `opts.steps` Game of Life steps on a torus (cells 0 or 1).
pub fn life(
    ctx: &MultiGpuContext,
    grid: &[u8],
    height: usize,
    width: usize,
    opts: &Options,
) -> Result<(Vec<u8>, Report)> {
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
    // Rows padded to whole words: four cells per u32 on the device.
    let row_bytes = width.div_ceil(4) * 4;
    let mut board = crate::alloc::zeroed(
        "grid",
        crate::alloc::product("grid", &[height, row_bytes], 1)?,
    )?;
    for (row, cells) in board
        .chunks_exact_mut(row_bytes)
        .zip(grid.chunks_exact(width))
    {
        row[..width].copy_from_slice(cells);
    }
    let spec = Spec {
        rule: Rule::Life,
        geometry: geometry(height, opts, true)?,
        width,
        row_bytes,
    };
    let (board, report) = evolve(ctx, &spec, board, opts)?;
    let mut out = Vec::with_capacity(height * width);
    for row in board.chunks_exact(row_bytes) {
        out.extend_from_slice(&row[..width]);
    }
    Ok((out, report))
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
