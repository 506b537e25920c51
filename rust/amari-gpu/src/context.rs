//! The multi-device context: one process-wide wgpu instance, the devices a caller selected,
//! and the entry point that runs a map kernel across all of them.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::adapter::{self, AdapterInfo};
use crate::chunks::{check_chunk_items, chunk_ranges, default_chunk_items};
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::executor::{run_on_devices, ChunkJob};
use crate::kernel::MapKernel;
use crate::selection::{select, ContextOptions};

/// The one wgpu instance of the process, over every native backend.
pub fn instance() -> &'static wgpu::Instance {
    static INSTANCE: OnceLock<wgpu::Instance> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = wgpu::Backends::all();
        descriptor.flags = wgpu::InstanceFlags::from_build_config().with_env();
        wgpu::Instance::new(descriptor)
    })
}

/// Every adapter of every native backend, preferred backends first.
pub fn adapters() -> Vec<AdapterInfo> {
    adapter::enumerate(instance())
        .into_iter()
        .map(|(_, info)| info)
        .collect()
}

/// A set of open devices that kernels run on together.
pub struct MultiGpuContext {
    devices: Vec<Arc<GpuDevice>>,
    options: ContextOptions,
}

impl MultiGpuContext {
    /// Opens the devices `options` select.
    pub fn new(options: ContextOptions) -> Result<Self> {
        let pairs = adapter::enumerate(instance());
        let infos: Vec<AdapterInfo> = pairs.iter().map(|(_, info)| info.clone()).collect();
        let chosen = select(&infos, &options)?;
        let devices = chosen
            .iter()
            .enumerate()
            .map(|(id, &index)| {
                // Devices on one adapter, or on one device seen through two backends, share
                // hardware: they form one group, named by the original adapter's index.
                let group = infos[index].same_device_as.unwrap_or(index);
                GpuDevice::open(id, &pairs[index].0, &pairs[index].1, group).map(Arc::new)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MultiGpuContext { devices, options })
    }

    /// The open devices, by id.
    pub fn devices(&self) -> &[Arc<GpuDevice>] {
        &self.devices
    }

    /// The options the context was opened with.
    pub fn options(&self) -> &ContextOptions {
        &self.options
    }

    /// Items per chunk for `kernel` in this context.
    pub fn chunk_items(&self, kernel: &MapKernel) -> Result<usize> {
        let items = self
            .options
            .chunk_items
            .unwrap_or_else(|| default_chunk_items(kernel));
        for dev in &self.devices {
            check_chunk_items(kernel, items, dev.max_binding_bytes())?;
        }
        Ok(items)
    }

    /// Runs `kernel` over `items` items: `inputs[i]` holds `kernel.input_words[i]` words per
    /// item, `output` receives `kernel.output_words` per item. Chunks are dealt to the
    /// devices in equal contiguous shares.
    pub fn run_map(
        &self,
        kernel: &MapKernel,
        inputs: &[&[f32]],
        output: &mut [f32],
        items: usize,
    ) -> Result<()> {
        if inputs.len() != kernel.input_words.len() {
            return Err(Error::invalid(
                "inputs",
                format!(
                    "expected {} arrays, got {}",
                    kernel.input_words.len(),
                    inputs.len()
                ),
            ));
        }
        for (i, (data, &words)) in inputs.iter().zip(&kernel.input_words).enumerate() {
            if data.len() != items * words {
                return Err(Error::invalid(
                    format!("inputs[{i}]"),
                    format!("expected {} words, got {}", items * words, data.len()),
                ));
            }
        }
        if output.len() != items * kernel.output_words {
            return Err(Error::invalid(
                "output",
                format!(
                    "expected {} words, got {}",
                    items * kernel.output_words,
                    output.len()
                ),
            ));
        }
        if items == 0 {
            return Ok(());
        }
        if items > u32::MAX as usize {
            return Err(Error::invalid(
                "items",
                format!("expected at most {} items per call, got {items}", u32::MAX),
            ));
        }
        let chunk_items = self.chunk_items(kernel)?;
        let ranges = chunk_ranges(items, chunk_items);
        let n_devices = self.devices.len();
        let mut jobs: Vec<Vec<ChunkJob<'_>>> = (0..n_devices).map(|_| Vec::new()).collect();
        let mut rest = output;
        let n_chunks = ranges.len();
        for (k, range) in ranges.into_iter().enumerate() {
            let (head, tail) =
                std::mem::take(&mut rest).split_at_mut(range.len() * kernel.output_words);
            rest = tail;
            // Equal contiguous shares of the chunk list.
            let device = k * n_devices / n_chunks;
            jobs[device].push(ChunkJob {
                range,
                output: head,
            });
        }
        let devices: Vec<&GpuDevice> = self.devices.iter().map(|d| d.as_ref()).collect();
        let timeout = self.options.sync_timeout_ms.map(Duration::from_millis);
        run_on_devices(&devices, kernel, inputs, jobs, timeout)
    }
}
