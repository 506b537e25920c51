//! Helpers shared by the criterion-free benchmarks (`fisher`, `tropical`, `ga`): medians of
//! timed rounds, one timed call, and a context of one adapter with the line naming it.

// Every benchmark compiles this module and uses a part of it.
#![allow(dead_code)]

use std::time::Instant;

use amari_gpu::{AdapterInfo, ContextOptions, MultiGpuContext};

/// The median of `samples` (the upper one of an even count): robust to a round slowed by
/// other processes on a busy machine.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The result of one call of `f` and the seconds it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64())
}

/// A context of the one device on adapter `index`.
pub fn adapter_context(index: usize) -> MultiGpuContext {
    MultiGpuContext::new(ContextOptions {
        adapters: Some(vec![index]),
        ..Default::default()
    })
    .expect("context opens")
}

/// `[index] name (backend, device type, driver …)`: the adapter a figure was measured on.
pub fn describe(info: &AdapterInfo) -> String {
    format!(
        "[{}] {} ({}, {}, driver {} {})",
        info.index, info.name, info.backend, info.device_type, info.driver, info.driver_info
    )
}
