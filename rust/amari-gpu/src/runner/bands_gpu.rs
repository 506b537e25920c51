//! A wgpu device's bands: two storage buffers per band, one uniform per step of a round and
//! the bind groups for both directions (made once per layout, so a round only records
//! dispatches). A round is one compute pass: uploads, every step of every band, the wanted
//! rows copied to a staging buffer; one submission, one wait.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use super::bands::{BandRound, Bands, Program, Ran, RowMove};
use crate::device::{Compiled, GpuDevice, WgpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::{self, binding, Scopes, Staging};
use crate::pool::Pooled;

/// Bytes of a step's uniform (the larger of `shaders/heat.wgsl`'s and `shaders/life.wgsl`'s).
const UNIFORM_BYTES: u64 = 48;

/// One band's buffers and what its steps bind.
pub(super) struct GpuBand {
    buffers: [Pooled; 2],
    row_bytes: u64,
    _params: Vec<Pooled>,
    /// `groups[s][k - 1]`: step `k` of a round reading buffer `s`.
    groups: [Vec<wgpu::BindGroup>; 2],
    /// Workgroups of step `k` at index `k - 1`.
    grids: Vec<[u32; 3]>,
    /// Work of step `k` at index `k - 1`.
    work: Vec<u64>,
}

/// The bands on one wgpu device.
pub(super) struct GpuBands<'d> {
    dev: &'d GpuDevice,
    gpu: &'d WgpuDevice,
    compiled: Arc<Compiled>,
    list: Vec<GpuBand>,
    encoder: Option<wgpu::CommandEncoder>,
}

impl<'d> GpuBands<'d> {
    /// No bands yet on `dev` (whose wgpu parts are `gpu`), for bands running `compiled`.
    pub(super) fn new(dev: &'d GpuDevice, gpu: &'d WgpuDevice, compiled: Arc<Compiled>) -> Self {
        GpuBands {
            dev,
            gpu,
            compiled,
            list: Vec::new(),
            encoder: None,
        }
    }
}

impl Bands for GpuBands<'_> {
    fn push(&mut self, rows: usize, row_bytes: usize, program: Box<dyn Program>) -> Result<()> {
        let (dev, gpu) = (self.dev, self.gpu);
        let bytes = (rows * row_bytes) as u64;
        let usage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let buffers = [
            dev.pool.take(&gpu.device, bytes, usage),
            dev.pool.take(&gpu.device, bytes, usage),
        ];
        let max = u64::from(dev.limits.max_compute_workgroups_per_dimension);
        let steps = program.steps();
        let (mut params, mut grids, mut work) = (Vec::new(), Vec::new(), Vec::new());
        for k in 1..=steps {
            let (words, grid) = program.dispatch(k, max, dev.id)?;
            let buffer = dev.pool.take(
                &gpu.device,
                (words.len() * 4) as u64,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            );
            gpu.queue
                .write_buffer(&buffer, 0, bytemuck::cast_slice(&words));
            params.push(buffer);
            grids.push(grid);
            work.push(program.work(k));
        }
        let group = |from: usize, k: usize| {
            gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("amari-gpu band step"),
                layout: &self.compiled.layout,
                entries: &[
                    binding(0, &params[k], UNIFORM_BYTES),
                    binding(1, &buffers[from], bytes),
                    binding(2, &buffers[1 - from], bytes),
                ],
            })
        };
        let groups = [
            (0..steps).map(|k| group(0, k)).collect(),
            (0..steps).map(|k| group(1, k)).collect(),
        ];
        self.list.push(GpuBand {
            buffers,
            row_bytes: row_bytes as u64,
            _params: params,
            groups,
            grids,
            work,
        });
        Ok(())
    }

    fn write(&mut self, band: usize, current: usize, at: usize, bytes: &[u8]) {
        let b = &self.list[band];
        self.gpu
            .queue
            .write_buffer(&b.buffers[current], at as u64 * b.row_bytes, bytes);
    }

    fn copy_from(&mut self, old: &dyn Bands, moved: RowMove, current: usize) -> Result<()> {
        let Some(old) = old.stored().downcast_ref::<Vec<GpuBand>>() else {
            return Err(Error::Internal(format!(
                "device {}'s old and new bands are of different kinds",
                self.dev.id
            )));
        };
        let gpu = self.gpu;
        let encoder = self.encoder.get_or_insert_with(|| {
            gpu.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("amari-gpu relayout"),
                })
        });
        let (from, to) = (&old[moved.from_band], &self.list[moved.band]);
        let rb = to.row_bytes;
        encoder.copy_buffer_to_buffer(
            &from.buffers[current],
            moved.from_row as u64 * rb,
            &to.buffers[current],
            moved.to_row as u64 * rb,
            moved.rows as u64 * rb,
        );
        Ok(())
    }

    fn submit(&mut self) {
        if let Some(encoder) = self.encoder.take() {
            self.gpu.submit(Some(encoder.finish()));
        }
    }

    fn round(&mut self, round: &BandRound<'_>) -> Result<Ran> {
        let (dev, gpu) = (self.dev, self.gpu);
        let scopes = Scopes::open(dev);
        for (b, uploads) in self.list.iter().zip(&round.uploads) {
            for &(at, bytes) in uploads {
                let offset = at as u64 * b.row_bytes;
                gpu.queue
                    .write_buffer(&b.buffers[round.current], offset, bytes);
            }
        }
        let after = (round.current + round.steps) % 2;
        let out_bytes: u64 = self
            .list
            .iter()
            .zip(round.wanted)
            .map(|(b, ranges)| ranges.iter().map(|r| r.len() as u64).sum::<u64>() * b.row_bytes)
            .sum();
        let mut staging = Staging::new(dev, out_bytes, round.stamped);
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("amari-gpu round"),
            });
        let mut work = 0;
        {
            let mut pass =
                gpu_io::begin_pass(&mut encoder, Some("amari-gpu round"), staging.queries());
            pass.set_pipeline(&self.compiled.pipeline);
            // Step by step across the bands: wgpu orders the dispatches of a pass, so step k
            // of a band sees step k - 1 of the same band complete.
            for k in 1..=round.steps {
                for b in &self.list {
                    let from = (round.current + k - 1) % 2;
                    pass.set_bind_group(0, &b.groups[from][k - 1], &[]);
                    let [x, y, z] = b.grids[k - 1];
                    pass.dispatch_workgroups(x, y, z);
                    work += b.work[k - 1];
                }
            }
        }
        let mut offset = 0;
        let mut placed = Vec::new();
        for (b, ranges) in self.list.iter().zip(round.wanted) {
            for r in ranges {
                let bytes = r.len() as u64 * b.row_bytes;
                encoder.copy_buffer_to_buffer(
                    &b.buffers[after],
                    r.start as u64 * b.row_bytes,
                    staging.buffer(),
                    offset,
                    bytes,
                );
                placed.push((offset, bytes));
                offset += bytes;
            }
        }
        staging.resolve_timestamps(dev, &mut encoder);
        let submitted = Instant::now();
        let submission = gpu.submit(Some(encoder.finish()));
        staging.map();
        scopes.close(dev.id)?;
        if let Err(error) = staging.wait(dev, submission, round.timeout) {
            staging.discard();
            return Err(error);
        }
        let finished = Instant::now();
        let (rows, ticks) = staging.read(dev, |view| {
            placed
                .iter()
                .map(|&(at, bytes)| view[at as usize..(at + bytes) as usize].to_vec())
                .collect()
        })?;
        Ok(Ran {
            rows,
            submitted,
            finished,
            ticks,
            work,
            bytes_down: out_bytes,
        })
    }

    fn discard(self: Box<Self>) {
        for b in self.list {
            let [x, y] = b.buffers;
            x.discard();
            y.discard();
        }
    }

    fn stored(&self) -> &dyn Any {
        &self.list
    }
}
