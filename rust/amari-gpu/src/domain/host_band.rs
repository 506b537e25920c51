//! A band on the host device: the same two ping-pong buffers a wgpu band keeps (ghost rows
//! included, rows padded to whole vec4s or words), as host vectors the host kernels of
//! `domain::host_grid` step in place. Ghost rows are copied in from the host board and border rows
//! out to it, as a wgpu band uploads and reads them back; nothing else is staged.

use std::ops::Range;

use super::bands::Band;
use super::host_grid::{heat_step, life_step, HeatStep, LifeStep};
use super::rule::Rule;
use super::state::{RowMove, Spec};
use crate::error::Result;
use crate::kernel::FmaMode;

/// One band's host state.
pub struct HostBand {
    /// The band.
    pub band: Band,
    /// The two grid buffers, as 32-bit words (float32 cells for heat, four Life cells each).
    buffers: [Vec<u32>; 2],
}

impl HostBand {
    /// Allocates the band's buffers (zeroed); rows are filled by [`HostBand::write_rows`]
    /// and [`HostBand::copy_rows_from`].
    pub fn create(band: Band, spec: &Spec) -> Result<Self> {
        let words = crate::alloc::product("grid", &[band.buffer_rows(), spec.row_bytes / 4], 4)?;
        Ok(HostBand {
            buffers: [
                crate::alloc::zeroed("grid", words)?,
                crate::alloc::zeroed("grid", words)?,
            ],
            band,
        })
    }

    fn bytes(&self, current: usize) -> &[u8] {
        bytemuck::cast_slice(&self.buffers[current])
    }

    fn bytes_mut(&mut self, current: usize) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.buffers[current])
    }

    /// Copies buffer rows `rows` of buffer `current` from their grid rows on `board`;
    /// returns the bytes.
    pub fn write_rows(
        &mut self,
        current: usize,
        rows: Range<usize>,
        spec: &Spec,
        board: &[u8],
    ) -> u64 {
        let rb = spec.row_bytes;
        for (run, first) in self.band.board_runs(rows.clone(), spec.geometry) {
            self.bytes_mut(current)[run.start * rb..run.end * rb]
                .copy_from_slice(&board[first * rb..(first + run.len()) * rb]);
        }
        (rows.len() * rb) as u64
    }

    /// Copies the ghost rows of buffer `current` from `board`; returns the bytes.
    pub fn write_ghosts(&mut self, current: usize, spec: &Spec, board: &[u8]) -> u64 {
        self.band
            .ghost_rows()
            .into_iter()
            .map(|rows| self.write_rows(current, rows, spec, board))
            .sum()
    }

    /// Step `k` (1-based within the round) from buffer `(current + k - 1) % 2` into the
    /// other, on the calling thread's rayon pool; returns the cells computed (counted as a
    /// wgpu band counts them).
    pub fn step(&mut self, current: usize, k: usize, spec: &Spec, fma: FmaMode) -> u64 {
        let g = spec.geometry;
        let rows = self.band.step_rows(k, g);
        let work = (rows.len() * spec.width) as u64;
        let from = (current + k - 1) % 2;
        let [a, b] = &mut self.buffers;
        let (src, dst) = if from == 0 { (&*a, b) } else { (&*b, a) };
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
        work
    }

    /// The bytes of buffer rows `rows` of buffer `current`.
    pub fn rows(&self, current: usize, rows: &Range<usize>, spec: &Spec) -> &[u8] {
        let rb = spec.row_bytes;
        &self.bytes(current)[rows.start * rb..rows.end * rb]
    }

    /// Copies `rows` out of `from` into this band, both in buffer `current` (rows that stay
    /// on the host when the layout changes).
    pub fn copy_rows_from(&mut self, from: &HostBand, rows: RowMove, current: usize, spec: &Spec) {
        let rb = spec.row_bytes;
        let source = &from.bytes(current)[rows.from_row * rb..(rows.from_row + rows.rows) * rb];
        self.bytes_mut(current)[rows.to_row * rb..(rows.to_row + rows.rows) * rb]
            .copy_from_slice(source);
    }
}
