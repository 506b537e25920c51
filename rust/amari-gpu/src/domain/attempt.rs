//! What one attempt at a grid run holds fixed (the context, the grid, the compiled kernel,
//! the wait limit), the bands it keeps on each device (wgpu buffers, or host vectors on the
//! host device), and the failure that ends it. The
//! attempt's steps are written where they belong: rounds in `round`, layouts in `relayout`,
//! the loop in `run`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::bands::Band;
use super::state::{BandState, HostBand, Spec};
use crate::context::MultiGpuContext;
use crate::device::Compiled;
use crate::error::Error;
use crate::kernel::Kernel;

/// A device failure that ended an attempt (or any other error, which ends the run).
pub(super) struct Failure {
    pub(super) device: Option<usize>,
    pub(super) error: Error,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            device: None,
            error,
        }
    }
}

/// The bands on one device, held as its kind holds them.
pub(super) enum DeviceBands {
    /// Bands in wgpu buffers.
    Wgpu(Vec<BandState>),
    /// Bands in host memory, stepped by the host device's kernels.
    Host(Vec<HostBand>),
}

impl DeviceBands {
    /// The bands, in the device's band order.
    pub(super) fn bands(&self) -> Vec<&Band> {
        match self {
            DeviceBands::Wgpu(list) => list.iter().map(|s| &s.band).collect(),
            DeviceBands::Host(list) => list.iter().map(|s| &s.band).collect(),
        }
    }

    /// Bands held.
    pub(super) fn len(&self) -> usize {
        match self {
            DeviceBands::Wgpu(list) => list.len(),
            DeviceBands::Host(list) => list.len(),
        }
    }

    /// Rows owned, over all bands.
    pub(super) fn rows(&self) -> usize {
        self.bands().iter().map(|b| b.len()).sum()
    }

    /// Lets the bands go after a failure: wgpu buffers are destroyed rather than pooled
    /// (they may still be in use), host vectors are freed.
    pub(super) fn discard(self) {
        if let DeviceBands::Wgpu(list) = self {
            list.into_iter().for_each(BandState::discard);
        }
    }
}

/// The bands on each device, by device id.
pub(super) type States = BTreeMap<usize, DeviceBands>;

/// What one attempt holds fixed: the context, the grid, the rule's kernel compiled on each
/// device that has bands, and the wait limit.
pub(super) struct Attempt<'a> {
    pub(super) ctx: &'a MultiGpuContext,
    pub(super) spec: &'a Spec,
    pub(super) kernel: Kernel,
    pub(super) compiled: BTreeMap<usize, Arc<Compiled>>,
    pub(super) timeout: Option<Duration>,
}
