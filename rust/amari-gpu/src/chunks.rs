//! The chunk grid: how a problem of `items` items is cut. Boundaries depend only on the
//! problem (its size and the kernel's bytes per item), never on which or how many devices
//! run it, so results cannot depend on the device set.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::kernel::Kernel;

/// Bytes moved per chunk (inputs plus output) aimed at: big enough to amortise a submit and
/// a map, small enough to pipeline and to rebalance.
pub const TARGET_CHUNK_BYTES: u64 = 32 << 20;

/// Storage binding size every WebGPU implementation grants (the spec minimum), so a chunk
/// sized under it fits every device.
pub const PORTABLE_BINDING_BYTES: u64 = 128 << 20;

/// Bytes moved per chunk below which per-chunk overhead would dominate.
pub const MIN_CHUNK_BYTES: u64 = 1 << 20;

/// Chunks a large problem is cut into at least, so that up to dozens of devices can be
/// balanced to within a few percent.
pub const TARGET_CHUNKS: u64 = 64;

fn pow2_floor(x: u64) -> u64 {
    1u64 << (63 - x.max(1).leading_zeros())
}

/// Items per chunk for a problem of `items` items moving `bytes_per_item` bytes, whose
/// widest binding holds `widest_bytes_per_item` per item. A power of two that depends only
/// on these numbers, never on the devices: about `TARGET_CHUNKS` chunks, each between
/// `MIN_CHUNK_BYTES` and `TARGET_CHUNK_BYTES` and within the portable binding size.
pub fn chunk_items_for(items: u64, bytes_per_item: f64, widest_bytes_per_item: f64) -> u64 {
    let per_item = bytes_per_item.max(1.0);
    let widest = widest_bytes_per_item.max(1.0);
    let max_items = pow2_floor(
        ((TARGET_CHUNK_BYTES as f64 / per_item) as u64)
            .min((PORTABLE_BINDING_BYTES as f64 / widest) as u64),
    );
    let min_items = pow2_floor((MIN_CHUNK_BYTES as f64 / per_item) as u64).min(max_items);
    items
        .div_ceil(TARGET_CHUNKS)
        .max(1)
        .next_power_of_two()
        .clamp(min_items, max_items)
}

impl Kernel {
    /// Items per chunk of the engine's chunk grid for a problem of `items` items, within
    /// the kernel's own bound (it depends on the problem only, never on the devices).
    pub fn chunk_items(&self, items: usize) -> usize {
        let chunk = chunk_items_for(
            items as u64,
            self.bytes_per_item() as f64,
            self.widest_binding_bytes_per_item() as f64,
        ) as usize;
        self.bound_chunk_items(chunk, true)
    }

    /// `chunk` within the kernel's bounds: raised to [`Kernel::min_chunk_items`] when it is
    /// the `default` sizing (a caller's choice is kept), but never past what the portable
    /// binding size holds (the default sizing's own bound), then cut to
    /// [`Kernel::max_chunk_items`].
    pub fn bound_chunk_items(&self, chunk: usize, default: bool) -> usize {
        // Per item as the planner counts a binding (all inputs together) or wider.
        let per_item = (self.widest_binding_bytes_per_item() as f64)
            .max(self.workload(0).widest_bytes_per_item());
        let fits = pow2_floor((PORTABLE_BINDING_BYTES as f64 / per_item) as u64);
        let chunk = match (default, self.min_chunk_items) {
            (true, Some(least)) => chunk.max(least.min(fits as usize)),
            _ => chunk,
        };
        self.max_chunk_items.map_or(chunk, |most| chunk.min(most))
    }
}

/// Checks a caller-chosen chunk size against a device's binding limit.
pub fn check_chunk_items(
    kernel: &Kernel,
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
    use crate::kernel::{Input, Output};

    fn kernel(words: usize) -> Kernel {
        Kernel {
            inputs: vec![Input::PerItem(words), Input::PerItem(words)],
            output: Output::PerItem(words),
            ..Kernel::map("k", crate::family::Family::Probe, "")
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
            for items in [1, 1000, 1 << 20, 1 << 30] {
                let k = kernel(words);
                let chunk = k.chunk_items(items);
                assert!(chunk.is_power_of_two());
                assert!(check_chunk_items(&k, chunk, PORTABLE_BINDING_BYTES).is_ok() || chunk == 1);
            }
        }
        // Cl(3,0): 96 bytes per item; 2^18 items keep a chunk under 32 MiB.
        assert_eq!(kernel(8).chunk_items(1 << 30), 1 << 18);
        assert_eq!(kernel(8).chunk_items(2_000_000), 1 << 15);
        assert_eq!(kernel(8).chunk_items(10), 1 << 13);
    }

    #[test]
    fn oversized_chunks_are_refused_with_the_limit() {
        let err = check_chunk_items(&kernel(8), 1 << 30, 128 << 20).unwrap_err();
        assert!(err.to_string().contains("chunk_items"));
    }
}
