//! One round on one device, of any kind: upload the ghost rows its bands need from the
//! host board, run the round's steps for all of its bands, and read back the rows its
//! neighbours need next — or, after the last round, every row it owns. The device's band
//! storage runs them (`runner::bands`); fault injection, the lost-device check, the phases'
//! timing and the report are written here once. Every device's round at once is in
//! `parallel`.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::attempt::DeviceBands;
use super::bands::{Band, Geometry};
use super::state::{board_runs, Spec};
use crate::device::GpuDevice;
use crate::error::Result;
use crate::gpu_io::{self, lost};
use crate::interrupt::Interrupt;
use crate::runner::bands::BandRound;

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
    /// The host board (ghost rows are uploaded from it; the rows of bands laid out
    /// `lent`, in their first round: the caller's grid they were laid out from).
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

/// Runs `round` on `bands` (all on `dev`), its kernels timed with GPU timestamps when
/// `stamped` (where the device has them). An injected fault and a lost device end the round
/// alike on any kind of device. With `into` (one place on the board per wanted range, in
/// band and range order) the rows are written there and none come back in the result.
pub fn run(
    dev: &GpuDevice,
    bands: &mut DeviceBands<'_>,
    spec: &Spec,
    round: &Round<'_>,
    stamped: bool,
    mut into: Vec<&mut [u8]>,
) -> Result<DeviceRound> {
    gpu_io::check_alive(dev)?;
    if let Some(reason) = dev.health.injected_fault_due() {
        return Err(lost(dev.id, reason));
    }
    let started = Instant::now();
    let refs: Vec<&Band> = bands.bands.iter().collect();
    let wanted = wanted_rows(dev.id, &refs, round.readback, spec.geometry);
    // A fresh layout uploads nothing, unless it left its rows on the board: then all of them.
    let lent = std::mem::take(&mut bands.lent);
    let uploads: Vec<Vec<(usize, &[u8])>> = bands
        .bands
        .iter()
        .map(|band| {
            let rows = match (round.fresh, lent) {
                (true, false) => return Vec::new(),
                (true, true) => std::iter::once(0..band.buffer_rows()).collect(),
                (false, _) => band.ghost_rows().to_vec(),
            };
            rows.into_iter()
                .flat_map(|rows| board_runs(band, rows, spec, round.board))
                .collect()
        })
        .collect();
    let bytes_up = uploads.iter().flatten().map(|(_, b)| b.len() as u64).sum();
    let ran = bands.store.round_into(
        &BandRound {
            current: round.current,
            steps: round.steps,
            uploads,
            wanted: &wanted,
            stamped,
            timeout: round.timeout,
            interrupt: round.interrupt.as_deref(),
        },
        &mut into,
    )?;
    dev.health.chunk_completed();
    let starts = bands.bands.iter().zip(&wanted).flat_map(|(band, ranges)| {
        ranges
            .iter()
            .map(|r| band.global_row(r.start, spec.geometry))
    });
    Ok(DeviceRound {
        device: dev.id,
        rows: starts.zip(ran.rows).collect(),
        started,
        submitted: ran.submitted,
        finished: ran.finished,
        read: Instant::now(),
        ticks: ran.ticks,
        work: ran.work,
        bytes_up,
        bytes_down: ran.bytes_down,
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

    use crate::context::MultiGpuContext;
    use crate::domain::{self, Boundary, Options};
    use crate::runner::bands::PANIC_IN_STEP;

    /// A panic in a host band step fails the host device; lavapipe alone finishes the run
    /// from the caller's grid, with lavapipe's bits.
    #[test]
    fn a_panicking_host_step_is_a_failure_of_the_host_device() {
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
            &MultiGpuContext::on(&["vulkan"]),
            &grid,
            h,
            w,
            0.2,
            Boundary::Dirichlet,
            &opts,
        )
        .expect("lavapipe runs");
        let ctx = MultiGpuContext::on(&["vulkan", "host"]);
        let split = Options {
            split: Some(vec![14, 15]),
            ..opts
        };
        // Only bands of this grid's width (rows padded to whole vec4s: 20 cells of 4 bytes)
        // take the panic.
        PANIC_IN_STEP.store(w.div_ceil(4) * 16, Ordering::SeqCst);
        let (got, report) = domain::heat(&ctx, &grid, h, w, 0.2, Boundary::Dirichlet, &split)
            .expect("the run recovers");
        assert_eq!(PANIC_IN_STEP.load(Ordering::SeqCst), 0, "the host stepped");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        let (device, reason) = &report.failures[0];
        assert_eq!(*device, 1);
        assert!(reason.contains("a host band step panicked"), "{reason}");
        assert!(!ctx.health()[1].1);
    }
}
