//! The memory partitioner: capability shares capped by each device's memory budget, the
//! overflow spread over the devices with room in proportion to their speeds.

use super::apportion::apportion;
use super::capability::effective_speeds;
use super::improve::improve;
use super::problem::Problem;

/// Whole chunks each device's budget holds, inputs and outputs together (`u64::MAX` when
/// unlimited). Counting whole chunks keeps the short last chunk on the safe side.
pub(crate) fn caps(p: &Problem) -> Vec<u64> {
    let bytes_per_item = p.workload.bytes_in_per_item + p.workload.bytes_out_per_item;
    let chunk_bytes = bytes_per_item * p.chunk_items as f64;
    p.devs
        .iter()
        .map(|d| match d.model.memory_budget_bytes {
            Some(budget) if chunk_bytes > 0.0 => {
                let budget = budget as f64;
                let cap = (budget / chunk_bytes).floor() as u64;
                // The division may round up onto a boundary the product then exceeds.
                cap - u64::from(cap > 0 && cap as f64 * chunk_bytes > budget)
            }
            _ => u64::MAX,
        })
        .collect()
}

/// Memory-capped counts over every eligible device.
pub(crate) fn counts(p: &Problem) -> Vec<u64> {
    let caps = caps(p);
    let speeds = effective_speeds(p, &vec![true; p.devs.len()]);
    let capacity = caps.iter().fold(0u64, |s, &c| s.saturating_add(c));
    if capacity >= p.n_chunks {
        let mut counts = apportion(p.n_chunks, &speeds, &caps);
        improve(p, &mut counts, &caps);
        return counts;
    }
    // The budgets cannot hold the problem (so none is unlimited): each device streams its
    // share through its budget in rounds, and shares in proportion to budgets give every
    // device about the same number of rounds.
    let budgets: Vec<f64> = p
        .devs
        .iter()
        .map(|d| d.model.memory_budget_bytes.unwrap_or(0) as f64)
        .collect();
    let weights = if budgets.iter().sum::<f64>() > 0.0 {
        budgets
    } else {
        speeds
    };
    apportion(p.n_chunks, &weights, &vec![u64::MAX; p.devs.len()])
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{check, chunks, dev, work};
    use crate::partition::plan;
    use crate::plan::Strategy;

    /// Bytes of one 1024-item chunk of `work` (32 in + 16 out per item).
    const CHUNK_BYTES: u64 = 1024 * 48;

    #[test]
    fn a_small_budget_caps_the_fast_device() {
        let mut models = [dev(0, 0, 1e12), dev(1, 1, 1e10)];
        models[0].memory_budget_bytes = Some(10 * CHUNK_BYTES + 100);
        let plan = plan(&work(100 * 1024), 1024, &models, Strategy::Memory).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(0, 10), (1, 90)]);
        assert!(plan.assignments[0].items as f64 * 48.0 <= (10 * CHUNK_BYTES + 100) as f64);
        assert_eq!(
            (plan.strategy, plan.requested),
            (Strategy::Memory, Strategy::Memory)
        );
    }

    #[test]
    fn overflow_goes_to_the_devices_with_room_by_speed() {
        let mut models = [dev(0, 0, 1e12), dev(1, 1, 2e11), dev(2, 2, 1e11)];
        models[0].memory_budget_bytes = Some(4 * CHUNK_BYTES);
        let plan = plan(&work(1000 * 1024), 1024, &models, Strategy::Memory).unwrap();
        check(&plan);
        let c = chunks(&plan);
        assert_eq!(c[0], (0, 4));
        let ratio = c[1].1 as f64 / c[2].1 as f64;
        assert!((1.7..2.1).contains(&ratio), "{c:?}");
    }

    #[test]
    fn without_budgets_it_is_capability() {
        let models = [dev(0, 0, 1e12), dev(1, 1, 2e11), dev(2, 2, 1e11)];
        let w = work(1000 * 1024);
        let mem = plan(&w, 1024, &models, Strategy::Memory).unwrap();
        let cap = plan(&w, 1024, &models, Strategy::Capability).unwrap();
        assert_eq!(mem.assignments, cap.assignments);
    }

    #[test]
    fn too_little_memory_splits_by_budget() {
        let mut models = [dev(0, 0, 1e12), dev(1, 1, 1e10)];
        models[0].memory_budget_bytes = Some(CHUNK_BYTES);
        models[1].memory_budget_bytes = Some(3 * CHUNK_BYTES);
        let plan = plan(&work(100 * 1024), 1024, &models, Strategy::Memory).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(0, 25), (1, 75)]);
    }
}
