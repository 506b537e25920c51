//! One round on one device, of either kind: upload the ghost rows its bands need from the
//! host board, run the round's steps for all of its bands, and read back the rows its
//! neighbours need next — or, after the last round, every row it owns. A wgpu device runs
//! them in one compute pass (one submission, one wait); the host device in place on its
//! thread pool. Fault injection, the lost-device check, the phases' timing and the report
//! are shared. Every device's round at once is in `parallel`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::attempt::DeviceBands;
use super::bands::{Band, Geometry};
use super::state::{BandState, HostBand, Spec};
use crate::device::{Compiled, GpuDevice};
use crate::error::{Error, Result};
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
fn wanted_rows(
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

/// What a device's kind did in a round: the rows it read back and its own phases.
struct Ran {
    rows: Vec<(usize, Vec<u8>)>,
    submitted: Instant,
    finished: Instant,
    ticks: Option<(u64, u64)>,
    work: u64,
    bytes_up: u64,
    bytes_down: u64,
}

/// Runs `round` on `bands` (all on `dev`): on a wgpu device with `compiled`, its kernels
/// timed with GPU timestamps when `stamped`; on the host device in place. An injected fault
/// and a lost device end the round alike on either kind.
pub fn run(
    dev: &GpuDevice,
    compiled: Option<&Compiled>,
    bands: &mut DeviceBands,
    spec: &Spec,
    round: &Round<'_>,
    stamped: bool,
) -> Result<DeviceRound> {
    gpu_io::check_alive(dev)?;
    if let Some(reason) = dev.health.injected_fault_due() {
        return Err(lost(dev.id, reason));
    }
    let started = Instant::now();
    let wanted = wanted_rows(dev.id, &bands.bands(), round.readback, spec.geometry);
    let ran = match bands {
        DeviceBands::Wgpu(states) => {
            let compiled = compiled.ok_or_else(|| {
                Error::Internal(format!("no kernel compiled for device {}", dev.id))
            })?;
            on_wgpu(dev, compiled, states, spec, round, &wanted, stamped)?
        }
        DeviceBands::Host(list) => on_host(dev, list, spec, round, &wanted)?,
    };
    dev.health.chunk_completed();
    Ok(DeviceRound {
        device: dev.id,
        rows: ran.rows,
        started,
        submitted: ran.submitted,
        finished: ran.finished,
        read: Instant::now(),
        ticks: ran.ticks,
        work: ran.work,
        bytes_up: ran.bytes_up,
        bytes_down: ran.bytes_down,
    })
}

/// A wgpu device's round: ghost uploads, every step of every band in one compute pass, the
/// wanted rows copied to a staging buffer; one submission, one wait.
fn on_wgpu(
    dev: &GpuDevice,
    compiled: &Compiled,
    states: &[BandState],
    spec: &Spec,
    round: &Round<'_>,
    wanted: &[Vec<Range<usize>>],
    stamped: bool,
) -> Result<Ran> {
    let g = spec.geometry;
    let scopes = Scopes::open(dev);
    let mut bytes_up = 0;
    if !round.fresh {
        for s in states {
            bytes_up += s.write_ghosts(dev, round.current, spec, round.board);
        }
    }
    let after = (round.current + round.steps) % 2;
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
    for (s, ranges) in states.iter().zip(wanted) {
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
    Ok(Ran {
        rows,
        submitted,
        finished,
        ticks,
        work,
        bytes_up,
        bytes_down: out_bytes,
    })
}

#[cfg(test)]
pub(super) static PANIC_IN_STEP: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The host device's round: ghost rows copied in from the board, the steps run in place on
/// the device's thread pool (with the fma rounding of the wgpu devices beside it), the
/// wanted rows copied out. A panic in a step fails the device; a cancelled call stops
/// between steps (a host round can be long).
fn on_host(
    dev: &GpuDevice,
    bands: &mut [HostBand],
    spec: &Spec,
    round: &Round<'_>,
    wanted: &[Vec<Range<usize>>],
) -> Result<Ran> {
    let Some(host) = dev.as_host() else {
        return Err(Error::Internal(format!(
            "host bands were laid out on wgpu device {}",
            dev.id
        )));
    };
    let mut bytes_up = 0;
    if !round.fresh {
        for b in bands.iter_mut() {
            bytes_up += b.write_ghosts(round.current, spec, round.board);
        }
    }
    let submitted = Instant::now();
    let cancelled = || round.interrupt.as_ref().is_some_and(|i| i.is_cancelled());
    let stepped = catch_unwind(AssertUnwindSafe(|| {
        host.pool.run_with(|| {
            let mut work = 0;
            // Step by step across the bands, as a wgpu round orders its dispatches.
            for k in 1..=round.steps {
                if cancelled() {
                    return Err(Error::Cancelled);
                }
                #[cfg(test)]
                if PANIC_IN_STEP.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("a host band step failed (test)");
                }
                for b in bands.iter_mut() {
                    work += b.step(round.current, k, spec, host.fma);
                }
            }
            Ok(work)
        })
    }));
    let work = stepped.map_err(|panic| {
        let what = Error::from_panic("a host band step", panic.as_ref());
        lost(dev.id, what.to_string())
    })??;
    let finished = Instant::now();
    let after = (round.current + round.steps) % 2;
    let mut rows = Vec::new();
    let mut bytes_down = 0;
    for (b, ranges) in bands.iter().zip(wanted) {
        for r in ranges {
            let bytes = b.rows(after, r, spec).to_vec();
            bytes_down += bytes.len() as u64;
            rows.push((b.band.global_row(r.start, spec.geometry), bytes));
        }
    }
    Ok(Ran {
        rows,
        submitted,
        finished,
        ticks: None,
        work,
        bytes_up,
        bytes_down,
    })
}

/// Copies the rows a device's round read back to their place on `board`.
pub(super) fn place(board: &mut [u8], spec: &Spec, r: &DeviceRound) {
    let rb = spec.row_bytes;
    for (row, bytes) in &r.rows {
        board[row * rb..row * rb + bytes.len()].copy_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::PANIC_IN_STEP;
    use crate::context::MultiGpuContext;
    use crate::domain::{self, Boundary, Options};
    use crate::options::ContextOptions;

    /// A panic in a host band step fails the host device; lavapipe alone finishes the run
    /// from the caller's grid, with lavapipe's bits.
    #[test]
    fn a_panicking_host_step_is_a_failure_of_the_host_device() {
        let open = |backends: &[&str]| {
            MultiGpuContext::new(ContextOptions {
                backends: Some(backends.iter().map(|b| b.to_string()).collect()),
                ..Default::default()
            })
            .expect("context opens")
        };
        let (h, w) = (29, 19);
        let grid: Vec<f32> = (0..h * w)
            .map(|i| ((i * 37) % 101) as f32 / 101.0)
            .collect();
        let opts = Options {
            steps: 5,
            halo: 2,
            rebalance: false,
            split: None,
        };
        let (want, _) = domain::heat(
            &open(&["vulkan"]),
            &grid,
            h,
            w,
            0.2,
            Boundary::Dirichlet,
            &opts,
        )
        .expect("lavapipe runs");
        let ctx = open(&["vulkan", "host"]);
        let split = Options {
            split: Some(vec![14, 15]),
            ..opts
        };
        PANIC_IN_STEP.store(true, Ordering::SeqCst);
        let (got, report) = domain::heat(&ctx, &grid, h, w, 0.2, Boundary::Dirichlet, &split)
            .expect("the run recovers");
        assert!(!PANIC_IN_STEP.load(Ordering::SeqCst), "the host stepped");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        let (device, reason) = &report.failures[0];
        assert_eq!(*device, 1);
        assert!(reason.contains("a host band step panicked"), "{reason}");
        assert!(!ctx.health()[1].1);
    }
}
