//! Items of a row kernel viewed as several rows each. A kernel writing a (K, K) matrix per
//! sample (the per-sample Fisher maps) produces K² words per item, but a DeviceArray's rows
//! are every axis but the last: N samples of (K, K) are N·K rows of K words. The shards hold
//! the same words either way, so the split is bookkeeping (row ranges scaled, the lineage
//! replaying whole items and cutting out the rows asked for), and an `out=` array of that
//! shape takes the result on its own sharding with its shard boundaries rounded down to
//! whole items.

use std::sync::Arc;

use super::array::ResidentArray;
use super::pieces::{Operand, Placed};
use crate::context::ledger::Entry;
use crate::context::lineage::Lineage;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::kernel::Kernel;

impl MultiGpuContext {
    /// Views the items of `array` (its rows) as `factor` rows each, of a `factor`-th of
    /// their words: `array` becomes (rows · factor, cols / factor), the same shards.
    pub fn split_rows(&self, array: &mut ResidentArray, factor: usize) -> Result<()> {
        if factor == 0 || !array.cols.is_multiple_of(factor) {
            return Err(Error::Internal(format!(
                "{} words per row do not split into {factor} rows",
                array.cols
            )));
        }
        let mut entries = self.resident.lock();
        let entry = entries
            .get_mut(&array.id)
            .ok_or_else(|| crate::context::ledger::Ledger::gone("x"))?;
        split(entry, factor);
        array.rows *= factor;
        array.cols /= factor;
        Ok(())
    }

    /// [`run_resident_into`](Self::run_resident_into) for a kernel whose items are `factor`
    /// rows of `out` each: the result takes `out`'s sharding, every shard boundary rounded
    /// down to a whole item, then replaces `out`'s shards and lineage. Nothing in `out`
    /// changes if the call fails.
    pub fn run_resident_into_split(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
        out: &ResidentArray,
        factor: usize,
    ) -> Result<()> {
        let (items, _) = self.check_operands(kernel, operands)?;
        let words = kernel.output_words_per_item();
        let cols = words / factor.max(1);
        if factor == 0 || (out.rows, out.cols) != (items * factor, cols) || cols * factor != words {
            return Err(Error::Shape {
                argument: "out".into(),
                expected: format!("({}, {cols}) rows (the result's)", items * factor),
                actual: format!("({}, {})", out.rows, out.cols),
            });
        }
        super::run::check_dtype("out", out, kernel)?;
        let snapshot = out.snapshot(&self.resident, "out")?;
        // Boundaries rounded down stay contiguous (a shard's end is the next one's start);
        // a shard holding less than an item is left out.
        let mut layout: Vec<Placed> = Vec::with_capacity(snapshot.shards.len());
        for (device, rows, storage) in &snapshot.shards {
            let start = rows.start / factor;
            let end = if rows.end == out.rows {
                items
            } else {
                rows.end / factor
            };
            if start < end {
                layout.push((*device, start..end, Arc::clone(storage)));
            }
        }
        let mut entry = self.run_on_layout(kernel, operands, items, &layout)?;
        drop(snapshot);
        split(&mut entry, factor);
        self.replace_entry(out, entry)
    }
}

/// An entry's items as `factor` rows each: row ranges scaled, words per row divided, the
/// lineage wrapped to replay whole items.
fn split(entry: &mut Entry, factor: usize) {
    entry.cols /= factor;
    for shard in &mut entry.shards {
        shard.rows = shard.rows.start * factor..shard.rows.end * factor;
    }
    entry.lineage = Arc::new(Lineage::Split {
        inner: Arc::clone(&entry.lineage),
        factor,
    });
}
