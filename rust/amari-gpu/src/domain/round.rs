//! One round on one device: upload the ghost rows its bands need from the host board, run
//! the round's steps for all of its bands in one compute pass (one submission, one wait),
//! and read back the rows its neighbours need next — or, after the last round, every row
//! it owns. The host device's round is in `host_round`, every device's at once in
//! `parallel`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bands::{Band, Geometry};
use super::state::{BandState, Spec};
use crate::device::GpuDevice;
use crate::error::Result;
use crate::gpu_io::{self, lost, Scopes, Staging};
use crate::interrupt::Interrupt;

/// What a device's round produced and measured.
pub struct DeviceRound {
    /// Device id.
    pub device: usize,
    /// Rows read back: (grid row, bytes of consecutive rows).
    pub rows: Vec<(usize, Vec<u8>)>,
    /// When the round started (ghost upload).
    pub started: Instant,
    /// When the work was submitted (uploads staged).
    pub submitted: Instant,
    /// When the device had finished.
    pub finished: Instant,
    /// When the rows were copied out.
    pub read: Instant,
    /// Kernel begin and end in GPU ticks, when timed with timestamps.
    pub ticks: Option<(u64, u64)>,
    /// Cells (or packed words) computed, ghost-row work included.
    pub work: u64,
    /// Bytes uploaded and read back.
    pub bytes_up: u64,
    /// Bytes read back.
    pub bytes_down: u64,
}

/// How a round ends for a band: the buffer rows to read back.
pub enum Readback<'a> {
    /// Border rows, for the neighbours' ghosts.
    Borders,
    /// Every owned row (after the last round, or before a new layout).
    Owned,
    /// Nothing: the last round, whose rows are downloaded whole afterwards.
    Nothing,
    /// Chosen buffer rows: by device id, per band (in the device's band order).
    Rows(&'a BTreeMap<usize, Vec<Vec<Range<usize>>>>),
}

/// What one round asks of every device.
pub struct Round<'a> {
    /// The host board (ghost rows are uploaded from it).
    pub board: &'a [u8],
    /// The buffer (0 or 1) the bands' current rows are in.
    pub current: usize,
    /// Steps to run (0: only read back).
    pub steps: usize,
    /// The bands were just created with their ghosts: nothing to upload first.
    pub fresh: bool,
    /// What to read back after the steps.
    pub readback: &'a Readback<'a>,
    /// The context's `sync_timeout_ms`.
    pub timeout: Option<Duration>,
    /// The call's interrupt (the host device checks it between steps).
    pub interrupt: Option<Arc<Interrupt>>,
}

/// The buffer rows to read back after a round, per band of device `device` (in its band
/// order).
pub(super) fn wanted_rows(
    device: usize,
    bands: &[&Band],
    readback: &Readback<'_>,
    g: Geometry,
) -> Vec<Vec<Range<usize>>> {
    bands
        .iter()
        .enumerate()
        .map(|(i, band)| match readback {
            Readback::Borders => band.border_rows(g),
            Readback::Owned => std::iter::once(band.owned_rows()).collect(),
            Readback::Nothing => Vec::new(),
            Readback::Rows(rows) => rows
                .get(&device)
                .and_then(|per_band| per_band.get(i))
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}

/// Runs `round` on every band in `states` (all on `dev`), its kernels timed with GPU
/// timestamps when `stamped`.
pub fn run(
    dev: &GpuDevice,
    compiled: &crate::device::Compiled,
    states: &[BandState],
    spec: &Spec,
    round: &Round<'_>,
    stamped: bool,
) -> Result<DeviceRound> {
    gpu_io::check_alive(dev)?;
    if let Some(reason) = dev.health.injected_fault_due() {
        return Err(lost(dev.id, reason));
    }
    let started = Instant::now();
    let g = spec.geometry;
    let scopes = Scopes::open(dev);
    let mut bytes_up = 0;
    if !round.fresh {
        for s in states {
            bytes_up += s.write_ghosts(dev, round.current, spec, round.board);
        }
    }
    let after = (round.current + round.steps) % 2;
    let listed: Vec<&Band> = states.iter().map(|s| &s.band).collect();
    let wanted = wanted_rows(dev.id, &listed, round.readback, g);
    let row_bytes = spec.row_bytes as u64;
    let out_bytes: u64 = wanted.iter().flatten().map(|r| r.len() as u64).sum::<u64>() * row_bytes;
    let mut staging = Staging::new(dev, out_bytes, stamped);
    let mut encoder = dev
        .gpu()
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("amari-gpu round"),
        });
    let mut work = 0;
    {
        let mut pass = gpu_io::begin_pass(&mut encoder, Some("amari-gpu round"), staging.queries());
        pass.set_pipeline(&compiled.pipeline);
        // Step by step across the bands: wgpu orders the dispatches of a pass, so step k
        // of a band sees step k - 1 of the same band complete.
        for k in 1..=round.steps {
            for s in states {
                work += s.encode_steps(&mut pass, round.current, k);
            }
        }
    }
    let mut offset = 0;
    let mut placed = Vec::new();
    for (s, ranges) in states.iter().zip(&wanted) {
        for r in ranges {
            let bytes = s.copy_rows(&mut encoder, after, r, spec, staging.buffer(), offset);
            placed.push((s.band.global_row(r.start, g), offset, bytes));
            offset += bytes;
        }
    }
    staging.resolve_timestamps(dev, &mut encoder);
    let submitted = Instant::now();
    let submission = dev.gpu().queue.submit(Some(encoder.finish()));
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
            .map(|&(row, at, bytes)| (row, view[at as usize..(at + bytes) as usize].to_vec()))
            .collect()
    })?;
    dev.health.chunk_completed();
    Ok(DeviceRound {
        device: dev.id,
        rows,
        started,
        submitted,
        finished,
        read: Instant::now(),
        ticks,
        work,
        bytes_up,
        bytes_down: out_bytes,
    })
}

/// Copies the rows a device's round read back to their place on `board`.
pub(super) fn place(board: &mut [u8], spec: &Spec, r: &DeviceRound) {
    let rb = spec.row_bytes;
    for (row, bytes) in &r.rows {
        board[row * rb..row * rb + bytes.len()].copy_from_slice(bytes);
    }
}
