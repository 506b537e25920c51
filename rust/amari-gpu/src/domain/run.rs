//! Running a grid: the first split, one attempt per set of healthy devices (a device that
//! fails ends the attempt and the run starts again from the caller's grid without it),
//! rounds on every device in parallel (devices of every kind alike), the host's
//! halo exchange, rebalancing and the final download. Laying bands out and moving them is
//! in `relayout`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::attempt::{Attempt, DeviceBands, Failure, States};
use super::balance::Balancer;
use super::bands;
use super::parallel::places;
use super::record::Recorder;
use super::relayout::moved_rows;
use super::report::{DeviceRoundReport, Layout, Report, RoundReport};
use super::round::{place, DeviceRound, Readback, Round};
use super::rule::Options;
use super::scan::GridScan;
use super::state::Spec;
use crate::calibration::dtypes;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::gpu_io;
use crate::interrupt;
use crate::profile::{CallRecord, HostStep, Kind, Profiler};

/// Where a grid run's board is, and how a run that starts again gets it back.
pub(super) trait Board {
    /// The board's bytes (whole rows of the run's row bytes).
    fn bytes(&mut self) -> &mut [u8];
    /// The board as the run starts, again (after a device failed).
    fn restart(&mut self) -> Result<()>;
}

/// A board built by `initial` from the caller's grid, built again to start again (a restart
/// is rare, so no copy of it is kept). Its words are of `B` (its rows are whole words):
/// 4-byte words a caller takes from the context's spare buffers and hands back, or the
/// cells of a board that is the result itself.
pub(super) struct Built<'a, B> {
    pub(super) board: Vec<B>,
    pub(super) initial: &'a dyn Fn() -> Result<Vec<B>>,
}

impl<B: bytemuck::Pod> Built<'_, B> {
    /// The board `initial` builds.
    pub(super) fn new(initial: &dyn Fn() -> Result<Vec<B>>) -> Result<Built<'_, B>> {
        Ok(Built {
            board: initial()?,
            initial,
        })
    }
}

impl<B: bytemuck::Pod> Board for Built<'_, B> {
    fn bytes(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.board)
    }

    fn restart(&mut self) -> Result<()> {
        self.board = (self.initial)()?;
        Ok(())
    }
}

/// A board that is the caller's result (whatever it holds), whose first layout reads the
/// rows of the caller's grid, `source` (the board's rows as the run starts, exactly): the
/// run only writes the board, each row once it is done with it (every band's owned rows are
/// read back into it, or written there by a host band's last pass), so a restart has
/// nothing to undo. Only for a run of more than no steps.
pub(super) struct Written<'a> {
    pub(super) board: &'a mut [u8],
}

impl Board for Written<'_> {
    fn bytes(&mut self) -> &mut [u8] {
        self.board
    }

    fn restart(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The caller's grid a run's first layout reads its rows from (see [`Written`]), and the
/// scan of its cells that the host passes reading it in place feed, if the grid is checked
/// during the run (`domain::Dest::New`).
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub(super) grid: &'a [u8],
    pub(super) scan: Option<&'a Arc<GridScan>>,
}

/// Runs the grid on the healthy devices, starting again without a device that fails from
/// the board as it started. `source` is where the first layout of each attempt reads the
/// rows from (see [`Written`]), the board itself without it.
pub(super) fn evolve(
    ctx: &MultiGpuContext,
    spec: &Spec,
    (board, source): (&mut dyn Board, Option<Source<'_>>),
    opts: &Options,
) -> Result<Report> {
    if source.is_some() && opts.steps == 0 {
        return Err(Error::Internal(
            "a board laid out from the caller's grid takes more than no steps".into(),
        ));
    }
    let started = Instant::now();
    // Only devices that compute in the grid's dtype take rows (float64: the host device and
    // wgpu devices with SHADER_F64); a context with none refuses before any work.
    let dtype = spec.rule.dtype();
    if let Some(error) = ctx.no_device_runs_dtype(dtype) {
        return Err(error);
    }
    ctx.ensure_calibrated()?;
    let profiler = ctx.active_profile();
    let mut report = Report {
        steps: opts.steps,
        halo: opts.halo,
        left_out: ctx
            .devices()
            .iter()
            .filter_map(|d| d.lacks(dtype).map(|why| (d.id, why)))
            .collect(),
        ..Report::default()
    };
    loop {
        let healthy: Vec<usize> = ctx
            .devices()
            .iter()
            .filter(|d| d.health.is_healthy() && d.runs(dtype))
            .map(|d| d.id)
            .collect();
        if healthy.is_empty() {
            return Err(ctx.no_healthy_device());
        }
        let split = first_split(ctx, spec, &healthy, opts, report.failures.is_empty())?;
        let call = profiler
            .as_ref()
            .map(|p| register_call(ctx, p, spec, &split, opts));
        let recorder = Recorder {
            profiler: profiler.as_deref(),
            call: call.unwrap_or(0),
        };
        report.rounds.clear();
        report.layouts.clear();
        report.download_s = 0.0;
        let bytes = board.bytes();
        match attempt(
            ctx,
            spec,
            (bytes, source),
            split,
            opts,
            &recorder,
            &mut report,
        ) {
            Ok(()) => {
                report.wall_s = started.elapsed().as_secs_f64();
                return Ok(report);
            }
            Err(Failure {
                device: Some(id),
                error: error @ (Error::DeviceLost { .. } | Error::OutOfMemory { .. }),
            }) => {
                let dev = &ctx.devices()[id];
                let reason = error.to_string();
                log::warn!(
                    "device {id} ({}, {}) failed: {reason}; the grid run starts again without it",
                    dev.adapter.name,
                    dev.adapter.backend
                );
                dev.health.mark_failed(&reason);
                dev.pool.clear();
                dev.counters.chunks_failed(1);
                recorder.instant(Some(id), Kind::Retry);
                report.failures.push((id, reason));
                board.restart()?;
            }
            Err(Failure { error, .. }) => return Err(error),
        }
    }
}

/// The first layout's rows per healthy device: the caller's split (first attempt only), or
/// in proportion to the streaming bandwidth calibration measured, scaled by the device's
/// measured rate in the grid's dtype relative to float32 as the cost model scales every
/// plan's (`calibration::dtypes::scaled`: a float64 grid splits by the float64 rates, a
/// float32 one as before); a member of a group of devices sharing hardware counts for its
/// share of the group's measured speedup.
fn first_split(
    ctx: &MultiGpuContext,
    spec: &Spec,
    healthy: &[usize],
    opts: &Options,
    first_attempt: bool,
) -> Result<Vec<(usize, usize)>> {
    let height = spec.geometry.height;
    if let (Some(split), true) = (&opts.split, first_attempt) {
        let lacking = ctx
            .devices()
            .iter()
            .zip(split)
            .find_map(|(d, &rows)| (rows > 0).then(|| d.lacks(spec.rule.dtype())).flatten());
        if let Some(why) = lacking {
            return Err(Error::invalid(
                "split",
                format!("rows given to a device that cannot step this grid: {why}"),
            ));
        }
        return bands::caller_split(split, ctx.devices().len(), healthy, height);
    }
    let groups = ctx.group_speedups();
    let weights: Vec<f64> = healthy
        .iter()
        .map(|&id| {
            let dev = &ctx.devices()[id];
            let bandwidth = ctx.measurements(id).map_or(1.0, |m| {
                dtypes::scaled(
                    m.kernel_copy_bytes_per_s.max(1.0),
                    Some(&m),
                    spec.rule.dtype(),
                )
            });
            let share = groups
                .get(&dev.group)
                .map_or(1.0, |&(speedup, members)| speedup / members.max(1) as f64);
            bandwidth * share
        })
        .collect();
    let rows = bands::split_rows(height, &weights);
    Ok(healthy.iter().copied().zip(rows).collect())
}

fn register_call(
    ctx: &MultiGpuContext,
    profiler: &Profiler,
    spec: &Spec,
    split: &[(usize, usize)],
    opts: &Options,
) -> u64 {
    // The plan's figures from calibration: a step streams at least `bytes_per_cell` per cell
    // at the device's measured kernel bandwidth.
    let bytes_per_row = spec.width as f64 * spec.rule.bytes_per_cell() * opts.steps as f64;
    let bandwidth = |id: usize| {
        ctx.measurements(id)
            .map_or(f64::NAN, |m| m.kernel_copy_bytes_per_s)
    };
    let estimate = split
        .iter()
        .map(|&(id, rows)| rows as f64 * bytes_per_row / bandwidth(id))
        .fold(0.0, f64::max);
    let total_bandwidth: f64 = split.iter().map(|&(id, _)| bandwidth(id)).sum();
    profiler.call(CallRecord {
        kernel: spec.rule.name().to_string(),
        items: (spec.geometry.height * spec.width) as u64 * opts.steps,
        flops_per_item: spec.rule.ops_per_cell(),
        bytes_per_item: spec.rule.bytes_per_cell(),
        lower_bound_s: spec.geometry.height as f64 * bytes_per_row / total_bandwidth,
        estimated_makespan_s: estimate,
        strategy: if opts.rebalance {
            "bands+rebalance"
        } else {
            "bands"
        }
        .to_string(),
    })
}

/// One attempt on a fixed set of devices; a device failure ends it.
fn attempt(
    ctx: &MultiGpuContext,
    spec: &Spec,
    (board, source): (&mut [u8], Option<Source<'_>>),
    mut split: Vec<(usize, usize)>,
    opts: &Options,
    recorder: &Recorder<'_>,
    report: &mut Report,
) -> std::result::Result<(), Failure> {
    if opts.steps == 0 {
        return Ok(());
    }
    let devices = ctx.devices();
    let at = Attempt {
        ctx,
        spec,
        kernel: spec.rule.kernel(),
        timeout: ctx.options().sync_timeout_ms.map(Duration::from_millis),
        scan: source.and_then(|s| s.scan).cloned(),
    };
    let source = source.map(|s| s.grid);
    let g = spec.geometry;
    let mut current = 0;
    let t = Instant::now();
    let layout = at.bands_of(&split)?;
    // Laid out from the caller's grid (unchanged during the run), a host band's rows stay
    // there for its first pass to read (`Attempt::build`'s `lend`).
    let mut states = at.build(
        layout,
        source.unwrap_or(board),
        current,
        (None, source.is_some()),
    )?;
    report
        .layouts
        .push(layout_record(0, &split, &states, t.elapsed()));
    let mut balancer = Balancer::default();
    // Until a device's round has been measured only a forced setting can say to time it
    // with GPU timestamps; after, the measured round time decides.
    let forced = recorder.profiler.is_some() && ctx.options().gpu_timestamps == Some(true);
    let mut stamped: BTreeMap<usize, bool> = split
        .iter()
        .map(|&(id, _)| {
            let supported = ctx.devices()[id].timestamp_period_ns.is_some();
            (id, forced && supported)
        })
        .collect();
    // Seconds per row that changes device (down to the host and up again, plus its share of
    // the layout's fixed costs): from calibration until a relayout has been measured.
    let row_bytes = spec.row_bytes as f64;
    let calibrated = split
        .iter()
        .filter_map(|&(id, _)| ctx.measurements(id))
        .map(|m| row_bytes / m.d2h_bytes_per_s + row_bytes / m.h2d_bytes_per_s)
        .fold(0.0, f64::max);
    let latency = split
        .iter()
        .filter_map(|&(id, _)| ctx.measurements(id))
        .map(|m| m.launch_latency_s)
        .fold(0.0, f64::max);
    let mut per_row_s = calibrated;
    let (mut done, mut round_index, mut fresh) = (0u64, 0u64, true);
    let mut downloaded = false;
    while done < opts.steps {
        // Between rounds: a cancelled call stops here (nothing is in flight).
        interrupt::check().map_err(|error| Failure {
            device: None,
            error,
        })?;
        let steps = (opts.steps - done).min(g.halo as u64) as usize;
        let last = done + steps as u64 == opts.steps;
        // The last round of bands just laid out uploads nothing from the board, so it
        // reads their owned rows back straight into it (a host band's last pass writes
        // them there): the download is that round's read-back.
        downloaded = last && fresh;
        let readback = if downloaded {
            Readback::Owned
        } else if last {
            Readback::Nothing
        } else {
            Readback::Borders
        };
        let round_start = Instant::now();
        // The first round's uploads (of bands the layout left on the caller's grid) come
        // from that grid; later rounds' ghost rows from the board.
        let lent = source.filter(|_| round_index == 0);
        let (into, uploads_from): (_, &[u8]) = match (downloaded, lent) {
            (true, lent) => (
                places(spec, &states, board, &readback)?,
                lent.unwrap_or(&[]),
            ),
            (false, Some(grid)) => (BTreeMap::new(), grid),
            (false, None) => (BTreeMap::new(), board),
        };
        let round = Round {
            board: uploads_from,
            current,
            steps,
            fresh,
            readback: &readback,
            timeout: at.timeout,
            interrupt: interrupt::current(),
        };
        let outcomes = at.run_round(&mut states, &round, &stamped, into);
        let mut rounds = Vec::with_capacity(outcomes.len());
        let mut failure = None;
        for (id, outcome) in outcomes {
            match outcome {
                Ok(r) => rounds.push(r),
                Err(error) => {
                    failure.get_or_insert(Failure {
                        device: Some(id),
                        error,
                    });
                }
            }
        }
        if let Some(failure) = failure {
            if let Some(failed) = failure.device.and_then(|id| states.remove(&id)) {
                failed.discard();
            }
            return Err(failure);
        }
        let assemble_start = Instant::now();
        for r in &rounds {
            place(board, spec, r);
        }
        let assembled = Instant::now();
        if downloaded {
            // The download's span: from the first device done stepping to the last rows in.
            let from = rounds.iter().map(|r| r.finished).min();
            let to = rounds.iter().map(|r| r.read).max();
            if let (Some(from), Some(to)) = (from, to) {
                report.download_s = (to - from).as_secs_f64();
                let download = HostStep {
                    bytes: board.len() as u64,
                    ..recorder.step(None, Kind::Readback, None)
                };
                recorder.host(download, from, to);
            }
        }
        let exchange = HostStep {
            bytes: rounds.iter().map(|r| r.bytes_down).sum(),
            ..recorder.step(None, Kind::Exchange, Some(round_index))
        };
        recorder.host(exchange, assemble_start, assembled);
        let mut devices_report = Vec::with_capacity(rounds.len());
        // The round as the balancer judges it: measured, unless a test injected rates.
        let mut judged_round_s = 0.0f64;
        for r in &rounds {
            let dev = &devices[r.device];
            let busy = (r.read - r.started).as_secs_f64();
            dev.counters.chunk_done(r.work, r.bytes_up, r.bytes_down);
            dev.counters.add_busy(busy);
            let measured = ctx.measurements(r.device);
            let (judged, overhead) = match dev.health.grid_rate() {
                Some(rate) => (r.work as f64 / rate, 0.0),
                None => (busy, measured.as_ref().map_or(0.0, |m| m.launch_latency_s)),
            };
            judged_round_s = judged_round_s.max(judged);
            balancer.observe(r.device, r.work, judged, overhead);
            recorder.round(dev, round_index, r);
            devices_report.push(device_report(r, &states[&r.device]));
            // Profiled rounds are timed with GPU timestamps where one is worth it against
            // the device's last round (or wherever available when forced).
            let timed = gpu_io::timestamps_worth(
                dev.timestamp_period_ns.is_some(),
                ctx.options().gpu_timestamps,
                measured.map(|m| m.timestamp_cost_s),
                busy,
            );
            stamped.insert(r.device, recorder.profiler.is_some() && timed);
        }
        let wall = (assembled - round_start).as_secs_f64();
        report.rounds.push(RoundReport {
            steps,
            wall_s: wall,
            assemble_s: (assembled - assemble_start).as_secs_f64(),
            devices: devices_report,
        });
        balancer.round_done();
        current = (current + steps) % 2;
        done += steps as u64;
        interrupt::progress(done, opts.steps);
        round_index += 1;
        fresh = false;
        if last || !opts.rebalance {
            continue;
        }
        let remaining = (opts.steps - done).div_ceil(g.halo as u64) as usize;
        let cost = |to: &[(usize, usize)]| {
            2.0 * latency + moved_rows(&split, to, g.halo) as f64 * per_row_s.max(calibrated)
        };
        let round_s = wall.max(judged_round_s);
        let Some(proposal) = balancer.propose(&split, round_s, remaining, &cost) else {
            continue;
        };
        let t = Instant::now();
        let moved = moved_rows(&split, &proposal.split, g.halo);
        states = at.relayout(states, &proposal.split, board, current)?;
        split = proposal.split;
        fresh = true;
        let took = t.elapsed();
        recorder.host(
            recorder.step(None, Kind::Plan, Some(round_index)),
            t,
            Instant::now(),
        );
        per_row_s = took.as_secs_f64() / moved.max(1) as f64;
        report
            .layouts
            .push(layout_record(done, &split, &states, took));
        balancer.relaid();
    }
    if downloaded {
        return Ok(());
    }
    let t = Instant::now();
    at.fetch(&mut states, board, current, &Readback::Owned)?;
    report.download_s = t.elapsed().as_secs_f64();
    let download = HostStep {
        bytes: board.len() as u64,
        ..recorder.step(None, Kind::Readback, None)
    };
    recorder.host(download, t, Instant::now());
    Ok(())
}

/// What the report says of a device's round on its bands `bands`.
fn device_report(r: &DeviceRound, bands: &DeviceBands<'_>) -> DeviceRoundReport {
    DeviceRoundReport {
        device: r.device,
        rows: bands.rows(),
        bands: bands.bands.len(),
        work: r.work,
        upload_s: (r.submitted - r.started).as_secs_f64(),
        compute_s: (r.finished - r.submitted).as_secs_f64(),
        readback_s: (r.read - r.finished).as_secs_f64(),
    }
}

fn layout_record(
    at_step: u64,
    split: &[(usize, usize)],
    states: &States<'_>,
    took: Duration,
) -> Layout {
    Layout {
        at_step,
        split: split.to_vec(),
        bands: states.values().map(|on| on.bands.len()).sum(),
        seconds: took.as_secs_f64(),
    }
}
