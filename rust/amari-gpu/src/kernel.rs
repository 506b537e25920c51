//! What a map kernel is to the executor: a WGSL entry point plus the per-item sizes of its
//! inputs and output. Every map kernel shares one binding layout (see `shaders/`):
//! binding 0 is a uniform with the item count and grid row width, inputs follow in order,
//! the output is last.

use std::borrow::Cow;

/// A kernel that maps `items` independent inputs to `items` outputs.
#[derive(Debug, Clone)]
pub struct MapKernel {
    /// Pipeline-cache key; two kernels with the same id must have the same source.
    pub id: String,
    /// Kernel family, for capability and throughput bookkeeping.
    pub family: &'static str,
    /// WGSL source.
    pub source: Cow<'static, str>,
    /// Entry point name.
    pub entry: &'static str,
    /// f32 words per item of each input.
    pub input_words: Vec<usize>,
    /// f32 words per item of the output.
    pub output_words: usize,
    /// Arithmetic operations per item (for the cost model).
    pub flops_per_item: f64,
}

impl MapKernel {
    /// The workload of running this kernel over `items` items.
    pub fn workload(&self, items: usize) -> crate::workload::Workload {
        crate::workload::Workload {
            kernel: self.id.clone(),
            items: items as u64,
            bytes_in_per_item: 4.0 * self.input_words.iter().sum::<usize>() as f64,
            bytes_out_per_item: 4.0 * self.output_words as f64,
            flops_per_item: self.flops_per_item,
        }
    }

    /// Bytes moved per item (all inputs uploaded plus the output read back).
    pub fn bytes_per_item(&self) -> u64 {
        4 * (self.input_words.iter().sum::<usize>() + self.output_words) as u64
    }

    /// The widest single binding per item, which the binding-size limit applies to.
    pub fn widest_binding_bytes_per_item(&self) -> u64 {
        4 * self
            .input_words
            .iter()
            .copied()
            .chain(std::iter::once(self.output_words))
            .max()
            .unwrap_or(1) as u64
    }
}

/// The item-count and grid-width uniform every map kernel reads at binding 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Params {
    /// Items in this chunk.
    pub n: u32,
    /// Threads per row of the dispatch grid.
    pub row_threads: u32,
    /// Padding to the 16-byte uniform alignment.
    pub pad: [u32; 2],
}
