//! A workload as the partitioners see it: how many items, and what one item costs.

use crate::error::{Error, Result};
use crate::family::Family;

/// What one call asks of the devices: `items` independent items of one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Kernel name (e.g. "geometric_product") or kernel family name, as profiles show it.
    pub kernel: String,
    /// The family whose measured rate applies ([`Family::of`] maps a name from outside the
    /// crate); `None` takes the mean rate of the measured families.
    pub family: Option<Family>,
    /// Number of items.
    pub items: u64,
    /// Bytes uploaded per item.
    pub bytes_in_per_item: f64,
    /// Bytes read back per item.
    pub bytes_out_per_item: f64,
    /// Arithmetic operations per item.
    pub flops_per_item: f64,
}

impl Workload {
    /// Checks the numbers are finite and non-negative (items may be zero).
    pub fn validate(&self) -> Result<()> {
        for (name, value) in [
            ("bytes_in_per_item", self.bytes_in_per_item),
            ("bytes_out_per_item", self.bytes_out_per_item),
            ("flops_per_item", self.flops_per_item),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(Error::invalid(
                    name,
                    format!("expected a finite number >= 0, got {value}"),
                ));
            }
        }
        if self.bytes_in_per_item + self.bytes_out_per_item + self.flops_per_item <= 0.0 {
            return Err(Error::invalid(
                "workload",
                "expected an item to cost something: bytes_in_per_item, bytes_out_per_item and flops_per_item are all 0",
            ));
        }
        Ok(())
    }

    /// What the model's history files this workload under: its family, or for a kernel of
    /// no known family its name.
    pub(crate) fn history_key(&self) -> &str {
        self.family.map_or(self.kernel.as_str(), |f| f.name())
    }

    /// The widest per-item binding, which the device binding limit applies to.
    pub fn widest_bytes_per_item(&self) -> f64 {
        self.bytes_in_per_item.max(self.bytes_out_per_item)
    }
}
