//! The cost model of one device: what the partitioners predict from. Its figures come from
//! calibration (measured on the device) and are refined after every call from the chunks
//! each device completed.

use crate::workload::Workload;

/// The predicted cost of work on one device, for one workload's kernel family.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceModel {
    /// Context-wide device id.
    pub device: usize,
    /// Physical-device group: logical devices on one adapter, or one device seen through two
    /// backends, share one piece of hardware, so their speeds add up only as far as the
    /// measured `group_speedup` says. Members are taken to be the same hardware.
    pub group: usize,
    /// Seconds of fixed cost per chunk (submit, synchronise, map).
    pub launch_latency_s: f64,
    /// Host-to-device bytes per second.
    pub h2d_bytes_per_s: f64,
    /// Device-to-host bytes per second.
    pub d2h_bytes_per_s: f64,
    /// Arithmetic rate for the workload's family (flops per second).
    pub flops_per_s: f64,
    /// Observed / predicted time from history (1.0 when there is none yet).
    pub correction: f64,
    /// Relative spread of recent observed / predicted ratios (0 when consistent or unknown).
    pub uncertainty: f64,
    /// Memory the device can give a workload, when known.
    pub memory_budget_bytes: Option<u64>,
    /// Largest storage binding the device accepts.
    pub max_binding_bytes: u64,
    /// Measured aggregate speed of all `group_members` devices of the group running
    /// together, over one of them alone: 1 when sharing gains nothing (or is unmeasured),
    /// `group_members` when the members behave as independent devices.
    pub group_speedup: f64,
    /// Devices of the group the speedup was measured with.
    pub group_members: usize,
}

impl DeviceModel {
    /// Seconds per item when the device works alone.
    pub fn seconds_per_item(&self, workload: &Workload) -> f64 {
        let transfer = workload.bytes_in_per_item / self.h2d_bytes_per_s
            + workload.bytes_out_per_item / self.d2h_bytes_per_s;
        let compute = workload.flops_per_item / self.flops_per_s;
        (transfer + compute) * self.correction
    }

    /// Items per second when the device works alone.
    pub fn items_per_s(&self, workload: &Workload) -> f64 {
        1.0 / self.seconds_per_item(workload)
    }

    /// Aggregate speed of `m` busy members of the group over one alone: the measured
    /// speedup for all members, interpolated linearly in between (1 for one member).
    pub fn group_speedup_with(&self, m: usize) -> f64 {
        let (m, k) = (m.max(1), self.group_members.max(1));
        let full = self.group_speedup.clamp(0.25, k as f64);
        if k == 1 || m == 1 {
            return 1.0;
        }
        1.0 + (full - 1.0) * ((m.min(k) - 1) as f64 / (k - 1) as f64)
    }

    /// How much slower each of `m` busy members of the group runs than one member alone.
    pub fn sharing_factor(&self, m: usize) -> f64 {
        m.max(1) as f64 / self.group_speedup_with(m)
    }

    /// Predicted seconds for `items` items in `chunks` chunks while `sharing` devices of the
    /// same group are busy at once (they divide the group's measured aggregate speed).
    pub fn seconds(&self, workload: &Workload, items: u64, chunks: u64, sharing: usize) -> f64 {
        if items == 0 {
            return 0.0;
        }
        chunks as f64 * self.launch_latency_s
            + items as f64 * self.seconds_per_item(workload) * self.sharing_factor(sharing)
    }

    /// Whether a chunk of `chunk_items` items fits this device's binding limit.
    pub fn accepts_chunk(&self, workload: &Workload, chunk_items: u64) -> bool {
        workload.widest_bytes_per_item() * chunk_items as f64 <= self.max_binding_bytes as f64
    }
}
