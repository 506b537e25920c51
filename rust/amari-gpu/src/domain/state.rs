//! A band on its device: two grid buffers the steps ping-pong between and the copies that
//! fill ghost rows from the host board and read rows back. On a wgpu device ([`BandState`])
//! they are storage buffers with one uniform per step of a round and the bind groups for
//! both directions (made once per layout, so a round only records dispatches); on the host
//! device ([`HostBand`]) host vectors (rows padded as on a wgpu device) that the host
//! kernels of `host::grid` step in place.

use std::ops::Range;

use super::bands::{Band, Geometry};
use super::host_grid::{heat_step, life_step, HeatStep, LifeStep};
use super::rule::Rule;
use crate::device::{Compiled, GpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::binding;
use crate::kernel::FmaMode;
use crate::pool::Pooled;

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

/// One band's device state.
pub struct BandState {
    /// The band.
    pub band: Band,
    buffers: [Pooled; 2],
    _params: Vec<Pooled>,
    /// `groups[s][k - 1]`: step `k` of a round reading buffer `s`.
    groups: [Vec<wgpu::BindGroup>; 2],
    /// Workgroups of step `k` at index `k - 1`.
    grids: Vec<[u32; 3]>,
    /// Cells (heat) or words (Life) step `k` computes, at index `k - 1`.
    work: Vec<u64>,
}

impl BandState {
    /// Allocates the band's buffers and bind groups; its rows are filled by
    /// [`BandState::write_rows`] and [`BandState::copy_rows_from`].
    pub fn create(dev: &GpuDevice, compiled: &Compiled, band: Band, spec: &Spec) -> Result<Self> {
        let g = spec.geometry;
        let bytes = (band.buffer_rows() * spec.row_bytes) as u64;
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let buffers = [
            dev.pool.take(&dev.gpu().device, bytes, usage),
            dev.pool.take(&dev.gpu().device, bytes, usage),
        ];
        let columns = spec.threads_per_row() as u64;
        let max = u64::from(dev.limits.max_compute_workgroups_per_dimension);
        let (mut params, mut grids, mut work) = (Vec::new(), Vec::new(), Vec::new());
        for k in 1..=g.halo {
            let rows = band.step_rows(k, g);
            let n = rows.len() as u64;
            // x: vec4s (or words) of a row; y: rows, sliced along z past the y limit.
            let x = columns.div_ceil(GROUP_X);
            let y = n.div_ceil(GROUP_ROWS).clamp(1, max);
            let z = n.div_ceil(y * GROUP_ROWS).max(1);
            if x > max || z > max {
                return Err(Error::invalid(
                    "grid",
                    format!(
                        "{n} rows of {columns} columns do not fit one dispatch on device {}",
                        dev.id
                    ),
                ));
            }
            let words = uniform(spec, &band, rows, (y * GROUP_ROWS) as u32);
            let buffer = dev.pool.take(
                &dev.gpu().device,
                (words.len() * 4) as u64,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            );
            dev.gpu()
                .queue
                .write_buffer(&buffer, 0, bytemuck::cast_slice(&words));
            params.push(buffer);
            grids.push([x as u32, y as u32, z as u32]);
            work.push(n * spec.width as u64);
        }
        let group = |from: usize, k: usize| {
            dev.gpu()
                .device
                .create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("amari-gpu band step"),
                    layout: &compiled.layout,
                    entries: &[
                        binding(0, &params[k], UNIFORM_BYTES),
                        binding(1, &buffers[from], bytes),
                        binding(2, &buffers[1 - from], bytes),
                    ],
                })
        };
        let groups = [
            (0..g.halo).map(|k| group(0, k)).collect(),
            (0..g.halo).map(|k| group(1, k)).collect(),
        ];
        Ok(BandState {
            band,
            buffers,
            _params: params,
            groups,
            grids,
            work,
        })
    }

    /// Copies buffer rows `rows` of buffer `current` from their grid rows on `board`;
    /// returns the bytes.
    pub fn write_rows(
        &self,
        dev: &GpuDevice,
        current: usize,
        rows: Range<usize>,
        spec: &Spec,
        board: &[u8],
    ) -> u64 {
        board_runs(&self.band, rows, spec, board, |at, from| {
            dev.gpu()
                .queue
                .write_buffer(&self.buffers[current], at as u64, from);
        })
    }

    /// Uploads the ghost rows of buffer `current` from `board`; returns the bytes.
    pub fn write_ghosts(&self, dev: &GpuDevice, current: usize, spec: &Spec, board: &[u8]) -> u64 {
        self.band
            .ghost_rows()
            .into_iter()
            .map(|rows| self.write_rows(dev, current, rows, spec, board))
            .sum()
    }

    /// Records `steps` steps starting from buffer `current`; returns the threads run.
    pub fn encode_steps(&self, pass: &mut wgpu::ComputePass<'_>, current: usize, k: usize) -> u64 {
        let from = (current + k - 1) % 2;
        pass.set_bind_group(0, &self.groups[from][k - 1], &[]);
        let [x, y, z] = self.grids[k - 1];
        pass.dispatch_workgroups(x, y, z);
        self.work[k - 1]
    }

    /// Copies buffer rows `rows` of buffer `current` into `staging` at `offset`.
    pub fn copy_rows(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        current: usize,
        rows: &Range<usize>,
        spec: &Spec,
        staging: &wgpu::Buffer,
        offset: u64,
    ) -> u64 {
        let rb = spec.row_bytes as u64;
        let bytes = rows.len() as u64 * rb;
        encoder.copy_buffer_to_buffer(
            &self.buffers[current],
            rows.start as u64 * rb,
            staging,
            offset,
            bytes,
        );
        bytes
    }

    /// Records the device-side copy `rows` out of `from` into this band, both in buffer
    /// `current`.
    pub fn copy_rows_from(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        from: &BandState,
        rows: RowMove,
        current: usize,
        spec: &Spec,
    ) {
        let rb = spec.row_bytes as u64;
        encoder.copy_buffer_to_buffer(
            &from.buffers[current],
            rows.from_row as u64 * rb,
            &self.buffers[current],
            rows.to_row as u64 * rb,
            rows.rows as u64 * rb,
        );
    }

    /// Destroys the buffers instead of pooling them: after a failure they may be in use.
    pub fn discard(self) {
        let [a, b] = self.buffers;
        a.discard();
        b.discard();
    }
}

/// Consecutive buffer rows that stay on their device when the layout changes: `rows` rows
/// from buffer row `from_row` of the old band to buffer row `to_row` of the new one.
#[derive(Debug, Clone, Copy)]
pub struct RowMove {
    /// First buffer row in the old band.
    pub from_row: usize,
    /// First buffer row in the new band.
    pub to_row: usize,
    /// Rows moved.
    pub rows: usize,
}

/// Bytes of a step's uniform (the larger of `shaders/heat.wgsl`'s and `shaders/life.wgsl`'s).
const UNIFORM_BYTES: u64 = 48;

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

/// Calls `put` with the byte offset in a band buffer and the board bytes of every run of
/// consecutive buffer rows `rows` of `band` (ghost rows wrap on a periodic grid); returns
/// the bytes.
fn board_runs(
    band: &Band,
    rows: Range<usize>,
    spec: &Spec,
    board: &[u8],
    mut put: impl FnMut(usize, &[u8]),
) -> u64 {
    let rb = spec.row_bytes;
    for (run, first) in band.board_runs(rows.clone(), spec.geometry) {
        put(run.start * rb, &board[first * rb..(first + run.len()) * rb]);
    }
    (rows.len() * rb) as u64
}

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
        // The buffer and the band are borrowed apart: one is written, the other read.
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.buffers[current]);
        board_runs(&self.band, rows, spec, board, |at, from| {
            bytes[at..at + from.len()].copy_from_slice(from);
        })
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
