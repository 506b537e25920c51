//! Plans: which device takes which contiguous run of whole chunks, with the model's
//! estimates and the lower bound they are judged against.

use std::fmt;

use crate::error::{Error, Result};

/// How work is split across devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Equal numbers of chunks per device.
    Balanced,
    /// Shares proportional to measured throughput.
    Capability,
    /// Memory budgets first (a device's share fits its budget), then capability.
    Memory,
    /// Minimises the estimated makespan including launch latency and transfers; a device too
    /// slow to pay for its transfers gets nothing.
    Latency,
    /// Devices pull chunks from a shared queue (work stealing); the plan is a prediction.
    Adaptive,
    /// Chooses among the others from the model and says which in the plan.
    Auto,
}

impl Strategy {
    /// Every strategy, in documentation order.
    pub const ALL: [Strategy; 6] = [
        Strategy::Balanced,
        Strategy::Capability,
        Strategy::Memory,
        Strategy::Latency,
        Strategy::Adaptive,
        Strategy::Auto,
    ];

    /// The public name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Balanced => "balanced",
            Strategy::Capability => "capability",
            Strategy::Memory => "memory",
            Strategy::Latency => "latency",
            Strategy::Adaptive => "adaptive",
            Strategy::Auto => "auto",
        }
    }

    /// The strategy that makes a plan asked for as `self` when there is nothing to choose
    /// (an empty call, a call too small to split): `Auto` resolves as on a tie, to latency.
    pub fn resolved(self) -> Strategy {
        match self {
            Strategy::Auto => Strategy::Latency,
            other => other,
        }
    }

    /// Parses a public name.
    pub fn parse(name: &str) -> Result<Strategy> {
        Strategy::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
                Error::invalid(
                    "strategy",
                    format!("expected one of {names:?}, got {name:?}"),
                )
            })
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One device's part of a plan: items `[start, stop)`, which are chunks
/// `[first_chunk, first_chunk + chunks)` of the chunk grid.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceWorkload {
    /// Context-wide device id.
    pub device: usize,
    /// First item.
    pub start: u64,
    /// One past the last item.
    pub stop: u64,
    /// `stop - start`.
    pub items: u64,
    /// Index of the first chunk in the grid.
    pub first_chunk: u64,
    /// Number of chunks.
    pub chunks: u64,
    /// Model estimate of the device's busy time for this share.
    pub estimated_seconds: f64,
}

/// A decided split of one workload across devices (not yet run).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The strategy that made the assignments (never `Auto`).
    pub strategy: Strategy,
    /// The strategy asked for (may be `Auto`).
    pub requested: Strategy,
    /// Items in the workload.
    pub items: u64,
    /// Items per chunk of the grid (the last chunk may be shorter).
    pub chunk_items: u64,
    /// Chunks in the grid.
    pub n_chunks: u64,
    /// Devices with work, in item order; they cover `[0, items)` exactly once.
    pub assignments: Vec<DeviceWorkload>,
    /// Largest estimated device time.
    pub estimated_makespan_s: f64,
    /// max(total work / sum of group throughputs, one chunk on the fastest device).
    pub lower_bound_s: f64,
    /// `lower_bound_s / estimated_makespan_s` (1 for an empty workload).
    pub efficiency: f64,
    /// Whether the call took the fast path: too small for a split to pay (by the cost
    /// model), it ran on one device, on the calling thread, from a cached decision (on
    /// the host device, a chunk its kernel shares among threads runs on the device's own
    /// threads: `HostDevice::run`).
    pub fast_path: bool,
    /// Healthy devices the call could not give work to, by id, and why (a device without
    /// the kernel's dtype, the host device for a user's WGSL): empty for a plan made without
    /// a kernel (`distribute_workload`).
    pub left_out: Vec<(usize, String)>,
}
