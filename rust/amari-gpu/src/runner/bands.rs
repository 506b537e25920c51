//! The band-storage side of the device interface: what a grid run needs of a device, of
//! either kind, to hold row bands there and step them. A band is two buffers of whole rows
//! that the steps ping-pong between; [`Bands`] holds one device's bands, fills their rows
//! (from the host board, or by a copy from another band on the same device), and runs a
//! round of steps over all of them, handing back the rows asked for. A wgpu device
//! (`runner::bands_gpu`) records a round in one compute pass; the host device
//! (`runner::bands_host`) steps its host vectors in place on its thread pool. What a step
//! computes is the caller's [`Program`]; which rows, and where they go, the caller's too.
//! `runner::bands_on` is the only place a grid run looks at which kind a device is.

use std::any::Any;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::dtype::Dtype;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::kernel::FmaMode;

/// What one band computes at each step of a round, as the device kinds need it.
pub(crate) trait Program: Send + Sync {
    /// Steps a round may run (step `k` is 1-based, at most this).
    fn steps(&self) -> usize;

    /// The uniform words and workgroups of step `k` on a wgpu device allowing `max`
    /// workgroups per dimension (`device` names it in errors).
    fn dispatch(&self, k: usize, max: u64, device: usize) -> Result<([u32; 12], [u32; 3])>;

    /// Cells (or packed words) step `k` computes.
    fn work(&self, k: usize) -> u64;

    /// Steps a host pass runs together (at least 1): a host round runs its steps in passes
    /// of at most this many, and checks for cancellation between them.
    fn depth(&self) -> usize;

    /// What the steps compute in: the host device rounds their `fma` as the wgpu devices
    /// do in that dtype (`HostDevice::fma_for`).
    fn dtype(&self) -> Dtype;

    /// Steps `steps` (1-based, consecutive) on the host, rounding `fma` as `fma` says: from
    /// band buffer `src` of `buffers = [src, other]`, holding the step before them, to `src`
    /// again after an even number of steps, to `other` after an odd one (both whole band
    /// buffers as 32-bit words), as stepping from one buffer to the other leaves the rows
    /// each step computes. Once `stop` says so, a pass may end early with its rows partly
    /// computed (its round then fails as cancelled). With `into` = (buffer rows, their
    /// place as 32-bit words), the last step writes those rows there instead, and neither
    /// buffer holds the last step (a round's last pass, whose rows are read back at once):
    /// false, with nothing written to `into`, where the program cannot (the rows are not
    /// all among those the last step computes, or the place is misaligned for its cells).
    /// With `first` = runs of rows (first buffer row, bytes of consecutive rows) that tile
    /// the band's buffer rows, the step before them is read there and `src` holds none of
    /// it (a new layout's rows where the caller's grid has them; copied into `src` first
    /// where they are misaligned for the cells).
    fn run(
        &self,
        steps: Range<usize>,
        buffers: [&mut [u32]; 2],
        into: Option<(Range<usize>, &mut [u32])>,
        fma: FmaMode,
        stop: &Stop<'_>,
        first: Option<&Runs<'_>>,
    ) -> bool;
}

/// Runs of whole rows: (first buffer row, bytes of the run's consecutive rows).
pub(crate) type Runs<'a> = [(usize, &'a [u8])];

/// Whether a call was cancelled, asked while a host pass runs.
pub(crate) type Stop<'a> = dyn Fn() -> bool + Sync + 'a;

/// Rows that stay on their device when the layout changes: `rows` rows from buffer row
/// `from_row` of band `from_band` of the old bands to buffer row `to_row` of new band `band`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowMove {
    /// The new band (index in its device's bands).
    pub(crate) band: usize,
    /// The old band (index in the old bands of the same device).
    pub(crate) from_band: usize,
    /// First buffer row in the old band.
    pub(crate) from_row: usize,
    /// First buffer row in the new band.
    pub(crate) to_row: usize,
    /// Rows moved.
    pub(crate) rows: usize,
}

/// One round asked of a device's bands.
pub(crate) struct BandRound<'a> {
    /// The buffer (0 or 1) the bands' current rows are in.
    pub(crate) current: usize,
    /// Steps to run (0: only read back).
    pub(crate) steps: usize,
    /// Rows to write into buffer `current` first, per band: (first buffer row, bytes of
    /// consecutive rows). A store that reads uploads in place
    /// ([`Bands::reads_uploads_in_place`]) has the first pass read uploads that tile a
    /// band's buffer rows where they are.
    pub(crate) uploads: Vec<Vec<(usize, &'a [u8])>>,
    /// Buffer rows to read back after the steps, per band.
    pub(crate) wanted: &'a [Vec<Range<usize>>],
    /// Whether the kernels are timed with GPU timestamps (where the device has them).
    pub(crate) stamped: bool,
    /// The wait limit.
    pub(crate) timeout: Option<Duration>,
    /// The call's interrupt (the host device checks it between steps).
    pub(crate) interrupt: Option<&'a Interrupt>,
}

/// What a device's bands did in a round.
pub(crate) struct Ran {
    /// The wanted rows' bytes, one entry per wanted range, in band and range order.
    pub(crate) rows: Vec<Vec<u8>>,
    /// When the steps were handed to the device (uploads done).
    pub(crate) submitted: Instant,
    /// When the device had finished.
    pub(crate) finished: Instant,
    /// Kernel begin and end in GPU ticks, when timed with timestamps.
    pub(crate) ticks: Option<(u64, u64)>,
    /// Cells (or packed words) computed.
    pub(crate) work: u64,
    /// Bytes read back.
    pub(crate) bytes_down: u64,
}

/// One device's band storage, in the device's band order.
pub(crate) trait Bands: Send {
    /// Adds a band of `rows` buffer rows of `row_bytes` bytes (two buffers, contents
    /// unspecified until written) that runs `program`.
    fn push(&mut self, rows: usize, row_bytes: usize, program: Box<dyn Program>) -> Result<()>;

    /// Writes `bytes` (whole rows) into buffer `current` of band `band` from buffer row `at`.
    fn write(&mut self, band: usize, current: usize, at: usize, bytes: &[u8]);

    /// Whether a new layout's rows may be left where they are, when they stay unchanged
    /// until the first round ends, and handed to that round as its uploads of every buffer
    /// row: a store that then reads them in place (host memory) saves their copy.
    fn reads_uploads_in_place(&self) -> bool {
        false
    }

    /// Copies `moved` out of `old` (bands on the same device) into buffer `current`; runs
    /// by [`Bands::submit`] at the latest.
    fn copy_from(&mut self, old: &dyn Bands, moved: RowMove, current: usize) -> Result<()>;

    /// Hands the copies recorded since the last call to the device.
    fn submit(&mut self);

    /// Runs `round` on every band: the uploads, then the steps step by step across the
    /// bands, then the wanted rows read back.
    fn round(&mut self, round: &BandRound<'_>) -> Result<Ran>;

    /// [`Bands::round`] with the wanted rows written into `into` (one slice per wanted
    /// range, in band and range order, each exactly the range's bytes) rather than
    /// returned: the rows then come back as none. A store whose rows are in host memory
    /// writes them there directly; any other copies its read-back rows in.
    fn round_into(&mut self, round: &BandRound<'_>, into: &mut [&mut [u8]]) -> Result<Ran> {
        let ran = self.round(round)?;
        if into.is_empty() {
            return Ok(ran);
        }
        place_rows(&ran.rows, into)?;
        Ok(Ran {
            rows: Vec::new(),
            ..ran
        })
    }

    /// Lets the bands go after a failure: a device's buffers may still be in use, so they
    /// are destroyed rather than pooled.
    fn discard(self: Box<Self>);

    /// The bands' buffers as [`Any`], for [`Bands::copy_from`] to find old bands of its
    /// own kind.
    fn stored(&self) -> &dyn Any;
}

/// The row width in bytes of the grid whose next host band step panics (0: none), for the
/// test of a panicking step. Keyed by the grid's width rather than a plain switch, so that
/// tests stepping other grids on host bands at the same time never take the panic.
#[cfg(test)]
pub(crate) static PANIC_IN_STEP: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Copies each read-back range of `rows` into its slice of `into` (the same count, each of
/// the same length): anything else is an internal error, never a panic.
fn place_rows(rows: &[Vec<u8>], into: &mut [&mut [u8]]) -> Result<()> {
    let fits = rows.len() == into.len() && rows.iter().zip(&*into).all(|(r, d)| r.len() == d.len());
    if !fits {
        return Err(crate::error::Error::Internal(format!(
            "{} read-back ranges do not match {} places on the board",
            rows.len(),
            into.len()
        )));
    }
    for (d, r) in into.iter_mut().zip(rows) {
        d.copy_from_slice(r);
    }
    Ok(())
}
