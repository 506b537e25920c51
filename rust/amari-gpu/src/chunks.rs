//! The chunk grid: how a problem of `items` items is cut. Boundaries depend only on the
//! problem (its size and the kernel's bytes per item), never on which or how many devices
//! run it, so results cannot depend on the device set.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::kernel::MapKernel;

/// Bytes moved per chunk (inputs plus output) aimed at: big enough to amortise a submit and
/// a map, small enough to pipeline and to rebalance.
pub const TARGET_CHUNK_BYTES: u64 = 32 << 20;

/// Storage binding size every WebGPU implementation grants (the spec minimum), so a chunk
/// sized under it fits every device.
pub const PORTABLE_BINDING_BYTES: u64 = 128 << 20;

/// Items per chunk for `kernel`: a power of two, so the grid is the same on every machine.
pub fn default_chunk_items(kernel: &MapKernel) -> usize {
    let by_target = (TARGET_CHUNK_BYTES / kernel.bytes_per_item().max(1)).max(1);
    let by_binding = (PORTABLE_BINDING_BYTES / kernel.widest_binding_bytes_per_item()).max(1);
    let items = by_target.min(by_binding);
    // Largest power of two not above `items`.
    1usize << (63 - items.leading_zeros())
}

/// Checks a caller-chosen chunk size against a device's binding limit.
pub fn check_chunk_items(
    kernel: &MapKernel,
    chunk_items: usize,
    max_binding_bytes: u64,
) -> Result<()> {
    let widest = kernel.widest_binding_bytes_per_item();
    let bytes = widest.saturating_mul(chunk_items as u64);
    if bytes > max_binding_bytes {
        return Err(Error::invalid(
            "chunk_items",
            format!(
                "expected at most {} items for kernel {} ({} bytes per item, device binding limit {} bytes), got {}",
                max_binding_bytes / widest,
                kernel.id,
                widest,
                max_binding_bytes,
                chunk_items
            ),
        ));
    }
    Ok(())
}

/// The chunk ranges covering `[0, items)` in order.
pub fn chunk_ranges(items: usize, chunk_items: usize) -> Vec<Range<usize>> {
    let step = chunk_items.max(1);
    (0..items.div_ceil(step))
        .map(|k| k * step..((k + 1) * step).min(items))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(words: usize) -> MapKernel {
        MapKernel {
            id: "k".into(),
            family: "test",
            source: "".into(),
            entry: "main",
            input_words: vec![words, words],
            output_words: words,
        }
    }

    #[test]
    fn chunk_ranges_cover_exactly_once_in_order() {
        for (items, step) in [(0, 4), (1, 4), (8, 4), (9, 4), (1_000_003, 65_536)] {
            let ranges = chunk_ranges(items, step);
            let mut next = 0;
            for r in &ranges {
                assert_eq!(r.start, next);
                assert!(r.end > r.start && r.end - r.start <= step);
                next = r.end;
            }
            assert_eq!(next, items);
        }
    }

    #[test]
    fn default_chunks_are_powers_of_two_within_portable_limits() {
        for words in [1, 8, 64, 1 << 20] {
            let k = kernel(words);
            let items = default_chunk_items(&k);
            assert!(items.is_power_of_two());
            assert!(check_chunk_items(&k, items, PORTABLE_BINDING_BYTES).is_ok() || items == 1);
        }
        assert_eq!(default_chunk_items(&kernel(8)), 1 << 18);
    }

    #[test]
    fn oversized_chunks_are_refused_with_the_limit() {
        let err = check_chunk_items(&kernel(8), 1 << 30, 128 << 20).unwrap_err();
        assert!(err.to_string().contains("chunk_items"));
    }
}
