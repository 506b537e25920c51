//! A workload as the partitioners see it: how many items, and what one item costs.

use std::borrow::Cow;

use crate::dtype::Dtype;
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
    /// What the kernel computes in: a device's speed differs per dtype (float64 at 1/2 to
    /// 1/64 of float32), so the model's history learns each dtype apart.
    pub dtype: Dtype,
}

impl Workload {
    /// Checks each field on its own: a kernel name, and per-item costs that are finite
    /// and non-negative (items may be zero). This is the one rule for a workload's fields;
    /// the Python `Workload` applies it when constructed.
    pub fn validate_fields(&self) -> Result<()> {
        if self.kernel.is_empty() {
            return Err(Error::invalid("kernel", "expected a kernel name, got \"\""));
        }
        for (name, value) in [
            ("bytes_in_per_item", self.bytes_in_per_item),
            ("bytes_out_per_item", self.bytes_out_per_item),
            ("flops_per_item", self.flops_per_item),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(Error::invalid(
                    name,
                    format!("expected a finite number >= 0, got {}", show(value)),
                ));
            }
        }
        Ok(())
    }

    /// [`Workload::validate_fields`], and an item must cost something (checked when the
    /// workload is planned).
    pub fn validate(&self) -> Result<()> {
        self.validate_fields()?;
        if self.bytes_in_per_item + self.bytes_out_per_item + self.flops_per_item <= 0.0 {
            return Err(Error::invalid(
                "workload",
                "expected an item to cost something: bytes_in_per_item, bytes_out_per_item and flops_per_item are all 0",
            ));
        }
        Ok(())
    }

    /// What the model's history files this workload under: its family, or for a kernel of
    /// no known family its name; with `@dtype` after it for every dtype but float32 (float32
    /// keeps the keys histories always had).
    pub(crate) fn history_key(&self) -> Cow<'_, str> {
        let name = self.family.map_or(self.kernel.as_str(), |f| f.name());
        match self.dtype {
            Dtype::F32 => Cow::Borrowed(name),
            other => Cow::Owned(format!("{name}@{other}")),
        }
    }

    /// The widest per-item binding, which the device binding limit applies to.
    pub fn widest_bytes_per_item(&self) -> f64 {
        self.bytes_in_per_item.max(self.bytes_out_per_item)
    }
}

/// A number as Python writes it (`nan`, `inf`, `-1.0`), so messages read the same from
/// either language.
fn show(value: f64) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A float64 call's observed times must not correct the float32 model of its family (nor
    // the other way round): each dtype has its own history; float32 keeps the old keys.
    #[test]
    fn each_dtype_has_its_own_history_key() {
        let mut w = Workload {
            kernel: "geometric_algebra/ga_cl300_geometric_product_nn".into(),
            family: Some(Family::GeometricAlgebra),
            items: 10,
            bytes_in_per_item: 64.0,
            bytes_out_per_item: 32.0,
            flops_per_item: 120.0,
            dtype: Dtype::F32,
        };
        assert_eq!(w.history_key(), "geometric_algebra");
        w.dtype = Dtype::F64;
        assert_eq!(w.history_key(), "geometric_algebra@float64");
        w.family = None;
        assert_eq!(
            w.history_key(),
            "geometric_algebra/ga_cl300_geometric_product_nn@float64"
        );
    }
}
