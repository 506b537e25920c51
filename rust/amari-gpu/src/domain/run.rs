//! Running a grid: the first split, one attempt per set of healthy devices (a device that
//! fails ends the attempt and the run starts again from the caller's grid without it),
//! rounds on every device in parallel, the host's halo exchange, rebalancing and the final
//! download.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::balance::Balancer;
use super::bands;
use super::record::Recorder;
use super::report::{DeviceRoundReport, Layout, Report, RoundReport};
use super::round::{self, DeviceRound, Readback};
use super::state::{BandState, Spec};
use super::Options;
use crate::context::MultiGpuContext;
use crate::device::Compiled;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::profile::{CallRecord, Kind, Profiler};
use crate::worker::GpuClock;

/// A device failure that ended an attempt (or any other error, which ends the run).
struct Failure {
    device: Option<usize>,
    error: Error,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            device: None,
            error,
        }
    }
}

/// Runs the grid on the healthy devices, starting again without a device that fails.
pub(super) fn evolve(
    ctx: &MultiGpuContext,
    spec: &Spec,
    initial: Vec<u8>,
    opts: &Options,
) -> Result<(Vec<u8>, Report)> {
    let started = Instant::now();
    ctx.ensure_calibrated()?;
    let profiler = ctx.active_profile();
    let mut report = Report {
        steps: opts.steps,
        halo: opts.halo,
        ..Report::default()
    };
    let mut board = initial.clone();
    loop {
        let healthy: Vec<usize> = ctx
            .devices()
            .iter()
            .filter(|d| d.health.is_healthy())
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
        match attempt(ctx, spec, &mut board, split, opts, &recorder, &mut report) {
            Ok(()) => {
                report.wall_s = started.elapsed().as_secs_f64();
                return Ok((board, report));
            }
            Err(Failure {
                device: Some(id),
                error: error @ (Error::DeviceLost { .. } | Error::OutOfMemory { .. }),
            }) => {
                let dev = &ctx.devices()[id];
                let reason = error.to_string();
                dev.health.mark_failed(&reason);
                dev.pool.clear();
                dev.counters.chunks_failed(1);
                recorder.instant(Some(id), Kind::Retry);
                report.failures.push((id, reason));
                board.copy_from_slice(&initial);
            }
            Err(Failure { error, .. }) => return Err(error),
        }
    }
}

/// The first layout's rows per healthy device: the caller's split (first attempt only), or
/// in proportion to the streaming bandwidth calibration measured (a member of a group of
/// devices sharing hardware counts for its share of the group's measured speedup).
fn first_split(
    ctx: &MultiGpuContext,
    spec: &Spec,
    healthy: &[usize],
    opts: &Options,
    first_attempt: bool,
) -> Result<Vec<(usize, usize)>> {
    let height = spec.geometry.height;
    if let (Some(split), true) = (&opts.split, first_attempt) {
        let n = ctx.devices().len();
        if split.len() != n {
            return Err(Error::invalid(
                "split",
                format!(
                    "expected rows for each of the {n} devices, got {} entries",
                    split.len()
                ),
            ));
        }
        let total: usize = split.iter().sum();
        if total != height {
            return Err(Error::invalid(
                "split",
                format!("expected rows adding up to the grid's {height} rows, got {total}"),
            ));
        }
        if let Some(id) = (0..n).find(|&i| split[i] > 0 && !healthy.contains(&i)) {
            return Err(Error::invalid(
                "split",
                format!("device {id} is not healthy and cannot be given rows"),
            ));
        }
        return Ok(healthy.iter().map(|&id| (id, split[id])).collect());
    }
    let groups = ctx.group_speedups();
    let weights: Vec<f64> = healthy
        .iter()
        .map(|&id| {
            let dev = &ctx.devices()[id];
            let bandwidth = ctx
                .measurements(id)
                .map_or(1.0, |m| m.kernel_copy_bytes_per_s.max(1.0));
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

type States = BTreeMap<usize, Vec<BandState>>;

/// One attempt on a fixed set of devices; a device failure ends it.
fn attempt(
    ctx: &MultiGpuContext,
    spec: &Spec,
    board: &mut [u8],
    mut split: Vec<(usize, usize)>,
    opts: &Options,
    recorder: &Recorder<'_>,
    report: &mut Report,
) -> std::result::Result<(), Failure> {
    if opts.steps == 0 {
        return Ok(());
    }
    let devices = ctx.devices();
    let kernel = spec.rule.kernel();
    let mut compiled: BTreeMap<usize, Arc<Compiled>> = BTreeMap::new();
    for &(id, rows) in &split {
        if rows > 0 {
            let pipeline = devices[id].pipeline(&kernel).map_err(|error| Failure {
                device: Some(id),
                error,
            })?;
            compiled.insert(id, pipeline);
        }
    }
    let timeout = ctx.options().sync_timeout_ms.map(Duration::from_millis);
    let g = spec.geometry;
    let mut current = 0;
    let t = Instant::now();
    let layout = bands_of(ctx, spec, &split)?;
    let mut states = build(
        ctx,
        spec,
        layout,
        board,
        current,
        &mut compiled,
        &kernel,
        None,
    )?;
    report
        .layouts
        .push(layout_record(0, &split, &states, t.elapsed()));
    let mut balancer = Balancer::default();
    let mut clocks: BTreeMap<usize, GpuClock> = BTreeMap::new();
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
    while done < opts.steps {
        let steps = (opts.steps - done).min(g.halo as u64) as usize;
        let last = done + steps as u64 == opts.steps;
        let readback = if last {
            Readback::Nothing
        } else {
            Readback::Borders
        };
        let round_start = Instant::now();
        let outcomes = run_round(
            ctx, spec, &states, &compiled, board, current, steps, fresh, &readback, timeout,
            &stamped,
        );
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
                failed.into_iter().for_each(BandState::discard);
            }
            return Err(failure);
        }
        let assemble_start = Instant::now();
        let rb = spec.row_bytes;
        for r in &rounds {
            for (row, bytes) in &r.rows {
                board[row * rb..row * rb + bytes.len()].copy_from_slice(bytes);
            }
        }
        let assembled = Instant::now();
        recorder.host(
            None,
            Kind::Exchange,
            Some(round_index),
            assemble_start,
            assembled,
            rounds.iter().map(|r| r.bytes_down).sum(),
            0,
        );
        let mut devices_report = Vec::with_capacity(rounds.len());
        for r in &rounds {
            let dev = &devices[r.device];
            let busy = (r.read - r.started).as_secs_f64();
            dev.counters.chunk_done(r.work, r.bytes_up, r.bytes_down);
            dev.counters.add_busy(busy);
            let overhead = ctx
                .measurements(r.device)
                .map_or(0.0, |m| m.launch_latency_s);
            balancer.observe(r.device, r.work, busy, overhead);
            recorder.round(dev, round_index, r, clocks.entry(r.device).or_default());
            let band_states = &states[&r.device];
            devices_report.push(DeviceRoundReport {
                device: r.device,
                rows: band_states.iter().map(|s| s.band.len()).sum(),
                bands: band_states.len(),
                work: r.work,
                upload_s: (r.submitted - r.started).as_secs_f64(),
                compute_s: (r.finished - r.submitted).as_secs_f64(),
                readback_s: (r.read - r.finished).as_secs_f64(),
            });
            // Profiled rounds are timed with GPU timestamps where one costs under 3% of
            // the device's last round (or wherever available when forced).
            let supported = dev.timestamp_period_ns.is_some();
            let timed = match ctx.options().gpu_timestamps {
                Some(forced) => forced && supported,
                None => {
                    supported
                        && ctx
                            .measurements(r.device)
                            .is_some_and(|m| m.timestamp_cost_s <= 0.03 * busy)
                }
            };
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
        round_index += 1;
        fresh = false;
        if last || !opts.rebalance {
            continue;
        }
        let remaining = (opts.steps - done).div_ceil(g.halo as u64) as usize;
        let cost = |to: &[(usize, usize)]| {
            2.0 * latency + moved_rows(&split, to, g.halo) as f64 * per_row_s.max(calibrated)
        };
        let Some(proposal) = balancer.propose(&split, wall, remaining, &cost) else {
            continue;
        };
        let t = Instant::now();
        let moved = moved_rows(&split, &proposal.split, g.halo);
        states = relayout(
            ctx,
            spec,
            states,
            &proposal.split,
            board,
            current,
            &mut compiled,
            &kernel,
            timeout,
        )?;
        split = proposal.split;
        fresh = true;
        let took = t.elapsed();
        recorder.host(None, Kind::Plan, Some(round_index), t, Instant::now(), 0, 0);
        per_row_s = took.as_secs_f64() / moved.max(1) as f64;
        report
            .layouts
            .push(layout_record(done, &split, &states, took));
        balancer.relaid();
    }
    let t = Instant::now();
    fetch(
        ctx,
        spec,
        &states,
        &compiled,
        board,
        current,
        &Readback::Owned,
        timeout,
    )?;
    report.download_s = t.elapsed().as_secs_f64();
    recorder.host(
        None,
        Kind::Readback,
        None,
        t,
        Instant::now(),
        board.len() as u64,
        0,
    );
    Ok(())
}

/// Reads `readback`'s rows of every band (no steps) and places them on `board`.
#[allow(clippy::too_many_arguments)]
fn fetch(
    ctx: &MultiGpuContext,
    spec: &Spec,
    states: &States,
    compiled: &BTreeMap<usize, Arc<Compiled>>,
    board: &mut [u8],
    current: usize,
    readback: &Readback<'_>,
    timeout: Option<Duration>,
) -> std::result::Result<(), Failure> {
    let outcomes = run_round(
        ctx,
        spec,
        states,
        compiled,
        board,
        current,
        0,
        true,
        readback,
        timeout,
        &BTreeMap::new(),
    );
    let rb = spec.row_bytes;
    for (id, outcome) in outcomes {
        let r = outcome.map_err(|error| Failure {
            device: Some(id),
            error,
        })?;
        for (row, bytes) in &r.rows {
            board[row * rb..row * rb + bytes.len()].copy_from_slice(bytes);
        }
    }
    Ok(())
}

fn layout_record(
    at_step: u64,
    split: &[(usize, usize)],
    states: &States,
    took: Duration,
) -> Layout {
    Layout {
        at_step,
        split: split.to_vec(),
        bands: states.values().map(Vec::len).sum(),
        seconds: took.as_secs_f64(),
    }
}

/// The bands of `split`, each within one binding of its device.
fn bands_of(
    ctx: &MultiGpuContext,
    spec: &Spec,
    split: &[(usize, usize)],
) -> std::result::Result<Vec<bands::Band>, Failure> {
    let devices = ctx.devices();
    let max_rows = |id: usize| (devices[id].max_binding_bytes() / spec.row_bytes as u64) as usize;
    Ok(bands::layout(split, spec.geometry, &max_rows)?)
}

/// Where each grid row is in `states`: (device, band index on it, buffer row).
fn owners(states: &States, height: usize) -> Vec<(usize, usize, usize)> {
    let mut owner = vec![(usize::MAX, 0, 0); height];
    for (&device, list) in states {
        for (i, st) in list.iter().enumerate() {
            for (k, row) in st.band.rows.clone().enumerate() {
                owner[row] = (device, i, st.band.above + k);
            }
        }
    }
    owner
}

/// Creates `layout`'s bands and fills their rows (ghosts included): by a device-side copy
/// from a band of `old` on the same device where there is one, else from `board`.
#[allow(clippy::too_many_arguments)]
fn build(
    ctx: &MultiGpuContext,
    spec: &Spec,
    layout: Vec<bands::Band>,
    board: &[u8],
    current: usize,
    compiled: &mut BTreeMap<usize, Arc<Compiled>>,
    kernel: &Kernel,
    old: Option<&States>,
) -> std::result::Result<States, Failure> {
    let devices = ctx.devices();
    let g = spec.geometry;
    let owner = old.map(|o| owners(o, g.height));
    let mut states: States = BTreeMap::new();
    let mut encoders: BTreeMap<usize, wgpu::CommandEncoder> = BTreeMap::new();
    for band in layout {
        let id = band.device;
        let dev = &devices[id];
        let fail = |error| Failure {
            device: Some(id),
            error,
        };
        let pipeline = match compiled.get(&id) {
            Some(p) => Arc::clone(p),
            None => {
                let p = dev.pipeline(kernel).map_err(fail)?;
                compiled.insert(id, Arc::clone(&p));
                p
            }
        };
        let state = BandState::create(dev, &pipeline, band, spec).map_err(fail)?;
        let rows = state.band.buffer_rows();
        let mut uploaded = 0;
        let mut local = 0;
        while local < rows {
            // The longest run of buffer rows from one source: consecutive rows of one band
            // of `old` on this device, or rows from the board.
            let source = |l: usize| {
                let (d, i, at) = owner.as_ref()?[state.band.global_row(l, g)];
                (d == id).then_some((i, at))
            };
            let first = source(local);
            let mut n = 1;
            while local + n < rows
                && match (first, source(local + n)) {
                    (Some((i, at)), Some((j, bt))) => i == j && bt == at + n,
                    (None, None) => true,
                    _ => false,
                }
            {
                n += 1;
            }
            match (first, old) {
                (Some((i, at)), Some(old)) => {
                    let encoder = encoders.entry(id).or_insert_with(|| {
                        dev.device
                            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                                label: Some("amari-gpu relayout"),
                            })
                    });
                    state.copy_rows_from(encoder, &old[&id][i], at, local, n, current, spec);
                }
                _ => uploaded += state.write_rows(dev, current, local..local + n, spec, board),
            }
            local += n;
        }
        dev.counters.chunk_done(0, uploaded, 0);
        states.entry(id).or_default().push(state);
    }
    for (id, encoder) in encoders {
        devices[id].queue.submit(Some(encoder.finish()));
    }
    Ok(states)
}

/// Moves from `old` to the bands of `split`. Only the rows a new band needs from a band on
/// another device come down to `board` (and go up again); rows that stay on their device
/// are copied there.
#[allow(clippy::too_many_arguments)]
fn relayout(
    ctx: &MultiGpuContext,
    spec: &Spec,
    old: States,
    split: &[(usize, usize)],
    board: &mut [u8],
    current: usize,
    compiled: &mut BTreeMap<usize, Arc<Compiled>>,
    kernel: &Kernel,
    timeout: Option<Duration>,
) -> std::result::Result<States, Failure> {
    let g = spec.geometry;
    let layout = bands_of(ctx, spec, split)?;
    let owner = owners(&old, g.height);
    let mut needed: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for band in &layout {
        for local in 0..band.buffer_rows() {
            let (d, i, at) = owner[band.global_row(local, g)];
            if d != band.device {
                needed.entry((d, i)).or_default().push(at);
            }
        }
    }
    let mut wanted: BTreeMap<usize, Vec<Vec<std::ops::Range<usize>>>> = BTreeMap::new();
    for (&device, list) in &old {
        let per_band = (0..list.len())
            .map(|i| {
                let mut rows = needed.remove(&(device, i)).unwrap_or_default();
                rows.sort_unstable();
                rows.dedup();
                runs(&rows)
            })
            .collect();
        wanted.insert(device, per_band);
    }
    fetch(
        ctx,
        spec,
        &old,
        compiled,
        board,
        current,
        &Readback::Rows(&wanted),
        timeout,
    )?;
    let states = build(
        ctx,
        spec,
        layout,
        board,
        current,
        compiled,
        kernel,
        Some(&old),
    )?;
    // The copies out of the old bands are submitted; wgpu keeps their buffers alive until
    // those copies have run, and the pool hands them out only after this drop.
    drop(old);
    Ok(states)
}

/// Rows that change device between two splits (in device order, contiguous), counting the
/// ghost rows each new boundary needs: what a move sends through the host.
fn moved_rows(from: &[(usize, usize)], to: &[(usize, usize)], halo: usize) -> usize {
    let ranges = |split: &[(usize, usize)]| {
        let mut start = 0;
        split
            .iter()
            .map(|&(d, n)| {
                start += n;
                (d, start - n..start)
            })
            .collect::<Vec<_>>()
    };
    let (a, b) = (ranges(from), ranges(to));
    let height: usize = to.iter().map(|s| s.1).sum();
    let kept: usize = b
        .iter()
        .map(|(d, r)| {
            a.iter()
                .filter(|(e, _)| e == d)
                .map(|(_, s)| r.end.min(s.end).saturating_sub(r.start.max(s.start)))
                .sum::<usize>()
        })
        .sum();
    height - kept + 2 * halo * to.iter().filter(|s| s.1 > 0).count()
}

/// Sorted distinct numbers as runs of consecutive ones.
fn runs(sorted: &[usize]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for &x in sorted {
        match out.last_mut() {
            Some(r) if r.end == x => r.end += 1,
            _ => out.push(x..x + 1),
        }
    }
    out
}

/// Runs one round on every device with bands, each on its own thread.
#[allow(clippy::too_many_arguments)]
fn run_round(
    ctx: &MultiGpuContext,
    spec: &Spec,
    states: &States,
    compiled: &BTreeMap<usize, Arc<Compiled>>,
    board: &[u8],
    current: usize,
    steps: usize,
    fresh: bool,
    readback: &Readback<'_>,
    timeout: Option<Duration>,
    stamped: &BTreeMap<usize, bool>,
) -> Vec<(usize, Result<DeviceRound>)> {
    let devices = ctx.devices();
    std::thread::scope(|scope| {
        let handles: Vec<_> = states
            .iter()
            .map(|(&id, bands)| {
                let dev = &devices[id];
                let pipeline = &compiled[&id];
                let timed = stamped.get(&id).copied().unwrap_or(false);
                let handle = scope.spawn(move || {
                    round::run(
                        dev, pipeline, bands, spec, board, current, steps, fresh, readback,
                        timeout, timed,
                    )
                });
                (id, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(id, h)| {
                let outcome = h.join().unwrap_or_else(|_| {
                    Err(Error::DeviceLost {
                        device: id,
                        reason: "the device's round panicked".into(),
                    })
                });
                (id, outcome)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::{moved_rows, runs};

    #[test]
    fn runs_group_consecutive_rows() {
        assert_eq!(runs(&[]), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10]), vec![1..4, 7..8, 9..11]);
    }

    #[test]
    fn moved_rows_count_rows_changing_device_and_the_new_ghosts() {
        let from = [(0, 90), (1, 10)];
        assert_eq!(moved_rows(&from, &from, 1), 4);
        assert_eq!(moved_rows(&from, &[(0, 50), (1, 50)], 2), 40 + 8);
        assert_eq!(moved_rows(&from, &[(0, 0), (1, 100)], 1), 90 + 2);
    }
}
