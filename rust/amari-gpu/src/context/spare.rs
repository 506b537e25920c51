//! The partials buffer a call hands back for the context's next call: per-chunk outputs of
//! a reduction (the Fisher SYRK's are 40 MB for 65,536 × 256 scores, one 640 KB partial per
//! chunk) then land in pages already mapped, instead of fresh ones faulted in and zeroed by
//! the kernel one page at a time on every call, and unmapped again after it.

use std::sync::{Mutex, PoisonError};

use super::MultiGpuContext;
use crate::alloc;
use crate::error::Result;

/// Largest buffer kept (bytes): a call with larger partials frees them as it always did.
pub const MAX_SPARE_BYTES: usize = 256 << 20;

/// One spare buffer (empty until a call hands one back).
#[derive(Debug, Default)]
pub(crate) struct Spare(Mutex<Vec<f32>>);

impl Spare {
    /// `words` zeros for a call's partials: the spare buffer when it is large enough (taken,
    /// so concurrent calls never share it), else a new one (the spare stays for later).
    pub(crate) fn zeroed(&self, words: usize) -> Result<Vec<f32>> {
        let mut spare = {
            let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.capacity() < words {
                return alloc::zeroed("partials", words);
            }
            std::mem::take(&mut *kept)
        };
        spare.clear();
        spare.resize(words, 0.0);
        Ok(spare)
    }

    /// Keeps `buffer` for the next call, if it is larger than the one kept and not above
    /// [`MAX_SPARE_BYTES`].
    fn keep(&self, buffer: Vec<f32>) {
        if buffer.capacity() * std::mem::size_of::<f32>() > MAX_SPARE_BYTES {
            return;
        }
        let mut spare = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if buffer.capacity() > spare.capacity() {
            *spare = buffer;
        }
    }
}

impl MultiGpuContext {
    /// Hands back the partials of a call ([`Ran::partials`](super::Ran::partials)) once
    /// they are reduced, for the next call's partials to reuse.
    pub fn recycle_partials(&self, partials: Vec<f32>) {
        self.spare.keep(partials);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_comes_back_zeroed_and_only_when_large_enough() {
        let spare = Spare::default();
        spare.keep(vec![7.0f32; 1000]);
        let small = spare.zeroed(10).unwrap();
        assert_eq!(small, vec![0.0; 10]);
        assert!(small.capacity() >= 1000, "the kept buffer is reused");
        // Taken: a second call meanwhile gets a buffer of its own.
        assert!(spare.zeroed(10).unwrap().capacity() < 1000);
        spare.keep(small);
        let big = spare.zeroed(2000).unwrap();
        assert_eq!(big, vec![0.0; 2000]);
        // The smaller buffer was not given out: it is still there.
        assert!(spare.zeroed(500).unwrap().capacity() >= 1000);
        spare.keep(vec![0.0f32; MAX_SPARE_BYTES / 4 + 1]);
        assert!(spare.zeroed(1).unwrap().capacity() < 1000);
    }
}
