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

mod balance;
mod bands;
mod record;
mod relayout;
mod report;
mod round;
mod run;
mod state;

pub use bands::{Band, Geometry};
pub use report::{DeviceRoundReport, Layout, Report, RoundReport};

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::kernel::Kernel;
use run::evolve;
use state::Spec;

/// The update rule of a grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// u ← u + α(u_up + u_down + u_left + u_right − 4u), float32 cells.
    Heat {
        /// Diffusion number, stable for 0 ≤ α ≤ 1/4.
        alpha: f32,
    },
    /// Conway's Game of Life, cells 0 or 1, always on a torus.
    Life,
}

impl Rule {
    fn name(self) -> &'static str {
        match self {
            Rule::Heat { .. } => "domain/heat",
            Rule::Life => "domain/life",
        }
    }

    fn kernel(self) -> Kernel {
        let source = match self {
            Rule::Heat { .. } => crate::shaders::HEAT,
            Rule::Life => crate::shaders::LIFE,
        };
        Kernel::map(self.name(), Family::Stencil, source)
    }

    /// Bytes a step reads and writes per cell at the least (for the plan's estimates).
    fn bytes_per_cell(self) -> f64 {
        match self {
            Rule::Heat { .. } => 8.0,
            Rule::Life => 2.0,
        }
    }
}

/// What lies beyond the grid's edges (heat; Life is always periodic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The outermost rows and columns keep their initial values.
    Dirichlet,
    /// The grid wraps in both directions.
    Periodic,
}

impl Boundary {
    /// Every boundary condition, in documentation order.
    pub const ALL: [Boundary; 2] = [Boundary::Dirichlet, Boundary::Periodic];

    /// The public name.
    pub fn name(self) -> &'static str {
        match self {
            Boundary::Dirichlet => "dirichlet",
            Boundary::Periodic => "periodic",
        }
    }

    /// Parses "dirichlet" or "periodic".
    pub fn parse(name: &str) -> Result<Self> {
        Boundary::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .ok_or_else(|| {
                Error::invalid(
                    "boundary",
                    format!("expected \"dirichlet\" or \"periodic\", got {name:?}"),
                )
            })
    }
}

/// How to run a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Steps to run.
    pub steps: u64,
    /// Steps between exchanges (ghost rows on each side of a band).
    pub halo: usize,
    /// Whether bands move between devices as round times are measured.
    pub rebalance: bool,
    /// Rows per device id for the first layout (0 for a device without rows); `None`
    /// splits by the devices' measured streaming bandwidth.
    pub split: Option<Vec<usize>>,
}

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
    let mut padded = vec![0.0f32; height * row_cells];
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
    let mut board = vec![0u8; height * row_bytes];
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
