//! The context's spare buffers (`alloc::Spare`): a call hands back its partials once they
//! are reduced, and the next call's partials (or a grid call's board) land in them.

use super::MultiGpuContext;

impl MultiGpuContext {
    /// Hands back the partials of a call ([`Ran::partials`](super::Ran::partials)) once
    /// they are reduced, for the next call's partials to reuse.
    pub fn recycle_partials(&self, partials: Vec<f32>) {
        self.spare.keep(partials);
    }
}
