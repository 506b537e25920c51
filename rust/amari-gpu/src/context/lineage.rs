//! How a resident array came to be, so that rows lost with a device can be computed again
//! (Spark's lineage, not replication): an uploaded array keeps a host copy of its rows; an
//! array a kernel produced keeps the kernel and the lineage of each operand. Replaying rows
//! runs the same kernels through the engine on the healthy devices, row for row, so the
//! rebuilt rows are bit-identical to the lost ones.

use std::ops::Range;
use std::sync::Arc;

use crate::error::Result;
use crate::kernel::{Input, Kernel};

/// Runs a kernel over `items` items of host inputs into an output (the engine's `run`).
pub(crate) type Runner<'a> = dyn Fn(&Kernel, &[&[f32]], &mut [f32], usize) -> Result<()> + 'a;

/// The origin of one resident array.
pub(crate) enum Lineage {
    /// Uploaded from the host: a copy of its rows, `cols` words each.
    Source { data: Arc<Vec<f32>>, cols: usize },
    /// Output of `kernel` on `inputs` (one per kernel input, in binding order).
    Op {
        kernel: Box<Kernel>,
        inputs: Vec<Origin>,
    },
    /// Another array's items, each `factor` rows of a `factor`-th of its words.
    Split { inner: Arc<Lineage>, factor: usize },
    /// Another array's rows from `start` on (a run of its rows taken as a new array).
    Offset { inner: Arc<Lineage>, start: usize },
}

/// Where one input of a kernel came from.
pub(crate) enum Origin {
    /// A resident array (its lineage; the array itself may be freed since).
    Rows(Arc<Lineage>),
    /// Host data: per-item rows uploaded to match the sharding, or an input bound whole.
    Host(Arc<Vec<f32>>),
}

impl Lineage {
    /// Words per row of the array.
    pub(crate) fn cols(&self) -> usize {
        match self {
            Lineage::Source { cols, .. } => *cols,
            Lineage::Op { kernel, .. } => kernel.output_words_per_item(),
            Lineage::Split { inner, factor } => inner.cols() / factor,
            Lineage::Offset { inner, .. } => inner.cols(),
        }
    }

    /// Rows `rows` of the array, computed again from host data by `run` (the context's
    /// engine on its healthy devices: `run(kernel, inputs, output, items)`).
    pub(crate) fn replay(&self, run: &Runner<'_>, rows: Range<usize>) -> Result<Vec<f32>> {
        match self {
            Lineage::Source { data, cols } => Ok(data[rows.start * cols..rows.end * cols].to_vec()),
            Lineage::Offset { inner, start } => {
                inner.replay(run, start + rows.start..start + rows.end)
            }
            Lineage::Split { inner, factor } => {
                // The whole items holding the rows, then the rows.
                let items = rows.start / factor..rows.end.div_ceil(*factor);
                let words = inner.replay(run, items.clone())?;
                let cols = self.cols();
                let skip = (rows.start - items.start * factor) * cols;
                Ok(words[skip..skip + rows.len() * cols].to_vec())
            }
            Lineage::Op { kernel, inputs } => {
                let mut owned: Vec<Vec<f32>> = Vec::with_capacity(inputs.len());
                for (origin, spec) in inputs.iter().zip(&kernel.inputs) {
                    owned.push(match (origin, spec) {
                        (Origin::Rows(parent), _) => parent.replay(run, rows.clone())?,
                        (Origin::Host(data), Input::PerItem(w)) => {
                            data[rows.start * w..rows.end * w].to_vec()
                        }
                        (Origin::Host(data), Input::Whole(_)) => data.as_ref().clone(),
                    });
                }
                let slices: Vec<&[f32]> = owned.iter().map(Vec::as_slice).collect();
                let mut out = crate::alloc::zeroed("rebuilt rows", rows.len() * self.cols())?;
                run(kernel, &slices, &mut out, rows.len())?;
                Ok(out)
            }
        }
    }

    /// Bytes of host memory this lineage keeps (copies of uploaded rows and host operands;
    /// shared parents counted once per path).
    pub(crate) fn host_bytes(&self) -> u64 {
        match self {
            Lineage::Source { data, .. } => (data.len() * 4) as u64,
            Lineage::Split { inner, .. } | Lineage::Offset { inner, .. } => inner.host_bytes(),
            Lineage::Op { inputs, .. } => inputs
                .iter()
                .map(|o| match o {
                    Origin::Rows(parent) => parent.host_bytes(),
                    Origin::Host(data) => (data.len() * 4) as u64,
                })
                .sum(),
        }
    }
}
