//! What a domain-decomposition run did, measured on the host clock: every round per
//! device, every layout, the final download and the devices that failed.

/// One device's part of a round.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRoundReport {
    /// Device id.
    pub device: usize,
    /// Rows the device owned.
    pub rows: usize,
    /// Bands they were cut into.
    pub bands: usize,
    /// Cells (Life: words of four cells) computed, ghost-row work included.
    pub work: u64,
    /// Host seconds staging the ghost rows and submitting.
    pub upload_s: f64,
    /// Seconds from submission until the device finished the round's steps (and the copy
    /// of its border rows, a few rows).
    pub compute_s: f64,
    /// Host seconds copying the read-back rows out.
    pub readback_s: f64,
}

/// What one round (up to `halo` steps) did.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundReport {
    /// Steps of the round.
    pub steps: usize,
    /// Wall seconds of the round, from the first upload to the rows on the host.
    pub wall_s: f64,
    /// Host seconds placing the read-back rows on the host board.
    pub assemble_s: f64,
    /// Every device that had rows.
    pub devices: Vec<DeviceRoundReport>,
}

impl RoundReport {
    /// Seconds of the slowest device's computation.
    pub fn compute_s(&self) -> f64 {
        self.devices.iter().map(|d| d.compute_s).fold(0.0, f64::max)
    }

    /// Seconds moving halos: the slowest device's upload and readback plus the host's
    /// assembly.
    pub fn exchange_s(&self) -> f64 {
        let device = self
            .devices
            .iter()
            .map(|d| d.upload_s + d.readback_s)
            .fold(0.0, f64::max);
        device + self.assemble_s
    }
}

/// A layout the run used.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Steps done before it was taken.
    pub at_step: u64,
    /// (device, rows) in device order.
    pub split: Vec<(usize, usize)>,
    /// Bands it was cut into.
    pub bands: usize,
    /// Seconds it took to move the rows into it (download and upload).
    pub seconds: f64,
}

/// What a run did, measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// Steps run.
    pub steps: u64,
    /// Steps between exchanges.
    pub halo: usize,
    /// Wall seconds of the whole run (layouts and retries included).
    pub wall_s: f64,
    /// Every round of the attempt that completed.
    pub rounds: Vec<RoundReport>,
    /// Every layout of that attempt, the first included.
    pub layouts: Vec<Layout>,
    /// Seconds downloading the finished grid.
    pub download_s: f64,
    /// Devices that failed and why; the run restarted without them.
    pub failures: Vec<(usize, String)>,
    /// Devices given no rows because they cannot compute in the grid's dtype, and why
    /// ("float64 needs SHADER_F64: device 1 'llvmpipe' (gl) lacks it").
    pub left_out: Vec<(usize, String)>,
}
