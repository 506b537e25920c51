//! One round on the host device, the twin of a wgpu device's round in `round`: copy the
//! ghost rows its bands need from the host board, run the round's steps on every band in
//! place on the device's thread pool (with the fma rounding of the wgpu devices beside it),
//! and copy out the rows the neighbours need. Its phases are timed like a wgpu round's, so
//! the report, the balancer and the profiler see one more device. An injected fault, a
//! panic in a step and a cancelled call end the round as they end a wgpu one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use super::host_band::HostBand;
use super::round::{wanted_rows, DeviceRound, Round};
use super::state::Spec;
use crate::device::GpuDevice;
use crate::error::{Error, Result};
use crate::gpu_io::lost;

#[cfg(test)]
pub(super) static PANIC_IN_STEP: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Runs `round` on the host device `dev`'s bands.
pub fn run(
    dev: &GpuDevice,
    bands: &mut [HostBand],
    spec: &Spec,
    round: &Round<'_>,
) -> Result<DeviceRound> {
    let Some(host) = dev.as_host() else {
        return Err(Error::Internal(format!(
            "host bands were laid out on wgpu device {}",
            dev.id
        )));
    };
    if let Some(reason) = dev.health.injected_fault_due() {
        return Err(lost(dev.id, reason));
    }
    let started = Instant::now();
    let mut bytes_up = 0;
    if !round.fresh {
        for b in bands.iter_mut() {
            bytes_up += b.write_ghosts(round.current, spec, round.board);
        }
    }
    let submitted = Instant::now();
    let cancelled = || round.interrupt.as_ref().is_some_and(|i| i.is_cancelled());
    let stepped = catch_unwind(AssertUnwindSafe(|| {
        host.pool.run_with(|| {
            let mut work = 0;
            // Step by step across the bands, as a wgpu round orders its dispatches; a host
            // round can be long, so a cancelled call stops between steps.
            for k in 1..=round.steps {
                if cancelled() {
                    return Err(Error::Cancelled);
                }
                #[cfg(test)]
                if PANIC_IN_STEP.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    panic!("a host band step failed (test)");
                }
                for b in bands.iter_mut() {
                    work += b.step(round.current, k, spec, host.fma);
                }
            }
            Ok(work)
        })
    }));
    let work = stepped.map_err(|panic| {
        let what = Error::from_panic("a host band step", panic.as_ref());
        lost(dev.id, what.to_string())
    })??;
    let finished = Instant::now();
    let after = (round.current + round.steps) % 2;
    let g = spec.geometry;
    let listed: Vec<_> = bands.iter().map(|b| &b.band).collect();
    let wanted = wanted_rows(dev.id, &listed, round.readback, g);
    let mut rows = Vec::new();
    let mut bytes_down = 0;
    for (b, ranges) in bands.iter().zip(&wanted) {
        for r in ranges {
            let bytes = b.rows(after, r, spec).to_vec();
            bytes_down += bytes.len() as u64;
            rows.push((b.band.global_row(r.start, g), bytes));
        }
    }
    dev.health.chunk_completed();
    Ok(DeviceRound {
        device: dev.id,
        rows,
        started,
        submitted,
        finished,
        read: Instant::now(),
        ticks: None,
        work,
        bytes_up,
        bytes_down,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::PANIC_IN_STEP;
    use crate::context::MultiGpuContext;
    use crate::domain::{self, Boundary, Options};
    use crate::options::ContextOptions;

    /// A panic in a host band step fails the host device; lavapipe alone finishes the run
    /// from the caller's grid, with lavapipe's bits.
    #[test]
    fn a_panicking_host_step_is_a_failure_of_the_host_device() {
        let open = |backends: &[&str]| {
            MultiGpuContext::new(ContextOptions {
                backends: Some(backends.iter().map(|b| b.to_string()).collect()),
                ..Default::default()
            })
            .expect("context opens")
        };
        let (h, w) = (29, 19);
        let grid: Vec<f32> = (0..h * w)
            .map(|i| ((i * 37) % 101) as f32 / 101.0)
            .collect();
        let opts = Options {
            steps: 5,
            halo: 2,
            rebalance: false,
            split: None,
        };
        let (want, _) = domain::heat(
            &open(&["vulkan"]),
            &grid,
            h,
            w,
            0.2,
            Boundary::Dirichlet,
            &opts,
        )
        .expect("lavapipe runs");
        let ctx = open(&["vulkan", "host"]);
        let split = Options {
            split: Some(vec![14, 15]),
            ..opts
        };
        PANIC_IN_STEP.store(true, Ordering::SeqCst);
        let (got, report) = domain::heat(&ctx, &grid, h, w, 0.2, Boundary::Dirichlet, &split)
            .expect("the run recovers");
        assert!(!PANIC_IN_STEP.load(Ordering::SeqCst), "the host stepped");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
        let (device, reason) = &report.failures[0];
        assert_eq!(*device, 1);
        assert!(reason.contains("a host band step panicked"), "{reason}");
        assert!(!ctx.health()[1].1);
    }
}
