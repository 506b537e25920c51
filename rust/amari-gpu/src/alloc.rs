//! Host allocations whose size comes from a call's arguments: checked and fallible, so
//! that a request too large for the machine is an [`Error::HostOutOfMemory`] naming the
//! array and the bytes asked, never an abort of the process; and the spare buffers a call
//! hands back for the next one ([`Spare`]).

use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};

/// `len` zeros, or the error naming `argument` when the bytes cannot be allocated (or do
/// not even fit in an address). Taken from the allocator zeroed (`calloc`): a large block is
/// fresh pages, zero from the OS, which no pass here writes again; they fault in where the
/// caller first writes them, in parallel when it writes in parallel (a pass writing zeros
/// first faulted every page on the calling thread).
pub fn zeroed<T: bytemuck::Zeroable>(argument: &str, len: usize) -> Result<Vec<T>> {
    let bytes = len as u128 * std::mem::size_of::<T>() as u128;
    let too_big = || Error::HostOutOfMemory {
        argument: argument.to_string(),
        bytes,
    };
    if bytes > isize::MAX as u128 {
        return Err(too_big());
    }
    bytemuck::allocation::try_zeroed_vec(len).map_err(|()| too_big())
}

/// `a * b` as a length, or the error naming `argument` when it does not fit in memory.
pub fn product(argument: &str, factors: &[usize], word_bytes: usize) -> Result<usize> {
    let mut n: u128 = 1;
    for &f in factors {
        n = n.saturating_mul(f as u128);
    }
    if n.saturating_mul(word_bytes as u128) > isize::MAX as u128 {
        return Err(Error::HostOutOfMemory {
            argument: argument.to_string(),
            bytes: n.saturating_mul(word_bytes as u128),
        });
    }
    Ok(n as usize)
}

/// Buffers a call hands back for the next one: per-chunk outputs of a reduction (the Fisher
/// SYRK's are 40 MB for 65,536 × 256 scores, one 640 KB partial per chunk), a grid call's
/// board, or the host device's grid band buffers, then land in pages already mapped, instead
/// of fresh ones faulted in and zeroed by the kernel one page at a time on every call, and
/// unmapped again after it.
/// Largest buffer kept (bytes): a call with larger buffers frees them as it always did.
pub const MAX_SPARE_BYTES: usize = 256 << 20;

/// Most buffers kept (the largest): a grid band on the host device has two.
const MAX_KEPT: usize = 4;

/// The words of [`Spare::take_any`] under test: a NaN no kernel writes, so that a word
/// read before it is written shows in every result computed from it.
#[cfg(test)]
pub(crate) const UNWRITTEN: f32 = f32::from_bits(0x7fc0_dead);

/// Spare buffers (none until a call hands one back).
#[derive(Debug, Default)]
pub(crate) struct Spare(Mutex<Vec<Vec<f32>>>);

impl Spare {
    /// `words` zeros for a call's partials (see [`Spare::take`]).
    pub(crate) fn zeroed(&self, words: usize) -> Result<Vec<f32>> {
        self.take("partials", words)
    }

    /// `words` zeros: the smallest spare buffer large enough (taken, so concurrent calls
    /// never share it), else a new one for `argument` (the spares stay for later).
    pub(crate) fn take(&self, argument: &str, words: usize) -> Result<Vec<f32>> {
        let Some(mut spare) = self.pick(words) else {
            return zeroed(argument, words);
        };
        spare.clear();
        spare.resize(words, 0.0);
        Ok(spare)
    }

    /// `words` words holding whatever the buffer's last user left (any bits, only ever
    /// read as words): for a caller that writes every word before it reads it, so that a
    /// large buffer is not written twice. Otherwise as [`Spare::take`] (a new buffer is
    /// zeros). Under test the words are a NaN pattern, so that a word read before it is
    /// written shows in the results the tests compare bit for bit.
    pub(crate) fn take_any(&self, argument: &str, words: usize) -> Result<Vec<f32>> {
        #[cfg_attr(not(test), allow(unused_mut))]
        let mut spare = match self.pick(words) {
            Some(mut spare) => {
                // Within the capacity: neither allocates, and only words past the buffer's
                // last length are written.
                spare.truncate(words);
                spare.resize(words, 0.0);
                spare
            }
            None => zeroed(argument, words)?,
        };
        #[cfg(test)]
        spare.fill(UNWRITTEN);
        Ok(spare)
    }

    /// The smallest kept buffer of at least `words` words, taken out of the spares.
    fn pick(&self, words: usize) -> Option<Vec<f32>> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let fits = (0..kept.len())
            .filter(|&i| kept[i].capacity() >= words)
            .min_by_key(|&i| kept[i].capacity());
        fits.map(|i| kept.swap_remove(i))
    }

    /// Where the kept buffers' words are (tests check that a call reused them).
    #[cfg(test)]
    pub(crate) fn kept(&self) -> Vec<usize> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut at: Vec<usize> = kept.iter().map(|b| b.as_ptr() as usize).collect();
        at.sort_unstable();
        at
    }

    /// Keeps `buffer` for a later call, if it is not above [`MAX_SPARE_BYTES`] and is
    /// among the [`MAX_KEPT`] largest.
    pub(crate) fn keep(&self, buffer: Vec<f32>) {
        if buffer.capacity() * std::mem::size_of::<f32>() > MAX_SPARE_BYTES
            || buffer.capacity() == 0
        {
            return;
        }
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.push(buffer);
        if kept.len() > MAX_KEPT {
            if let Some(i) = (0..kept.len()).min_by_key(|&i| kept[i].capacity()) {
                kept.swap_remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_requests_are_errors_naming_the_bytes() {
        let e = zeroed::<f32>("out", usize::MAX / 2).unwrap_err();
        assert!(e.to_string().contains("out: cannot allocate"), "{e}");
        assert!(product("out", &[usize::MAX, 2], 4).is_err());
        assert_eq!(zeroed::<f32>("out", 3).unwrap(), vec![0.0; 3]);
        assert_eq!(product("out", &[3, 5], 4).unwrap(), 15);
    }

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

    /// A buffer taken for a caller that writes every word reuses a kept one without
    /// zeroing it (under test its words are the NaN pattern that shows a word read
    /// unwritten), shorter or longer than it was; with none kept it is a new one.
    #[test]
    fn a_buffer_taken_to_be_overwritten_is_reused_and_not_zeroed() {
        let spare = Spare::default();
        assert_eq!(spare.take_any("grid", 3).unwrap().len(), 3);
        let mut kept = Vec::with_capacity(1000);
        kept.resize(600, 7.0f32);
        let at = kept.as_ptr() as usize;
        spare.keep(kept);
        for words in [900, 10] {
            let got = spare.take_any("grid", words).unwrap();
            assert_eq!(got.as_ptr() as usize, at, "the kept buffer");
            assert_eq!(got.len(), words);
            assert!(got.iter().all(|w| w.to_bits() == UNWRITTEN.to_bits()));
            spare.keep(got);
        }
    }

    /// Several buffers are kept (a host grid band hands back two), the largest when there
    /// are too many, and a call takes the smallest that fits.
    #[test]
    fn the_largest_few_buffers_are_kept_and_the_smallest_fitting_one_given() {
        let spare = Spare::default();
        for n in [100, 500, 300, 200, 400] {
            spare.keep(vec![1.0f32; n]);
        }
        let got = spare.take("grid", 250).unwrap();
        assert_eq!(got, vec![0.0; 250]);
        assert!((300..400).contains(&got.capacity()), "{}", got.capacity());
        let caps: Vec<usize> = (0..3)
            .map(|_| spare.take("grid", 1).unwrap().capacity())
            .collect();
        assert!(
            caps.iter().all(|&c| c >= 200),
            "the smallest went: {caps:?}"
        );
        assert!(spare.take("grid", 1).unwrap().capacity() < 100, "none left");
    }
}
