//! One shard of a resident array: rows `[start, stop)` of `cols` f32 words each, held on one
//! device — a storage buffer on a wgpu device, a `Vec<f32>` on the host device — and the
//! check that a device has room for one (its largest buffer, its memory budget). Putting
//! rows on a device and reading them back is the device's own (`runner::Shards`).

use std::ops::Range;

use crate::capabilities::memory_budget_bytes;
use crate::device::GpuDevice;
use crate::error::{Error, Result};
pub(crate) use crate::runner::{shards_of, Storage};

/// Rows of a resident array on one device.
pub(crate) struct Shard {
    /// Device id.
    pub(crate) device: usize,
    /// Rows of the array it holds.
    pub(crate) rows: Range<usize>,
    /// Its words, `rows.len() * cols` (shared with calls running on it).
    pub(crate) storage: std::sync::Arc<Storage>,
}

impl Shard {
    /// Bytes the shard's rows take (the words held; a pooled buffer may be larger).
    pub(crate) fn bytes(&self, cols: usize) -> u64 {
        (self.rows.len() * cols * 4) as u64
    }
}

/// Checks that `dev` may hold `bytes` more when it already holds `held` for resident arrays:
/// within its largest buffer and its memory budget (where one is known).
pub(crate) fn check_room(dev: &GpuDevice, bytes: u64, held: u64) -> Result<()> {
    let refuse = |why: String| Error::OutOfMemory {
        device: dev.id,
        reason: format!("cannot allocate {bytes} bytes for a resident shard: {why}"),
    };
    if let Some(largest) = shards_of(dev).largest_shard(dev) {
        if bytes > largest {
            return Err(refuse(format!(
                "the device's largest buffer is {largest} bytes"
            )));
        }
    }
    if let Some(budget) = memory_budget_bytes(dev) {
        if held.saturating_add(bytes) > budget {
            return Err(refuse(format!(
                "resident arrays already hold {held} bytes of its {budget}-byte memory budget"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::device::HostDevice;
    use crate::kernel::FmaMode;

    #[test]
    fn shards_beyond_the_memory_budget_are_refused_naming_device_and_bytes() {
        let info = crate::host::cpu::describe(0);
        let host = HostDevice::new(1, FmaMode::default()).expect("host pool");
        let dev = GpuDevice::host(3, &info, 0, host);
        let asked = 1u64 << 60;
        let error = check_room(&dev, asked, 0).unwrap_err();
        assert!(
            matches!(error, Error::OutOfMemory { device: 3, .. }),
            "{error}"
        );
        assert!(error.to_string().contains(&asked.to_string()), "{error}");
        assert!(check_room(&dev, 4096, 0).is_ok());
    }
}
