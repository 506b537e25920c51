//! Partitioners: turn a workload, the chunk grid and the device models into a [`Plan`].
//! Pure functions of their inputs, so they are tested and benchmarked without a GPU.
//!
//! Every strategy decides only how many whole chunks each eligible device takes (counts,
//! never per-chunk lists, so planning costs the same for a thousand chunks or a million);
//! `layout` then lays the counts out as contiguous runs in device-id order and attaches the
//! model's estimates.

pub(crate) mod apportion;
mod auto;
mod balanced;
mod bounds;
mod capability;
mod improve;
mod latency;
mod layout;
mod memory;
mod problem;

#[cfg(test)]
pub(crate) mod fixtures;

use crate::error::Result;
use crate::model::DeviceModel;
use crate::plan::{Plan, Strategy};
use crate::workload::Workload;

/// Decides a plan for `workload` cut into chunks of `chunk_items` items over `models`
/// (one per healthy device) with `strategy`.
///
/// Devices whose binding limit cannot hold a chunk get nothing. Fails on an invalid
/// workload, `chunk_items == 0`, no models, or no device able to take a chunk.
pub fn plan(
    workload: &Workload,
    chunk_items: u64,
    models: &[DeviceModel],
    strategy: Strategy,
) -> Result<Plan> {
    problem::validate(workload, chunk_items, models)?;
    if workload.items == 0 {
        return Ok(layout::empty(chunk_items, strategy));
    }
    let p = problem::Problem::new(workload, chunk_items, models)?;
    let (chosen, counts) = match strategy {
        Strategy::Balanced => (strategy, balanced::counts(&p)),
        Strategy::Capability | Strategy::Adaptive => {
            (strategy, capability::counts(&p, &vec![true; p.devs.len()]))
        }
        Strategy::Memory => (strategy, memory::counts(&p)),
        Strategy::Latency => (strategy, latency::counts(&p)),
        Strategy::Auto => auto::choose(&p),
    };
    Ok(p.finish(&counts, chosen, strategy))
}

#[cfg(test)]
mod tests {
    use super::fixtures::{dev, work};
    use super::*;
    use crate::error::Error;

    #[test]
    fn empty_workload_plans_nothing() {
        for strategy in Strategy::ALL {
            let plan = plan(&work(0), 1024, &[dev(0, 0, 1e10)], strategy).unwrap();
            assert!(plan.assignments.is_empty());
            assert_eq!((plan.n_chunks, plan.efficiency), (0, 1.0));
            assert_eq!(plan.estimated_makespan_s, 0.0);
            assert_ne!(plan.strategy, Strategy::Auto);
        }
    }

    #[test]
    fn rejects_bad_arguments() {
        let models = [dev(0, 0, 1e10)];
        let err = plan(&work(10), 0, &models, Strategy::Balanced).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { ref argument, .. } if argument == "chunk_items")
        );
        let err = plan(&work(10), 16, &[], Strategy::Balanced).unwrap_err();
        assert!(matches!(err, Error::NoAdapter(_)));
        let mut bad = work(10);
        bad.flops_per_item = f64::NAN;
        assert!(plan(&bad, 16, &models, Strategy::Balanced).is_err());
        let mut broken = models.clone();
        broken[0].flops_per_s = 0.0;
        assert!(plan(&work(10), 16, &broken, Strategy::Balanced).is_err());
    }

    #[test]
    fn a_chunk_no_device_can_bind_is_an_error() {
        let mut models = [dev(0, 0, 1e10), dev(1, 1, 1e10)];
        models[0].max_binding_bytes = 1 << 20;
        models[1].max_binding_bytes = 1 << 21;
        // 2^16 items of 32 input bytes bind exactly 2 MiB: device 1's limit, inclusive.
        assert!(plan(&work(1 << 20), 1 << 16, &models, Strategy::Balanced).is_ok());
        let err = plan(&work(1 << 20), 1 << 17, &models, Strategy::Balanced).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("4194304 bytes") && text.contains("2097152"),
            "{text}"
        );
    }
}
