//! Running a row kernel (any [`Kernel`] with a per-item output) on resident operands: for
//! each shard of the first resident operand, the kernel runs on the device holding those
//! rows and writes a new shard there. Host operands are uploaded to match; resident ones
//! sharded differently are brought over by [`MultiGpuContext::assemble`]. A device that
//! fails (or whose injected fault is due) is marked failed and the call starts again on the
//! others, lost rows rebuilt from their lineage: kernels are per row, so the result is the
//! same whichever device ran which rows.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ledger::Entry;
use super::lineage::{Lineage, Origin};
use super::place::{record, Recording};
use super::shard::{self, Shard, Storage};
use super::{ResidentArray, Snapshot};
use crate::context::MultiGpuContext;
use crate::device::{DeviceKind, GpuDevice};
use crate::error::{Error, Result};
use crate::gpu_io::{self, Limit, Scopes};
use crate::kernel::{Input, Kernel, Output};
use crate::profile::Kind;
use crate::worker::ready_for_chunk;

/// One operand of a resident call.
#[derive(Clone, Copy)]
pub enum Operand<'a> {
    /// A resident array of this context.
    Resident(&'a ResidentArray),
    /// Host words: per-item rows (uploaded to match the sharding) or an input bound whole
    /// (uploaded once to each device).
    Host(&'a [f32]),
}

/// Rows a single dispatch covers at most, so every binding of a piece fits the device's
/// binding limit; a multiple of 256 rows keeps every piece's byte offset aligned.
fn piece_rows(dev: &GpuDevice, kernel: &Kernel) -> usize {
    let per_row = kernel.widest_binding_bytes_per_item().max(1);
    let rows = (dev.max_binding_bytes() / per_row) as usize;
    (rows - rows % 256).max(256)
}

/// A binding of `bytes` bytes of `buffer` from byte `offset`.
fn entry(index: u32, buffer: &wgpu::Buffer, offset: u64, bytes: u64) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding: index,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset,
            size: wgpu::BufferSize::new(bytes.max(4)),
        }),
    }
}

/// Encodes and submits `kernel` over the `items` rows of one shard on wgpu device `dev`:
/// `inputs[i]` is the shard's rows of input i (or the whole input), `out` the new shard.
fn submit(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[Arc<Storage>],
    out: &Storage,
    items: usize,
) -> Result<wgpu::SubmissionIndex> {
    let gpu = dev.gpu();
    let pipeline = dev.pipeline(kernel)?;
    let scopes = Scopes::open(dev);
    let mut encoder = gpu
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(&kernel.id),
        });
    let step = piece_rows(dev, kernel);
    let mut uniforms = Vec::new();
    let mut start = 0;
    while start < items {
        let n = step.min(items - start);
        let (grid, row_threads) = gpu_io::grid(dev, kernel, n, "rows")?;
        let header = kernel.uniform(n as u32, row_threads);
        let uniform = dev.pool.take(
            &gpu.device,
            (header.len() * 4) as u64,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        );
        gpu.queue
            .write_buffer(&uniform, 0, bytemuck::cast_slice(&header));
        let buffer = |s: &Storage| match s {
            Storage::Wgpu(b) => Ok(wgpu::Buffer::clone(b)),
            Storage::Host(_) => Err(Error::Internal(
                "a host shard bound on a wgpu device".into(),
            )),
        };
        let mut entries = vec![entry(0, &uniform, 0, (header.len() * 4) as u64)];
        let mut bound = Vec::with_capacity(inputs.len() + 1);
        for storage in inputs {
            bound.push(buffer(storage)?);
        }
        bound.push(buffer(out)?);
        let widths = kernel
            .inputs
            .iter()
            .map(|i| match *i {
                Input::PerItem(w) => (w, true),
                Input::Whole(w) => (w, false),
            })
            .chain(std::iter::once((kernel.output_words_per_item(), true)));
        for (i, ((w, per_item), b)) in widths.zip(&bound).enumerate() {
            let (offset, bytes) = if per_item {
                ((start * w * 4) as u64, (n * w * 4) as u64)
            } else {
                (0, (w * 4) as u64)
            };
            entries.push(entry(i as u32 + 1, b, offset, bytes));
        }
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&kernel.id),
            layout: &pipeline.layout,
            entries: &entries,
        });
        gpu_io::dispatch(
            &mut encoder,
            Some(&kernel.id),
            &pipeline,
            &bind_group,
            grid,
            None,
        );
        uniforms.push(uniform);
        start += n;
    }
    let submission = gpu.queue.submit(Some(encoder.finish()));
    scopes.close(dev.id)?;
    Ok(submission)
}

/// Runs `kernel` over the `items` rows of one shard on the host device.
fn run_host(
    dev: &GpuDevice,
    kernel: &Kernel,
    inputs: &[Arc<Storage>],
    items: usize,
) -> Result<Storage> {
    let DeviceKind::Host(host) = &dev.kind else {
        return Err(Error::Internal("run_host on a wgpu device".into()));
    };
    let Some(implementation) = kernel.host.as_ref() else {
        return Err(Error::Internal(format!(
            "kernel {} has no host implementation",
            kernel.id
        )));
    };
    let prepared = host.prepare(implementation.as_ref());
    let mut slices = Vec::with_capacity(inputs.len());
    for storage in inputs {
        match storage.as_ref() {
            Storage::Host(words) => slices.push(words.as_slice()),
            Storage::Wgpu(_) => {
                return Err(Error::Internal("a wgpu shard on the host device".into()))
            }
        }
    }
    let mut out = crate::alloc::zeroed("resident output", items * kernel.output_words_per_item())?;
    host.run(dev.id, prepared.as_ref(), &slices, 0..items, &mut out)?;
    Ok(Storage::Host(out))
}

/// A shard dispatched in this attempt, waiting for its device.
struct Dispatched {
    device: usize,
    rows: Range<usize>,
    out: Storage,
    submission: Option<wgpu::SubmissionIndex>,
    started: Instant,
}

impl MultiGpuContext {
    /// Runs `kernel` (per-item output) on `operands`, named for errors: one per kernel input,
    /// at least one of them resident. The result has the first resident operand's sharding
    /// (rows of a failed device, or of one that cannot run the kernel, go to another) and
    /// stays on the devices.
    pub fn run_resident(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
    ) -> Result<ResidentArray> {
        let (rows, reference) = self.check_operands(kernel, operands)?;
        let origins = operands
            .iter()
            .map(|(name, op)| match op {
                Operand::Resident(a) => Ok(Origin::Rows(a.snapshot(&self.resident, name)?.lineage)),
                Operand::Host(words) => Ok(Origin::Host(Arc::new(words.to_vec()))),
            })
            .collect::<Result<Vec<_>>>()?;
        let recording = self.resident_call(&format!("{}/{}", kernel.family, kernel.id), rows);
        let mut attempts = 0;
        let shards = loop {
            attempts += 1;
            match self.attempt(kernel, operands, reference, &recording) {
                Ok(shards) => break shards,
                Err((Some(device), error)) if attempts <= self.devices.len() => {
                    log::warn!("device {device} failed a resident call: {error}; rebuilding its rows elsewhere");
                    self.devices[device].health.mark_failed(&error.to_string());
                }
                Err((_, error)) => return Err(error),
            }
        };
        let cols = kernel.output_words_per_item();
        let id = self.resident.insert(Entry {
            cols,
            shards,
            lineage: Arc::new(Lineage::Op {
                kernel: kernel.clone(),
                inputs: origins,
            }),
        });
        Ok(ResidentArray {
            id,
            rows,
            cols,
            ledger: Arc::clone(&self.resident),
        })
    }

    /// Checks operand count, kinds and shapes before any work; returns the rows and the
    /// index of the first resident operand.
    fn check_operands(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
    ) -> Result<(usize, usize)> {
        if !matches!(kernel.output, Output::PerItem(_)) {
            return Err(Error::invalid(
                "kernel",
                format!("{} writes per chunk, not per row", kernel.id),
            ));
        }
        if operands.len() != kernel.inputs.len() {
            return Err(Error::invalid(
                "operands",
                format!(
                    "expected {} operands, got {}",
                    kernel.inputs.len(),
                    operands.len()
                ),
            ));
        }
        let mut rows: Option<(usize, &str)> = None;
        let mut reference = None;
        for (i, ((name, op), spec)) in operands.iter().zip(&kernel.inputs).enumerate() {
            let (have, width) = match (op, *spec) {
                (Operand::Resident(a), Input::PerItem(w)) => {
                    a.snapshot(&self.resident, name)?;
                    reference.get_or_insert(i);
                    ((a.rows, a.cols), w)
                }
                (Operand::Resident(_), Input::Whole(_)) => return Err(Error::invalid(
                    *name,
                    "expected a host array for an operand applied to every row, got a DeviceArray",
                )),
                (Operand::Host(words), Input::PerItem(w)) => {
                    if words.len() % w != 0 {
                        return Err(Error::Shape {
                            argument: name.to_string(),
                            expected: format!("(N, {w})"),
                            actual: format!("{} floats", words.len()),
                        });
                    }
                    ((words.len() / w, w), w)
                }
                (Operand::Host(words), Input::Whole(w)) => {
                    if words.len() != w {
                        return Err(Error::Shape {
                            argument: name.to_string(),
                            expected: format!("({w},)"),
                            actual: format!("{} floats", words.len()),
                        });
                    }
                    continue;
                }
            };
            if have.1 != width {
                return Err(Error::Shape {
                    argument: name.to_string(),
                    expected: format!("(N, {width})"),
                    actual: format!("({}, {})", have.0, have.1),
                });
            }
            match rows {
                None => rows = Some((have.0, name)),
                Some((n, first)) if n != have.0 => {
                    return Err(Error::Shape {
                        argument: name.to_string(),
                        expected: format!("({n}, {width}) like {first}"),
                        actual: format!("({}, {width})", have.0),
                    })
                }
                Some(_) => {}
            }
        }
        match (rows, reference) {
            (Some((n, _)), Some(r)) => Ok((n, r)),
            _ => Err(Error::invalid(
                "operands",
                "expected at least one DeviceArray batch operand, got none",
            )),
        }
    }

    /// One attempt at a resident call: every shard dispatched, then every device waited
    /// for. On failure, the device to blame (if a device failed) and the error.
    fn attempt(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
        reference: usize,
        recording: &Recording,
    ) -> std::result::Result<Vec<Shard>, (Option<usize>, Error)> {
        let plain = |e: Error| (None, e);
        let snapshots: Vec<Option<Snapshot>> = operands
            .iter()
            .map(|(name, op)| match op {
                Operand::Resident(a) => a.snapshot(&self.resident, name).map(Some),
                Operand::Host(_) => Ok(None),
            })
            .collect::<Result<_>>()
            .map_err(plain)?;
        let layout = snapshots[reference]
            .as_ref()
            .map(|s| s.shards.clone())
            .unwrap_or_default();
        let out_cols = kernel.output_words_per_item();
        let mut whole: HashMap<(usize, usize), Arc<Storage>> = HashMap::new();
        let mut dispatched = Vec::with_capacity(layout.len());
        for (device, rows, _) in &layout {
            let own = &self.devices[*device];
            let dev = if own.health.is_healthy() && own.can_run(kernel) {
                own.as_ref()
            } else {
                self.substitute(kernel).map_err(plain)?
            };
            let blame = |e: Error| match e {
                Error::DeviceLost { device, .. } => (Some(device), e),
                other => (None, other),
            };
            let mut inputs = Vec::with_capacity(operands.len());
            for (i, ((_, op), spec)) in operands.iter().zip(&kernel.inputs).enumerate() {
                let storage = match (op, snapshots[i].as_ref(), *spec) {
                    (_, Some(snapshot), Input::PerItem(w)) => {
                        self.assemble(dev, snapshot, rows, w, recording)
                            .map_err(blame)?
                            .0
                    }
                    (Operand::Host(words), _, Input::PerItem(w)) => {
                        let started = Instant::now();
                        let part = &words[rows.start * w..rows.end * w];
                        let stored = shard::put(dev, part).map_err(blame)?;
                        if let Some((p, call)) = recording {
                            record(
                                p,
                                *call,
                                dev.id,
                                Kind::Upload,
                                started,
                                part.len() * 4,
                                rows.len(),
                            );
                        }
                        Arc::new(stored)
                    }
                    (Operand::Host(words), _, Input::Whole(_)) => match whole.get(&(i, dev.id)) {
                        Some(s) => Arc::clone(s),
                        None => {
                            let started = Instant::now();
                            let stored = Arc::new(shard::put(dev, words).map_err(blame)?);
                            if let Some((p, call)) = recording {
                                record(p, *call, dev.id, Kind::Upload, started, words.len() * 4, 1);
                            }
                            whole.insert((i, dev.id), Arc::clone(&stored));
                            stored
                        }
                    },
                    (Operand::Resident(_), _, _) => {
                        return Err(plain(Error::Internal(
                            "resident operand without snapshot".into(),
                        )))
                    }
                };
                inputs.push(storage);
            }
            ready_for_chunk(dev, true).map_err(blame)?;
            let started = Instant::now();
            let words = rows.len() * out_cols;
            shard::check_room(dev, (words * 4) as u64, self.resident.held_bytes(dev.id))
                .map_err(plain)?;
            let (out, submission) = if dev.as_host().is_some() {
                (
                    run_host(dev, kernel, &inputs, rows.len()).map_err(blame)?,
                    None,
                )
            } else {
                let out = shard::allocate(dev, words).map_err(blame)?;
                let submission = submit(dev, kernel, &inputs, &out, rows.len()).map_err(blame)?;
                (out, Some(submission))
            };
            dispatched.push(Dispatched {
                device: dev.id,
                rows: rows.clone(),
                out,
                submission,
                started,
            });
        }
        let timeout = self.options.sync_timeout_ms.map(Duration::from_millis);
        let mut shards = Vec::with_capacity(dispatched.len());
        for d in dispatched {
            let dev = &self.devices[d.device];
            if let Some(submission) = d.submission {
                gpu_io::wait(dev, Some(submission), Limit::Sync(timeout))
                    .map_err(|e| (Some(dev.id), e))?;
                gpu_io::check_alive(dev).map_err(|e| (Some(dev.id), e))?;
            }
            dev.counters.chunk_done(d.rows.len() as u64, 0, 0);
            dev.health.chunk_completed();
            if let Some((p, call)) = recording {
                record(p, *call, dev.id, Kind::Kernel, d.started, 0, d.rows.len());
            }
            shards.push(Shard {
                device: d.device,
                rows: d.rows,
                storage: Arc::new(d.out),
            });
        }
        Ok(shards)
    }
}
