//! What one attempt at a grid run holds fixed (the context, the grid, the rule's kernel,
//! the wait limit), the bands it keeps on each device (in the device's band storage, of
//! whatever kind), and the failure that ends it. The
//! attempt's steps are written where they belong: rounds in `round`, layouts in `relayout`,
//! the loop in `run`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::bands::Band;
use super::scan::GridScan;
use super::state::Spec;
use crate::context::MultiGpuContext;
use crate::error::Error;
use crate::kernel::Kernel;
use crate::runner::bands::Bands;

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

/// The bands on one device: where they lie in the grid, and the device's storage of them.
pub(super) struct DeviceBands<'d> {
    /// The bands, in the device's band order.
    pub(super) bands: Vec<Band>,
    /// Whether the layout left the bands' rows on the board (the caller's grid, unchanged
    /// until the first round ends) for their first round to upload, all of them
    /// (`Attempt::build`); cleared once that round ran.
    pub(super) lent: bool,
    /// Their buffers on the device.
    pub(super) store: Box<dyn Bands + 'd>,
}

impl DeviceBands<'_> {
    /// Rows owned, over all bands.
    pub(super) fn rows(&self) -> usize {
        self.bands.iter().map(|b| b.len()).sum()
    }

    /// Lets the bands go after a failure (the device may still be using them).
    pub(super) fn discard(self) {
        self.store.discard();
    }
}

/// The bands on each device, by device id.
pub(super) type States<'d> = BTreeMap<usize, DeviceBands<'d>>;

/// What one attempt holds fixed: the context, the grid, the rule's kernel, the wait
/// limit, and the scan of the grid's cells its first layout's host passes feed (if the
/// grid is checked during the run).
pub(super) struct Attempt<'a> {
    pub(super) ctx: &'a MultiGpuContext,
    pub(super) spec: &'a Spec,
    pub(super) kernel: Kernel,
    pub(super) timeout: Option<Duration>,
    pub(super) scan: Option<Arc<GridScan>>,
}
