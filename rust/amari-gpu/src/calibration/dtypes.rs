//! Each device's rate per dtype: how fast it computes in float64 against float32 (consumer
//! GPUs run float64 at 1/32 to 1/64 of float32, data-centre ones at 1/2, a CPU's SIMD at
//! 1/2), so that a plan of float64 work gives a device rows in proportion to its float64
//! rate, not its float32 one. The figure is the ratio of items/s of one probe kernel (the
//! generated Cl(4,0) geometric product, 256 multiply-adds an item: the same code in both
//! dtypes on every device, the host's twin included, where Cl(3,0) has in-register chains
//! only in float32) timed in float64 and in float32 on resident data, back to back. It is measured only when a plan
//! splitting float64 work first needs it (a float32 call never pays for it), kept with the
//! device's other figures and cached with them. float16 computes in float32 (storage only)
//! and is modelled at float32's rate: its narrower rows are in the workload's bytes.

use std::collections::BTreeMap;
use std::time::Instant;

use super::cache;
use super::host::host_items_per_s;
use super::measure::unusable_figure;
use super::rates::{items_per_s, Timing};
use crate::capabilities::Measurements;
use crate::context::MultiGpuContext;
use crate::device::GpuDevice;
use crate::dtype::Dtype;
use crate::error::Result;
use crate::ga::algebra::Algebra;
use crate::ga::codegen::Broadcast;
use crate::ga::operation::Operation;
use crate::kernel::Kernel;

/// Items of the probe a timing starts from (sizes grow until a run takes long enough).
const MIN_ITEMS: usize = 1 << 12;

/// Whether `dtype` has a rate of its own to measure (float64; float16 computes in float32).
pub(crate) fn measured(dtype: Dtype) -> bool {
    dtype.compute() != Dtype::F32
}

/// The probe kernel in `dtype`.
fn probe(dtype: Dtype) -> Result<Kernel> {
    let algebra = Algebra::new(4, 0, 0)?;
    Ok(crate::ga::kernels::kernel(
        &algebra,
        Operation::Geometric,
        Broadcast::None,
        dtype,
    ))
}

/// Timings of each dtype, alternated; each dtype's fastest counts.
const ROUNDS: usize = 2;

/// The rate of `dev` in `dtype` relative to float32: items/s of the probe in `dtype` over
/// items/s in float32, each the fastest of [`ROUNDS`] timings taken in turn with the
/// other's. A busy machine (other processes on the cores a CPU adapter runs on) only ever
/// slows a timing down, and the two dtypes must be compared undisturbed: a ratio of one
/// disturbed and one clean timing came out 17x here. A wgpu device's timings are its
/// limits' (the fastest of several short dispatches), for the same reason.
pub(super) fn measure(dev: &GpuDevice, dtype: Dtype) -> Result<f64> {
    let kernels = [probe(Dtype::F32)?, probe(dtype)?];
    let rate = |kernel: &Kernel| -> Result<f64> {
        match dev.as_host() {
            Some(host) => host_items_per_s(host, kernel, MIN_ITEMS),
            None => Ok(items_per_s(dev, kernel, MIN_ITEMS, Timing::Limit)?.0),
        }
    };
    let mut best = [0.0f64; 2];
    for _ in 0..ROUNDS {
        for (b, kernel) in best.iter_mut().zip(&kernels) {
            *b = b.max(rate(kernel)?);
        }
    }
    Ok(best[1] / best[0].max(f64::MIN_POSITIVE))
}

/// The arithmetic rate of figures `m` in `dtype`: `flops_per_s` (its float32 rate) times
/// the measured rate of `dtype` relative to float32, unchanged when that is not measured
/// (a plan with nothing to split, or float32 and float16 work).
pub(crate) fn scaled(flops_per_s: f64, m: Option<&Measurements>, dtype: Dtype) -> f64 {
    match m.and_then(|m| m.dtype_rates.get(dtype.name())) {
        Some(&ratio) if measured(dtype) => flops_per_s * ratio,
        _ => flops_per_s,
    }
}

/// Whether `m` holds what a plan of `dtype` work needs of it.
pub(crate) fn covers(m: &Measurements, dtype: Dtype) -> bool {
    !measured(dtype) || m.dtype_rates.contains_key(dtype.name())
}

/// Measures on `dev` the rates of `dtypes` it runs and `m` lacks, into `m`; a rate whose
/// probe fails, or that no cost model can use, is left out (that dtype's work is then planned
/// at the float32 rate) with a warning saying why. Returns what was measured, in words.
pub(super) fn add_rates(dev: &GpuDevice, m: &mut Measurements, dtypes: &[Dtype]) -> Vec<String> {
    let mut done = Vec::new();
    for &dtype in dtypes {
        if !dev.runs(dtype) || covers(m, dtype) {
            continue;
        }
        let ratio = match measure(dev, dtype) {
            Ok(ratio) => ratio,
            Err(e) => {
                log::warn!("{dtype} rate of device {} not measured: {e}", dev.id);
                continue;
            }
        };
        m.dtype_rates.insert(dtype.name().to_string(), ratio);
        if let Some(figure) = unusable_figure(m) {
            log::warn!(
                "{dtype} rate of device {} is unusable ({figure}); not kept",
                dev.id
            );
            m.dtype_rates.remove(dtype.name());
        } else {
            done.push(format!("{dtype} at {ratio:.3}x float32"));
        }
    }
    done
}

impl MultiGpuContext {
    /// Of the healthy devices `ids` that run `dtype` and hold their other figures, those
    /// whose figures lack its rate.
    pub(super) fn lacking_rate(&self, ids: &[usize], dtype: Dtype) -> Vec<usize> {
        if !measured(dtype) {
            return Vec::new();
        }
        let figures = self.measured.lock().expect("measured lock");
        ids.iter()
            .copied()
            .filter(|&id| {
                let dev = &self.devices[id];
                dev.health.is_healthy()
                    && dev.runs(dtype)
                    && figures[id].as_ref().is_some_and(|(m, _)| !covers(m, dtype))
            })
            .collect()
    }

    /// Measures the rate of `dtype` on the devices of `ids` whose figures lack it (see
    /// [`Self::lacking_rate`]; figures measured in this process or loaded from a cache
    /// written before the rate was needed; logical devices on one adapter share one
    /// measurement) and keeps it with their figures, in memory and in the cache. Returns what
    /// was measured, one entry per measurement.
    pub(super) fn measure_rates(&self, ids: &[usize], dtype: Dtype) -> Result<Vec<String>> {
        let mut fresh: BTreeMap<String, Measurements> = BTreeMap::new();
        let mut done = Vec::new();
        for id in self.lacking_rate(ids, dtype) {
            let dev = &self.devices[id];
            let key = cache::device_key(dev);
            let Some((mut m, from_cache)) =
                self.measured.lock().expect("measured lock")[id].clone()
            else {
                continue;
            };
            match fresh.get(&key) {
                Some(shared) => m.dtype_rates.clone_from(&shared.dtype_rates),
                None => {
                    let t = Instant::now();
                    for rate in add_rates(dev, &mut m, &[dtype]) {
                        let (name, backend) = (&dev.adapter.name, &dev.adapter.backend);
                        let seconds = t.elapsed().as_secs_f64();
                        done.push(format!(
                            "device {id} ({name}, {backend}): {rate} in {seconds:.2} s"
                        ));
                    }
                    if let Err(e) = cache::store(&key, &m) {
                        // A cache that cannot be written only costs a re-measurement next time.
                        log::warn!("calibration cache not written for {key}: {e}");
                    }
                    fresh.insert(key, m.clone());
                }
            }
            self.measured.lock().expect("measured lock")[id] = Some((m, from_cache));
            // Fast-path decisions were made from the figures replaced.
            self.fast.clear();
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::fixtures::dev;
    use crate::plan::Strategy;
    use crate::workload::Workload;

    fn figures(float64: Option<f64>) -> Measurements {
        let mut m = super::super::measure::tests::sane();
        if let Some(ratio) = float64 {
            m.dtype_rates.insert("float64".into(), ratio);
        }
        m
    }

    #[test]
    fn only_float64_has_a_rate_of_its_own() {
        assert!(measured(Dtype::F64));
        assert!(!measured(Dtype::F32) && !measured(Dtype::F16));
        let m = figures(Some(0.25));
        assert_eq!(scaled(8e9, Some(&m), Dtype::F64), 2e9);
        assert_eq!(scaled(8e9, Some(&m), Dtype::F32), 8e9);
        assert_eq!(scaled(8e9, Some(&m), Dtype::F16), 8e9);
        assert_eq!(scaled(8e9, Some(&figures(None)), Dtype::F64), 8e9);
        assert_eq!(scaled(8e9, None, Dtype::F64), 8e9);
        assert!(covers(&m, Dtype::F64) && covers(&figures(None), Dtype::F32));
        assert!(!covers(&figures(None), Dtype::F64));
    }

    // Two devices of one float32 rate, one running float64 at 1/2 of it and one at 1/64: a
    // capability plan of float64 work gives them rows in proportion 32 : 1, a float32 plan
    // halves the rows.
    #[test]
    fn a_float64_plan_splits_by_the_float64_rates() {
        let fast = figures(Some(0.5));
        let slow = figures(Some(1.0 / 64.0));
        let workload = |dtype| Workload {
            kernel: "geometric_product".into(),
            family: None,
            items: 33 << 12,
            bytes_in_per_item: 0.0,
            bytes_out_per_item: 0.0,
            flops_per_item: 1e4,
            dtype,
        };
        let rows = |dtype| {
            let models =
                [(0, &fast), (1, &slow)].map(|(id, m)| dev(id, id, scaled(1e10, Some(m), dtype)));
            let plan =
                crate::partition::plan(&workload(dtype), 1 << 8, &models, Strategy::Capability)
                    .expect("plan");
            let items = |id| {
                plan.assignments
                    .iter()
                    .filter(|d| d.device == id)
                    .map(|d| d.items)
                    .sum::<u64>() as f64
            };
            (items(0), items(1))
        };
        let (fast64, slow64) = rows(Dtype::F64);
        let share = fast64 / slow64;
        assert!((28.0..=36.0).contains(&share), "{fast64} : {slow64}");
        let (fast32, slow32) = rows(Dtype::F32);
        assert!((fast32 / slow32 - 1.0).abs() < 0.05, "{fast32} : {slow32}");
    }
}
