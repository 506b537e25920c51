//! Micro-benchmarks run on a device to measure what it can do: launch latency, host→device
//! and device→host transfer, on-device copy bandwidth, and items/s of each kernel family's
//! reference kernel. Every figure is a median of a few timed repetitions on the device
//! itself; nothing is looked up from the vendor. The transfer figures are measured in
//! `transfers`, the kernel rates in `rates`; this module holds what they share and the
//! figures they make up.

use std::time::{Duration, Instant};

use super::{rates, transfers};
use crate::capabilities::Measurements;
use crate::device::GpuDevice;
use crate::error::Result;
use crate::gpu_io::{self, Limit};
use crate::kernel::FamilyDefinition;

/// Timed repetitions per figure (the median is kept).
pub(super) const REPEATS: usize = 3;

pub(super) fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// How long one calibration step may take before the device counts as lost.
pub(super) const STEP_LIMIT: Duration = Duration::from_secs(60);

pub(super) fn wait(dev: &GpuDevice, submission: wgpu::SubmissionIndex) -> Result<()> {
    gpu_io::wait(dev, Some(submission), Limit::Fixed(STEP_LIMIT))
}

pub(super) fn buffer(dev: &GpuDevice, bytes: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    gpu_io::buffer(dev, "amari-gpu calibration", bytes, usage)
}

pub(super) fn timed(repeats: usize, mut step: impl FnMut() -> Result<()>) -> Result<f64> {
    step()?; // warm-up: first use allocates and compiles
    let mut samples = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = Instant::now();
        step()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(median(samples))
}

/// Whether measurements hold the device figures this version measures (caches written
/// before a figure existed lack it). Family rates are measured one family at a time, when a
/// plan first needs them: any subset of them is complete.
pub fn has_device_figures(m: &Measurements) -> bool {
    m.peak_flops_per_s > 0.0 && m.kernel_copy_bytes_per_s > 0.0 && m.timestamp_cost_s >= 0.0
}

/// Whether `m` holds the rate of every family in `wanted`.
pub fn covers(m: &Measurements, wanted: &[&FamilyDefinition]) -> bool {
    wanted
        .iter()
        .all(|f| m.family_items_per_s.contains_key(f.name()))
}

/// Largest believable transfer or copy rate, bytes per second: 100 TB/s, ten times the
/// memory bandwidth of the fastest GPUs made (HBM3e, about 8 TB/s).
pub const MAX_BYTES_PER_S: f64 = 1e14;

/// Largest believable arithmetic peak, flops per second: 100 PFLOP/s, far beyond any one
/// device's f32 arithmetic (tens of TFLOP/s).
pub const MAX_FLOPS_PER_S: f64 = 1e17;

/// Largest believable kernel rate, items per second: every reference item reads and writes
/// at least 8 bytes, so 10^13 items/s would already move more than [`MAX_BYTES_PER_S`].
pub const MAX_ITEMS_PER_S: f64 = 1e13;

/// Smallest believable rate of any kind (bytes, flops or items per second): a calibration
/// step runs at least one item within [`STEP_LIMIT`], or fails the device. (The slowest
/// rate measured here: 155 tropical items/s on llvmpipe, GL, 2 cores.)
pub const MIN_RATE_PER_S: f64 = 0.01;

/// Largest believable time of one step (launch latency, timestamp cost), seconds: a
/// calibration step that takes longer than [`STEP_LIMIT`] fails the device instead.
pub const MAX_STEP_S: f64 = STEP_LIMIT.as_secs() as f64;

/// The first figure of `m` that no cost model can use, as "name = value (why)": a rate that
/// is not finite or outside [`MIN_RATE_PER_S`] and its kind's maximum ([`MAX_BYTES_PER_S`],
/// [`MAX_FLOPS_PER_S`], [`MAX_ITEMS_PER_S`]), a time that is not finite or outside 0 to
/// [`MAX_STEP_S`]; `None` when every figure is usable. A cache file that parses but holds
/// such a figure (edited by hand, written by a broken measurement) is measured again rather
/// than trusted: an absurd figure (10^308 items/s, a latency of 10^300 s) would mislead
/// every plan until the next forced calibration.
pub fn unusable_figure(m: &Measurements) -> Option<String> {
    let bytes = (MIN_RATE_PER_S, MAX_BYTES_PER_S, "bytes/s");
    let flops = (MIN_RATE_PER_S, MAX_FLOPS_PER_S, "flops/s");
    let items = (MIN_RATE_PER_S, MAX_ITEMS_PER_S, "items/s");
    let time = (0.0, MAX_STEP_S, "s");
    let mut figures = vec![
        ("launch_latency_s", m.launch_latency_s, time),
        ("h2d_bytes_per_s", m.h2d_bytes_per_s, bytes),
        ("d2h_bytes_per_s", m.d2h_bytes_per_s, bytes),
        ("copy_bytes_per_s", m.copy_bytes_per_s, bytes),
        ("peak_flops_per_s", m.peak_flops_per_s, flops),
        ("kernel_copy_bytes_per_s", m.kernel_copy_bytes_per_s, bytes),
        ("timestamp_cost_s", m.timestamp_cost_s, time),
    ];
    for (name, &v) in &m.family_items_per_s {
        figures.push((name.as_str(), v, items));
    }
    // A dtype's rate relative to float32: float64 is slower, never many times faster.
    for (name, &v) in &m.dtype_rates {
        figures.push((name.as_str(), v, (1e-4, 4.0, "x float32")));
    }
    figures.into_iter().find_map(|(name, v, bounds)| {
        out_of_bounds(v, bounds).map(|why| format!("{name} = {} ({why})", number(v)))
    })
}

/// `v` in plain digits when that is short, else in exponent notation (Rust's plain
/// formatting of 1e300 has 301 digits).
pub(crate) fn number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-4..1e7).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Why `v` is not a figure within `(low, high, unit)`, if it is not.
pub(crate) fn out_of_bounds(v: f64, (low, high, unit): (f64, f64, &str)) -> Option<String> {
    if !v.is_finite() {
        Some("not a finite number".into())
    } else if v < low || v > high {
        Some(format!(
            "outside {} to {} {unit}",
            number(low),
            number(high)
        ))
    } else {
        None
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it): when figures were measured.
pub(crate) fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `have` (or, when there is nothing yet, the device figures `device` measures) with the
/// rates of the `wanted` families it lacks, measured by `rate`; the time spent is added to
/// `calibration_s`. Shared by the wgpu devices and the host device.
pub(super) fn extend(
    have: Option<&Measurements>,
    wanted: &[&FamilyDefinition],
    device: impl FnOnce() -> Result<Measurements>,
    mut rate: impl FnMut(&FamilyDefinition) -> Result<f64>,
) -> Result<Measurements> {
    let start = Instant::now();
    let mut m = match have {
        Some(m) => m.clone(),
        None => device()?,
    };
    let before = if have.is_some() { m.calibration_s } else { 0.0 };
    for family in wanted {
        if !m.family_items_per_s.contains_key(family.name()) {
            let items_per_s = rate(family)?;
            m.family_items_per_s
                .insert(family.name().to_string(), items_per_s);
        }
    }
    m.measured_unix_s = now_unix_s();
    m.calibration_s = before + start.elapsed().as_secs_f64();
    Ok(m)
}

/// Measures on the wgpu device `dev` what `have` lacks of its device figures and the rates
/// of the `wanted` families (the host device is measured by `calibration::host`).
pub fn measure(
    dev: &GpuDevice,
    have: Option<&Measurements>,
    wanted: &[&FamilyDefinition],
) -> Result<Measurements> {
    extend(
        have,
        wanted,
        || {
            Ok(Measurements {
                launch_latency_s: transfers::measure_latency(dev)?,
                h2d_bytes_per_s: transfers::measure_h2d(dev)?,
                d2h_bytes_per_s: transfers::measure_d2h(dev)?,
                copy_bytes_per_s: transfers::measure_copy(dev)?,
                family_items_per_s: Default::default(),
                peak_flops_per_s: rates::measure_peak(dev, rates::Timing::Calibration)?.0,
                kernel_copy_bytes_per_s: rates::measure_kernel_copy(
                    dev,
                    rates::Timing::Calibration,
                )?
                .0,
                timestamp_cost_s: transfers::measure_timestamp_cost(dev)?,
                dtype_rates: Default::default(),
                stream_past_bytes: None,
                measured_unix_s: now_unix_s(),
                calibration_s: 0.0,
            })
        },
        |family| {
            let reference = (family.reference)();
            let min_items = family.calibration_min_items;
            Ok(rates::items_per_s(dev, &reference, min_items, rates::Timing::Calibration)?.0)
        },
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Figures every check takes as usable.
    pub(crate) fn sane() -> Measurements {
        Measurements {
            launch_latency_s: 1e-4,
            h2d_bytes_per_s: 1e9,
            d2h_bytes_per_s: 1e9,
            copy_bytes_per_s: 1e10,
            family_items_per_s: super::super::families::families()
                .iter()
                .map(|f| (f.name().to_string(), 1e6))
                .collect(),
            peak_flops_per_s: 1e11,
            kernel_copy_bytes_per_s: 1e10,
            timestamp_cost_s: 0.0,
            dtype_rates: Default::default(),
            stream_past_bytes: None,
            measured_unix_s: 0,
            calibration_s: 2.0,
        }
    }

    #[test]
    fn sane_figures_are_usable() {
        assert!(has_device_figures(&sane()));
        assert_eq!(unusable_figure(&sane()), None);
    }

    /// Figures already held are kept: the device figures are measured only when there are
    /// none, and only the families missing are measured, once each.
    #[test]
    fn extending_measures_only_what_is_missing() {
        let all = super::super::families::families();
        let mut asked = Vec::new();
        let mut fresh = sane();
        fresh.family_items_per_s.clear();
        let first = extend(
            None,
            &all[..1],
            || Ok(fresh.clone()),
            |f| {
                asked.push(f.name());
                Ok(5.0)
            },
        )
        .unwrap();
        assert_eq!(asked, [all[0].name()]);
        assert_eq!(first.launch_latency_s, fresh.launch_latency_s);
        assert_eq!(first.family_items_per_s.len(), 1);
        asked.clear();
        let whole = extend(
            Some(&first),
            all,
            || panic!("device figures measured again"),
            |f| {
                asked.push(f.name());
                Ok(7.0)
            },
        )
        .unwrap();
        let rest: Vec<&str> = all[1..].iter().map(|f| f.name()).collect();
        assert_eq!(asked, rest);
        assert!(covers(&whole, all));
        assert_eq!(whole.family_items_per_s[all[0].name()], 5.0);
        assert!(whole.calibration_s >= first.calibration_s);
    }

    type Spoil = fn(&mut Measurements);

    #[test]
    fn nonsense_figures_are_named_and_refused() {
        let cases: Vec<(Spoil, &str)> = vec![
            (|m| m.launch_latency_s = -1.0, "launch_latency_s = -1"),
            (|m| m.h2d_bytes_per_s = 0.0, "h2d_bytes_per_s = 0"),
            (|m| m.d2h_bytes_per_s = f64::NAN, "d2h_bytes_per_s = NaN"),
            (
                |m| m.copy_bytes_per_s = f64::INFINITY,
                "copy_bytes_per_s = inf",
            ),
            (
                |m| m.kernel_copy_bytes_per_s = -5.0,
                "kernel_copy_bytes_per_s = -5",
            ),
            (
                |m| {
                    let first = m.family_items_per_s.keys().next().unwrap().clone();
                    m.family_items_per_s.insert(first, 0.0);
                },
                " = 0",
            ),
            (
                |m| m.h2d_bytes_per_s = 1e308,
                "h2d_bytes_per_s = 1e308 (outside",
            ),
            (
                |m| m.launch_latency_s = 1e300,
                "launch_latency_s = 1e300 (outside 0 to 60 s)",
            ),
            (
                |m| m.peak_flops_per_s = 1e18,
                "peak_flops_per_s = 1e18 (outside 0.01 to 1e17 flops/s)",
            ),
            (
                |m| m.copy_bytes_per_s = 1e-3,
                "copy_bytes_per_s = 0.001 (outside",
            ),
            (
                |m| {
                    let first = m.family_items_per_s.keys().next().unwrap().clone();
                    m.family_items_per_s.insert(first, 1e308);
                },
                " = 1e308 (outside 0.01 to 1e13 items/s)",
            ),
        ];
        for (spoil, named) in cases {
            let mut m = sane();
            spoil(&mut m);
            let figure = unusable_figure(&m).expect("refused");
            assert!(figure.contains(named), "{figure} should name {named}");
        }
    }
}
