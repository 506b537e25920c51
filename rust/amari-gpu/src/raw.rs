//! A kernel run on one device with plain wgpu calls — no planner, no chunking, no pool, no
//! worker threads: the baseline that benchmarks compare the engine against, and the kernel
//! on resident data that calibration and benchmarks time dispatch by dispatch.

use std::sync::Arc;
use std::time::Duration;

use crate::device::{Compiled, GpuDevice};
use crate::error::Result;
use crate::gpu_io::{self, Limit};
use crate::kernel::Kernel;

/// How long a raw run may take before the device counts as lost.
#[cfg(feature = "bench-support")]
const RAW_LIMIT: Duration = Duration::from_secs(600);
/// The same for a resident dispatch, which is sized to take milliseconds.
const DISPATCH_LIMIT: Duration = Duration::from_secs(60);

fn storage(dev: &GpuDevice, words: usize, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    gpu_io::buffer(dev, "amari-gpu raw", (words.max(1) * 4) as u64, usage)
}

/// The uniform of `kernel` over `items` items, written to a new buffer, and the grid: one
/// dispatch, so a kernel that would take several passes over `items` items is refused.
fn uniform(dev: &GpuDevice, kernel: &Kernel, items: usize) -> Result<(wgpu::Buffer, [u32; 3])> {
    let (grid, row_threads) = gpu_io::grid(dev, kernel, items, "items")?;
    let header = kernel.uniform(items as u32, row_threads);
    if kernel.pass_count(items as u32) > 1 {
        return Err(crate::error::Error::invalid(
            "items",
            format!(
                "kernel {} takes {} passes over this problem; a raw run is one dispatch",
                kernel.id,
                kernel.pass_count(items as u32)
            ),
        ));
    }
    let uniform = storage(
        dev,
        header.len(),
        wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
    );
    dev.gpu()
        .queue
        .write_buffer(&uniform, 0, bytemuck::cast_slice(&header));
    Ok((uniform, grid))
}

/// Uploads `inputs`, dispatches `kernel` once over all `items`, reads the output back.
/// Returns the output and the wall-clock seconds from first upload to readback. Only the
/// benches use it (calibration times `Resident` dispatches).
#[cfg(feature = "bench-support")]
pub fn run_once(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[&[f32]],
    items: usize,
) -> Result<(Vec<f32>, f64)> {
    let pipeline = dev.pipeline(kernel)?;
    let start = std::time::Instant::now();
    let (uniform, grid) = uniform(dev, kernel, items)?;
    let mut buffers = vec![uniform];
    for data in inputs {
        let buffer = storage(
            dev,
            data.len(),
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        dev.gpu()
            .queue
            .write_buffer(&buffer, 0, bytemuck::cast_slice(data));
        buffers.push(buffer);
    }
    let words = kernel.output_words(items);
    let (output, staging) =
        gpu_io::readback_buffers(dev, "amari-gpu raw", (words.max(1) * 4) as u64);
    buffers.push(output);
    let bind_group = gpu_io::bind_whole(dev, "amari-gpu raw", &pipeline.layout, &buffers);
    let mut encoder = dev
        .gpu()
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    gpu_io::dispatch(&mut encoder, None, &pipeline, &bind_group, grid, None);
    let output = &buffers[buffers.len() - 1];
    encoder.copy_buffer_to_buffer(output, 0, &staging, 0, output.size());
    let submission = dev.gpu().submit(Some(encoder.finish()));
    let mapped = gpu_io::map_for_reading(&staging, staging.size());
    gpu_io::wait_mapped(dev, submission, &mapped, Limit::Fixed(RAW_LIMIT))?;
    let result = {
        let view = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| gpu_io::lost(dev.id, format!("readback mapping failed: {e}")))?;
        let all: &[f32] = bytemuck::cast_slice(&view);
        all[..words].to_vec()
    };
    staging.unmap();
    Ok((result, start.elapsed().as_secs_f64()))
}

/// A kernel's buffers and bind group, filled once, so that timing sees only the dispatch.
pub struct Resident {
    bind_group: wgpu::BindGroup,
    pipeline: Arc<Compiled>,
    grid: [u32; 3],
    _buffers: Vec<wgpu::Buffer>,
}

impl Resident {
    /// `kernel`'s buffers for `items` items on `dev`, inputs filled with ones (rather than
    /// zeros, so that no driver can shortcut the arithmetic).
    pub fn new(
        dev: &GpuDevice,
        kernel: &Kernel,
        pipeline: &Arc<Compiled>,
        items: usize,
    ) -> Result<Self> {
        let (uniform, grid) = uniform(dev, kernel, items)?;
        let mut buffers = vec![uniform];
        let sizes = (0..kernel.inputs.len())
            .map(|i| kernel.input_len(i, items))
            .chain(std::iter::once(kernel.output_words(items)));
        for words in sizes {
            let storage = storage(
                dev,
                words,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            );
            dev.gpu().queue.write_buffer(
                &storage,
                0,
                bytemuck::cast_slice(&vec![1.0f32; words.max(1)]),
            );
            buffers.push(storage);
        }
        let bind_group = gpu_io::bind_whole(dev, "amari-gpu resident", &pipeline.layout, &buffers);
        Ok(Resident {
            bind_group,
            pipeline: Arc::clone(pipeline),
            grid,
            _buffers: buffers,
        })
    }

    /// An encoder holding the kernel's one dispatch, its pass's begin and end written to
    /// `timestamps` when given.
    fn encode(&self, dev: &GpuDevice, timestamps: Option<&wgpu::QuerySet>) -> wgpu::CommandEncoder {
        let mut encoder = dev
            .gpu()
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        gpu_io::dispatch(
            &mut encoder,
            None,
            &self.pipeline,
            &self.bind_group,
            self.grid,
            timestamps,
        );
        encoder
    }

    /// Dispatches the kernel once and waits until the device has run it.
    pub fn run(&self, dev: &GpuDevice) -> Result<()> {
        let encoder = self.encode(dev, None);
        let submission = dev.gpu().submit(Some(encoder.finish()));
        gpu_io::wait(dev, Some(submission), Limit::Fixed(DISPATCH_LIMIT))
    }

    /// Dispatches the kernel once, waits until the device has run it, and returns its
    /// seconds on the clock that times the engine's profiled kernels on `dev`: the pass's
    /// GPU timestamps where the device records them, else the host clock around submission
    /// and wait (`Clock::Host`). The roofline's limits are timed so, so that a kernel's
    /// achieved rate and its device's limit are read off the same clock.
    pub fn run_timed(&self, dev: &GpuDevice) -> Result<(f64, Clock)> {
        let Some(period_ns) = dev.timestamp_period_ns else {
            let start = std::time::Instant::now();
            self.run(dev)?;
            return Ok((start.elapsed().as_secs_f64(), Clock::Host));
        };
        let mut staging = gpu_io::Staging::new(dev, 0, true);
        let mut encoder = self.encode(dev, staging.queries());
        staging.resolve_timestamps(dev, &mut encoder);
        let submission = dev.gpu().submit(Some(encoder.finish()));
        staging.map();
        if let Err(e) = staging.wait(dev, submission, Some(DISPATCH_LIMIT)) {
            staging.discard();
            return Err(e);
        }
        let ((), ticks) = staging.read(dev, |_| ())?;
        let (begin, end) = ticks.ok_or_else(|| gpu_io::lost(dev.id, "timestamps not written"))?;
        Ok((
            end.saturating_sub(begin) as f64 * period_ns * 1e-9,
            Clock::Gpu,
        ))
    }
}

/// The clock a [`Resident::run_timed`] dispatch was timed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The device's GPU timestamps around the compute pass.
    Gpu,
    /// The host clock around submission and the wait for the device.
    Host,
}

impl Clock {
    /// How the profile's events name it ("gpu"; "host+wait": a wgpu kernel the host clock
    /// times is its submission and the wait for it).
    pub fn name(self) -> &'static str {
        match self {
            Clock::Gpu => "gpu",
            Clock::Host => "host+wait",
        }
    }
}

/// The steps of one tiny chunk on a wgpu device, each timed on its own (seconds): what
/// `benches/wgpucall.rs` prints to show where a small call's time goes on a device and which
/// of it is the driver's (submit, wait, map) rather than ours.
#[cfg(feature = "bench-support")]
pub const CHUNK_STEPS: [&str; 13] = [
    "error scopes (push + pop)",
    "create + drop buffers (unpooled)",
    "pool take",
    "write_buffer per binding",
    "write_buffer packed once",
    "encoder + uploads staged (pool)",
    "bind group (pool)",
    "encode (pass + copy + finish)",
    "submit inline",
    "submit (gpu_io::submit_handed)",
    "map + poll (Wait) until mapped",
    "copy out + unmap",
    "map + poll (Poll) spinning, instead",
];

/// One round of [`CHUNK_STEPS`] over `items` items of `kernel` (a single-pass kernel of
/// per-item inputs), the seconds of each; the steps a round does not take are 0: `inline`
/// picks which of the two submits runs the chunk and `spin` whether the wait for its
/// mapping blocks in the driver (as the engine's does) or polls without blocking until the
/// mapping is there (for comparison: what of the wait is the thread's wake-up). Results are
/// read back, so every step does its real work.
#[cfg(feature = "bench-support")]
pub fn chunk_steps(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[&[f32]],
    items: usize,
    inline: bool,
    spin: bool,
) -> Result<[f64; 13]> {
    use std::time::Instant;
    let mut t = [0.0; 13];
    let mut clock = Instant::now();
    let mut lap = |step: usize| {
        let now = Instant::now();
        t[step] += (now - clock).as_secs_f64();
        clock = now;
    };
    let pipeline = dev.pipeline(kernel)?;
    let gpu = dev.gpu();
    let (grid, row_threads) = gpu_io::grid(dev, kernel, items, "items")?;
    let header = kernel.uniform(items as u32, row_threads);
    let out_bytes = (kernel.output_words(items).max(1) * 4) as u64;
    let storage_in = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
    let uniform_usage = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
    let out_usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
    let staging_usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
    let mut sizes = vec![((header.len() * 4) as u64, uniform_usage)];
    sizes.extend(
        inputs
            .iter()
            .map(|d| ((d.len().max(1) * 4) as u64, storage_in)),
    );
    sizes.extend([(out_bytes, out_usage), (out_bytes, staging_usage)]);
    lap(0);
    gpu_io::Scopes::open(dev).close(dev.id)?;
    lap(0);
    let fresh: Vec<wgpu::Buffer> = sizes
        .iter()
        .map(|&(bytes, usage)| gpu_io::buffer(dev, "amari-gpu steps", bytes, usage))
        .collect();
    drop(fresh);
    lap(1);
    let pooled: Vec<crate::pool::Pooled> = sizes
        .iter()
        .map(|&(bytes, usage)| dev.pool.take(&gpu.device, bytes, usage))
        .collect();
    lap(2);
    gpu.queue
        .write_buffer(&pooled[0], 0, bytemuck::cast_slice(&header));
    for (data, buffer) in inputs.iter().zip(&pooled[1..]) {
        gpu.queue
            .write_buffer(buffer, 0, bytemuck::cast_slice(data));
    }
    lap(3);
    let packed: Vec<f32> = inputs.iter().flat_map(|d| d.iter().copied()).collect();
    gpu.queue.write_buffer(
        &pooled[1],
        0,
        bytemuck::cast_slice(&packed[..inputs[0].len()]),
    );
    lap(4);
    // What the engine does instead of the writes above: every upload through one pooled
    // mapped staging buffer, copied in the chunk's encoder.
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    let mut uploads = gpu_io::Uploads::default();
    uploads.write(&pooled[0], &header);
    for (data, buffer) in inputs.iter().zip(&pooled[1..]) {
        uploads.write(buffer, data);
    }
    uploads.record(dev, &mut encoder)?;
    lap(5);
    let n = pooled.len();
    let entries: Vec<wgpu::BindGroupEntry<'_>> = pooled[..n - 1]
        .iter()
        .zip(&sizes)
        .enumerate()
        .map(|(i, (b, &(bytes, _)))| gpu_io::binding(i as u32, b, bytes))
        .collect();
    let bind_group =
        dev.pool
            .bind_group(&gpu.device, "amari-gpu steps", &pipeline.layout, &entries);
    lap(6);
    gpu_io::dispatch(&mut encoder, None, &pipeline, &bind_group, grid, None);
    encoder.copy_buffer_to_buffer(&pooled[n - 2], 0, &pooled[n - 1], 0, out_bytes);
    let commands = encoder.finish();
    lap(7);
    let submission = if inline {
        let s = gpu.submit(Some(commands));
        lap(8);
        s
    } else {
        let handed = gpu_io::submit_handed(dev, commands)?;
        let s = handed.submitted(dev, Limit::Fixed(RAW_LIMIT), None)?;
        lap(9);
        s
    };
    let mapped = gpu_io::map_for_reading(&pooled[n - 1], out_bytes);
    if spin {
        let deadline = Instant::now() + RAW_LIMIT;
        loop {
            match mapped.try_recv() {
                Ok(Ok(())) => break,
                Ok(Err(e)) => return Err(gpu_io::lost(dev.id, format!("readback failed: {e}"))),
                Err(std::sync::mpsc::TryRecvError::Empty) if Instant::now() < deadline => {}
                Err(_) => return Err(gpu_io::lost(dev.id, "readback never completed")),
            }
            gpu.poll(wgpu::PollType::Poll)
                .map_err(|e| gpu_io::lost(dev.id, e.to_string()))?;
        }
        lap(12);
    } else {
        gpu_io::wait_mapped(dev, submission, &mapped, Limit::Fixed(RAW_LIMIT))?;
        lap(10);
    }
    let mut out = vec![0.0f32; kernel.output_words(items)];
    {
        let view = pooled[n - 1]
            .slice(..out_bytes)
            .get_mapped_range()
            .map_err(|e| gpu_io::lost(dev.id, format!("readback mapping failed: {e}")))?;
        let words = out.len();
        out.copy_from_slice(&bytemuck::cast_slice(&view)[..words]);
    }
    pooled[n - 1].unmap();
    lap(11);
    drop(pooled);
    Ok(t)
}

/// One chunk of `items` items through the engine's own wgpu chunk path (upload, dispatch,
/// readback into `out`), as a worker runs it, without planning or a worker thread. Returns
/// whether its submit ran on the calling thread (see `gpu_io::submit_handed`).
#[cfg(feature = "bench-support")]
pub fn engine_chunk(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[&[f32]],
    items: usize,
    out: &mut [f32],
) -> Result<bool> {
    use crate::runner::executor;
    let pipeline = dev.pipeline(kernel)?;
    let mut resident = executor::Resident::new();
    let chunk = executor::submit(
        dev,
        kernel,
        &pipeline,
        inputs,
        0..items,
        &mut resident,
        false,
    )?;
    let inline = chunk.inline();
    executor::finish(dev, chunk, out, None, None)?;
    Ok(inline)
}
