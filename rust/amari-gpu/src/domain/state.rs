//! What a band runs, as the device interface's band storage asks for it ([`Program`]): the
//! uniform and workgroups of each step on a wgpu device (`shaders/heat.wgsl`,
//! `shaders/life.wgsl`), and the same step on the host device (`domain::host_grid`). Also
//! the run's shared [`Spec`] and where a band's buffer rows are on the host board.

use std::ops::Range;

use super::bands::{Band, Geometry};
use super::host_grid::{heat_step, life_step, HeatStep, LifeStep};
use super::rule::Rule;
use crate::error::{Error, Result};
use crate::kernel::FmaMode;
use crate::runner::bands::Program;

/// Workgroup shape of `shaders/heat.wgsl` and `shaders/life.wgsl`: 64 threads along a row
/// by 4 rows, so that narrow grids fill their workgroups too (software adapters pay per
/// workgroup).
const GROUP_X: u64 = 64;
const GROUP_ROWS: u64 = 4;

/// What every band of one run shares: the rule, the grid's shape and its row layout.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The update rule.
    pub rule: Rule,
    /// Rows, halo and boundary.
    pub geometry: Geometry,
    /// Cells per row.
    pub width: usize,
    /// Bytes per row in device buffers and on the host board (a multiple of 4).
    pub row_bytes: usize,
}

impl Spec {
    /// Threads per row: one per vec4 of four cells (heat) or per packed word of four cells
    /// (Life).
    pub fn threads_per_row(&self) -> usize {
        self.width.div_ceil(4)
    }
}

/// The uniform of one step (see `shaders/heat.wgsl` and `shaders/life.wgsl`).
fn uniform(spec: &Spec, band: &Band, rows: Range<usize>, slice_rows: u32) -> [u32; 12] {
    let g = spec.geometry;
    match spec.rule {
        Rule::Heat { alpha } => [
            spec.width as u32,
            g.height as u32,
            if g.periodic {
                0
            } else {
                band.first_row() as u32
            },
            rows.start as u32,
            rows.end as u32,
            slice_rows,
            u32::from(g.periodic),
            alpha.to_bits(),
            spec.width.div_ceil(4) as u32,
            0,
            0,
            0,
        ],
        Rule::Life => [
            spec.width as u32,
            (spec.row_bytes / 4) as u32,
            rows.start as u32,
            rows.end as u32,
            slice_rows,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ],
    }
}

/// The steps of one band of a run.
pub struct BandProgram {
    /// The band.
    pub band: Band,
    /// The run.
    pub spec: Spec,
}

impl Program for BandProgram {
    fn steps(&self) -> usize {
        self.spec.geometry.halo
    }

    fn dispatch(&self, k: usize, max: u64, device: usize) -> Result<([u32; 12], [u32; 3])> {
        let spec = &self.spec;
        let rows = self.band.step_rows(k, spec.geometry);
        let n = rows.len() as u64;
        let columns = spec.threads_per_row() as u64;
        // x: vec4s (or words) of a row; y: rows, sliced along z past the y limit.
        let x = columns.div_ceil(GROUP_X);
        let y = n.div_ceil(GROUP_ROWS).clamp(1, max);
        let z = n.div_ceil(y * GROUP_ROWS).max(1);
        if x > max || z > max {
            return Err(Error::invalid(
                "grid",
                format!("{n} rows of {columns} columns do not fit one dispatch on device {device}"),
            ));
        }
        let words = uniform(spec, &self.band, rows, (y * GROUP_ROWS) as u32);
        Ok((words, [x as u32, y as u32, z as u32]))
    }

    fn work(&self, k: usize) -> u64 {
        (self.band.step_rows(k, self.spec.geometry).len() * self.spec.width) as u64
    }

    fn run(&self, k: usize, src: &[u32], dst: &mut [u32], fma: FmaMode) {
        let spec = &self.spec;
        let g = spec.geometry;
        let rows = self.band.step_rows(k, g);
        match spec.rule {
            Rule::Heat { alpha } => {
                let step = HeatStep {
                    width: spec.width,
                    height: g.height,
                    // As the shader's uniform: the frame test needs it on Dirichlet grids only.
                    row0: if g.periodic { 0 } else { self.band.first_row() },
                    rows,
                    periodic: g.periodic,
                    alpha,
                    fma,
                };
                heat_step(
                    bytemuck::cast_slice(src),
                    bytemuck::cast_slice_mut(dst),
                    &step,
                );
            }
            Rule::Life => {
                let step = LifeStep {
                    width: spec.width,
                    rows,
                };
                life_step(src, dst, &step);
            }
        }
    }
}

/// Buffer rows `rows` of `band` as runs on `board`: (first buffer row, board bytes of the
/// run's consecutive rows), ghost rows of a periodic grid wrapping.
pub fn board_runs<'b>(
    band: &Band,
    rows: Range<usize>,
    spec: &Spec,
    board: &'b [u8],
) -> Vec<(usize, &'b [u8])> {
    let rb = spec.row_bytes;
    band.board_runs(rows, spec.geometry)
        .into_iter()
        .map(|(run, first)| (run.start, &board[first * rb..(first + run.len()) * rb]))
        .collect()
}
