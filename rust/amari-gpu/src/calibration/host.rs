//! Calibration of the host device, with the figures the wgpu devices have so that one cost
//! model plans both: each family's items/s from its host kernel on resident data (the
//! reference kernels of `families`, run through the device's pool), the memory "transfer"
//! and copy rates as memcpy bandwidth (the host reads inputs in place; what a chunk costs it
//! in memory traffic is what a copy costs), the launch latency of a one-item chunk, and the
//! arithmetic peak from the fastest family. There are no GPU timestamps (cost 0).

use std::collections::BTreeMap;
use std::time::Instant;

use super::families::families;
use super::measure::{median, REPEATS};
use crate::capabilities::Measurements;
use crate::error::{Error, Result};
use crate::ga::algebra::Algebra;
use crate::ga::codegen::Broadcast;
use crate::ga::operation::Operation;
use crate::host::device::HostDevice;
use crate::kernel::{FamilyDefinition, Kernel};

/// Seconds a timed host run is sized to take.
const TARGET_S: f64 = 0.02;
/// The most a family's size grows past its smallest calibration size.
const MAX_GROWTH: usize = 1 << 8;
/// Bytes copied by the memcpy measurement.
const COPY_BYTES: usize = 64 << 20;

/// The kernel whose host twin stands for `reference` on the host: the reference itself,
/// or for a reference without a host twin (the static Cl(3,0) shader) the generated kernel
/// of the same operation.
pub(super) fn host_reference(reference: &Kernel) -> Result<Kernel> {
    if reference.host.is_some() {
        return Ok(reference.clone());
    }
    let algebra = Algebra::new(3, 0, 0)?;
    let generated = crate::ga::kernels::kernel(
        &algebra,
        Operation::Geometric,
        Broadcast::None,
        crate::dtype::Dtype::F32,
    );
    if generated.family == reference.family {
        Ok(generated)
    } else {
        Err(Error::Internal(format!(
            "reference kernel {} has no host implementation",
            reference.id
        )))
    }
}

/// Median seconds of `REPEATS` runs of `kernel` over `items` items (after a warm-up).
fn seconds(host: &HostDevice, kernel: &Kernel, items: usize) -> Result<f64> {
    let Some(twin) = kernel
        .host
        .as_ref()
        .map(|k| host.prepare(k.as_ref(), kernel.dtype))
    else {
        return Err(Error::Internal(format!(
            "kernel {} has no host twin",
            kernel.id
        )));
    };
    let inputs = kernel.filled_inputs(items, 0.5);
    let views: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut output = vec![0.0; kernel.output_words(items)];
    let run = |output: &mut [f32]| -> Result<f64> {
        let start = Instant::now();
        host.run(usize::MAX, twin.as_ref(), &views, (0..items, output), false)?;
        Ok(start.elapsed().as_secs_f64())
    };
    run(&mut output)?;
    let samples = (0..REPEATS)
        .map(|_| run(&mut output))
        .collect::<Result<Vec<f64>>>()?;
    Ok(median(samples))
}

/// Items per second of `kernel`, at a size grown from `smallest` until a run takes about
/// [`TARGET_S`].
pub(super) fn host_items_per_s(host: &HostDevice, kernel: &Kernel, smallest: usize) -> Result<f64> {
    let mut items = smallest.max(1);
    loop {
        let s = seconds(host, kernel, items)?;
        if s >= TARGET_S / 2.0 || items >= smallest.max(1) * MAX_GROWTH {
            return Ok(items as f64 / s.max(1e-9));
        }
        items *= 4;
    }
}

/// Bytes read plus written per second of a memcpy of [`COPY_BYTES`].
pub(super) fn memcpy_bytes_per_s(host: &HostDevice) -> f64 {
    let words = COPY_BYTES / 4;
    let src = vec![0.5f32; words];
    let mut dst = vec![0.0f32; words];
    let samples: Vec<f64> = (0..=REPEATS)
        .map(|_| {
            let start = Instant::now();
            host.pool.run_with(|| {
                use rayon::prelude::*;
                dst.par_chunks_mut(1 << 16)
                    .zip(src.par_chunks(1 << 16))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            });
            start.elapsed().as_secs_f64()
        })
        .skip(1)
        .collect();
    2.0 * COPY_BYTES as f64 / median(samples).max(1e-9)
}

/// Measures on the host device what `have` lacks of its device figures and the rates of the
/// `wanted` families. The arithmetic peak is the fastest measured family's.
pub fn measure(
    host: &HostDevice,
    have: Option<&Measurements>,
    wanted: &[&FamilyDefinition],
) -> Result<Measurements> {
    let mut m = super::measure::extend(
        have,
        wanted,
        || {
            let first = host_reference(&(families()[0].reference)())?;
            let launch_latency_s = seconds(host, &first, 1)?;
            let copy = memcpy_bytes_per_s(host);
            // On the device's threads, as the calls it decides for run.
            let stream_past = host.pool.run_with(crate::ga::stream_past_bytes);
            Ok(Measurements {
                launch_latency_s,
                // One direction of a copy moves half the bytes it touches.
                h2d_bytes_per_s: copy / 2.0,
                d2h_bytes_per_s: copy / 2.0,
                copy_bytes_per_s: copy,
                family_items_per_s: BTreeMap::new(),
                peak_flops_per_s: 0.0,
                kernel_copy_bytes_per_s: copy,
                timestamp_cost_s: 0.0,
                dtype_rates: BTreeMap::new(),
                stream_past_bytes: Some(stream_past as u64),
                measured_unix_s: 0,
                calibration_s: 0.0,
            })
        },
        |family| {
            let kernel = host_reference(&(family.reference)())?;
            host_items_per_s(host, &kernel, family.calibration_min_items)
        },
    )?;
    m.peak_flops_per_s = families()
        .iter()
        .filter_map(|f| {
            m.family_items_per_s
                .get(f.name())
                .map(|rate| rate * f.reference_flops_per_item)
        })
        .fold(0.0, f64::max);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device figures hold the size past which outputs stream, measured between the
    /// cores' own caches and the last-level cache, and the calls of this process use it; a
    /// cache written before the figure existed reads as not measured.
    #[test]
    fn the_host_calibration_measures_where_outputs_stream() {
        use crate::host::cpu::{last_level_cache_bytes, private_cache_bytes};
        use crate::kernel::FmaMode;
        let host = HostDevice::new(2, FmaMode::Fused).expect("pool");
        let m = measure(&host, None, &[]).expect("calibration");
        let past = m.stream_past_bytes.expect("measured") as usize;
        let (private, last) = (private_cache_bytes(), last_level_cache_bytes());
        assert!(past == last || (private..=last).contains(&past), "{past}");
        assert_eq!(crate::ga::stream_past_bytes(), past);
        let mut old = serde_json::to_value(&m).expect("json");
        old.as_object_mut()
            .expect("object")
            .remove("stream_past_bytes");
        let read: Measurements = serde_json::from_value(old).expect("an older cache");
        assert_eq!(read.stream_past_bytes, None);
    }

    #[test]
    fn every_family_reference_has_a_host_stand_in() {
        for family in families() {
            let kernel = host_reference(&(family.reference)()).expect("stand-in");
            assert!(kernel.host.is_some(), "{}", family.name());
            assert_eq!(kernel.family, (family.reference)().family);
        }
    }
}
