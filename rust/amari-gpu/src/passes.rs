//! Recording a kernel's dispatches over one chunk: one per pass ([`Kernel::passes`]), each
//! with its own uniform block (the pass index in word [`crate::kernel::PASS_WORD`]) and the
//! same storage bindings, in one compute pass. Every path that runs a kernel on a wgpu
//! device (the engine's chunks, resident shards, calibration and benchmarks) records it
//! here, so a kernel that walks a long loop in passes does so wherever it runs.

use crate::device::{Compiled, GpuDevice};
use crate::error::Result;
use crate::gpu_io::Uploads;
use crate::kernel::Kernel;
use crate::pool::Pooled;

/// How one chunk of a kernel is launched: the kernel, its pass-0 uniform block and its
/// workgroup grid.
pub(crate) struct Launch<'k> {
    /// The kernel launched.
    pub kernel: &'k Kernel,
    /// The uniform block of pass 0 (the item count, grid row width, kernel parameters).
    pub header: Vec<u32>,
    /// Workgroups along x, y and z.
    pub grid: [u32; 3],
}

impl<'k> Launch<'k> {
    /// The launch of `items` items of `kernel` on `dev`, or an error naming `argument`
    /// when they do not fit one dispatch.
    pub(crate) fn new(
        dev: &GpuDevice,
        kernel: &'k Kernel,
        items: usize,
        argument: &str,
    ) -> Result<Launch<'k>> {
        let (grid, row_threads) = crate::gpu_io::grid(dev, kernel, items, argument)?;
        Ok(Launch {
            kernel,
            header: kernel.uniform(items as u32, row_threads),
            grid,
        })
    }
}

/// Records the passes of the kernel over one chunk launched as `launch`: `storage` are the
/// bindings after the uniform (binding 1 on). The passes share one compute pass (wgpu
/// orders a dispatch after the writes of the ones before it), whose begin and end go to
/// `timestamps` when given. The uniform blocks join `uploads`, which are all recorded
/// into `encoder` before the pass. Returns the uniform buffers, which must live until the
/// submission has run.
pub(crate) fn encode(
    dev: &GpuDevice,
    encoder: &mut wgpu::CommandEncoder,
    uploads: &mut Uploads,
    pipeline: &Compiled,
    launch: &Launch<'_>,
    storage: &[wgpu::BindGroupEntry<'_>],
    timestamps: Option<&wgpu::QuerySet>,
) -> Result<Vec<Pooled>> {
    let kernel = launch.kernel;
    let bytes = (launch.header.len() * 4) as u64;
    let uniforms: Vec<Pooled> = kernel
        .pass_uniforms(&launch.header)
        .iter()
        .map(|words| uploads.buffer(dev, words, wgpu::BufferUsages::UNIFORM))
        .collect();
    uploads.record(dev, encoder)?;
    let bind_groups: Vec<wgpu::BindGroup> = uniforms
        .iter()
        .map(|uniform| {
            let mut entries = vec![crate::gpu_io::binding(0, uniform, bytes)];
            entries.extend(storage.iter().cloned());
            // Pooled buffers come back to the next chunk, and so does their bind group.
            dev.pool
                .bind_group(&dev.gpu().device, &kernel.id, &pipeline.layout, &entries)
        })
        .collect();
    let mut pass = crate::gpu_io::begin_pass(encoder, Some(&kernel.id), timestamps);
    pass.set_pipeline(&pipeline.pipeline);
    let [x, y, z] = launch.grid;
    for bind_group in &bind_groups {
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
    }
    drop(pass);
    Ok(uniforms)
}
