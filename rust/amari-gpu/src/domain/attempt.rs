//! What one attempt at a grid run holds fixed (the context, the grid, the compiled kernel,
//! the wait limit), the bands it keeps on each device, and the failure that ends it. The
//! attempt's steps are written where they belong: rounds in `round`, layouts in `relayout`,
//! the loop in `run`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::state::{BandState, Spec};
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

/// The bands on each device, by device id.
pub(super) type States = BTreeMap<usize, Vec<BandState>>;

/// What one attempt holds fixed: the context, the grid, the rule's kernel compiled on each
/// device that has bands, and the wait limit.
pub(super) struct Attempt<'a> {
    pub(super) ctx: &'a MultiGpuContext,
    pub(super) spec: &'a Spec,
    pub(super) kernel: Kernel,
    pub(super) compiled: BTreeMap<usize, Arc<Compiled>>,
    pub(super) timeout: Option<Duration>,
}
