//! One round on one device: upload the ghost rows its bands need from the host board, run
//! the round's steps for all of its bands in one compute pass (one submission, one wait),
//! and read back the rows its neighbours need next — or, after the last round, every row
//! it owns.

use std::time::{Duration, Instant};

use super::state::{BandState, Spec};
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::executor::{map_for_reading, resolve_timestamps, Scopes};

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

fn lost(device: usize, reason: impl Into<String>) -> Error {
    Error::DeviceLost {
        device,
        reason: reason.into(),
    }
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
    Rows(&'a std::collections::BTreeMap<usize, Vec<Vec<std::ops::Range<usize>>>>),
}

/// Runs `steps` steps on every band in `states` (all on `dev`), starting from buffer
/// `current`; ghosts are uploaded from `board` first unless `fresh` (just created).
#[allow(clippy::too_many_arguments)]
pub fn run(
    dev: &GpuDevice,
    compiled: &crate::device::Compiled,
    states: &[BandState],
    spec: &Spec,
    board: &[u8],
    current: usize,
    steps: usize,
    fresh: bool,
    readback: &Readback<'_>,
    timeout: Option<Duration>,
    stamped: bool,
) -> Result<DeviceRound> {
    if let Some(reason) = dev.lost_reason() {
        return Err(lost(dev.id, reason));
    }
    if let Some(reason) = dev.health.injected_fault_due() {
        return Err(lost(dev.id, reason));
    }
    let started = Instant::now();
    let g = spec.geometry;
    let scopes = Scopes::open(dev);
    let mut bytes_up = 0;
    if !fresh {
        for s in states {
            bytes_up += s.write_ghosts(dev, current, spec, board);
        }
    }
    let after = (current + steps) % 2;
    let wanted: Vec<Vec<std::ops::Range<usize>>> = states
        .iter()
        .enumerate()
        .map(|(i, s)| match readback {
            Readback::Borders => s.band.border_rows(g),
            Readback::Owned => std::iter::once(s.band.owned_rows()).collect(),
            Readback::Nothing => Vec::new(),
            Readback::Rows(rows) => rows
                .get(&dev.id)
                .and_then(|per_band| per_band.get(i))
                .cloned()
                .unwrap_or_default(),
        })
        .collect();
    let row_bytes = spec.row_bytes as u64;
    let out_bytes: u64 = wanted.iter().flatten().map(|r| r.len() as u64).sum::<u64>() * row_bytes;
    let timestamps_at =
        (stamped && dev.timestamp_period_ns.is_some()).then(|| out_bytes.div_ceil(8) * 8);
    let staging_bytes = timestamps_at.map_or(out_bytes, |at| at + 16).max(4);
    let staging = dev.pool.take(
        &dev.device,
        staging_bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    let queries = timestamps_at.map(|_| dev.take_query_set());
    let mut encoder = dev
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("amari-gpu round"),
        });
    let mut work = 0;
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("amari-gpu round"),
            timestamp_writes: queries
                .as_ref()
                .map(|query_set| wgpu::ComputePassTimestampWrites {
                    query_set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
        });
        pass.set_pipeline(&compiled.pipeline);
        // Step by step across the bands: wgpu orders the dispatches of a pass, so step k
        // of a band sees step k - 1 of the same band complete.
        for k in 1..=steps {
            for s in states {
                work += s.encode_steps(&mut pass, current, k);
            }
        }
    }
    let mut offset = 0;
    let mut placed = Vec::new();
    for (s, ranges) in states.iter().zip(&wanted) {
        for r in ranges {
            let bytes = s.copy_rows(&mut encoder, after, r, spec, &staging, offset);
            placed.push((s.band.global_row(r.start, g), offset, bytes));
            offset += bytes;
        }
    }
    let resolve = resolve_timestamps(dev, &mut encoder, queries.as_ref(), &staging, timestamps_at);
    let submitted = Instant::now();
    let submission = dev.queue.submit(Some(encoder.finish()));
    let mapped = map_for_reading(&staging, staging_bytes);
    scopes.close(dev.id)?;
    let waited = dev.device.poll(wgpu::PollType::Wait {
        submission_index: Some(submission),
        timeout,
    });
    match waited {
        Err(wgpu::PollError::Timeout) => {
            staging.discard();
            return Err(lost(
                dev.id,
                format!(
                    "no answer within sync_timeout_ms={}",
                    timeout.map_or(0, |t| t.as_millis())
                ),
            ));
        }
        Err(other) => {
            staging.discard();
            return Err(lost(dev.id, other.to_string()));
        }
        Ok(_) => {}
    }
    match mapped.recv_timeout(timeout.unwrap_or(Duration::from_secs(3600))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(lost(dev.id, format!("readback failed: {e}"))),
        Err(_) => {
            return Err(lost(
                dev.id,
                dev.lost_reason()
                    .unwrap_or_else(|| "readback never completed".into()),
            ))
        }
    }
    let finished = Instant::now();
    let (rows, ticks) = {
        let view = staging
            .slice(..staging_bytes)
            .get_mapped_range()
            .map_err(|e| lost(dev.id, format!("readback mapping failed: {e}")))?;
        let rows = placed
            .iter()
            .map(|&(row, at, bytes)| (row, view[at as usize..(at + bytes) as usize].to_vec()))
            .collect();
        let ticks = timestamps_at.map(|at| {
            let stamps: &[u64] = bytemuck::cast_slice(&view[at as usize..at as usize + 16]);
            (stamps[0], stamps[1])
        });
        (rows, ticks)
    };
    staging.unmap();
    drop(resolve);
    if let Some(queries) = queries {
        dev.give_back_query_set(queries);
    }
    if let Some(reason) = dev.lost_reason() {
        return Err(lost(dev.id, reason));
    }
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
