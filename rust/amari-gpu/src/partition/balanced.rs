//! The balanced partitioner: equal numbers of chunks on every eligible device.

use super::problem::Problem;

/// Equal chunk counts (differing by at most one, the extras on the lowest device ids).
pub(crate) fn counts(p: &Problem) -> Vec<u64> {
    let d = p.devs.len() as u64;
    let (base, extra) = (p.n_chunks / d, p.n_chunks % d);
    (0..d).map(|i| base + u64::from(i < extra)).collect()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{check, chunks, dev, work};
    use crate::partition::plan;
    use crate::plan::Strategy;

    #[test]
    fn equal_counts_whatever_the_speeds() {
        let models = [dev(4, 0, 1e12), dev(1, 1, 1e9), dev(2, 2, 1e10)];
        // 10 chunks, the last one short: the extra chunk goes to the lowest id.
        let plan = plan(&work(9 * 1024 + 5), 1024, &models, Strategy::Balanced).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(1, 4), (2, 3), (4, 3)]);
        assert_eq!(plan.assignments[2].items, 2 * 1024 + 5);
        assert_eq!(
            (plan.strategy, plan.requested),
            (Strategy::Balanced, Strategy::Balanced)
        );
    }

    #[test]
    fn fewer_chunks_than_devices() {
        let models = [dev(0, 0, 1e10), dev(1, 1, 1e10), dev(2, 2, 1e10)];
        let plan = plan(&work(1500), 1024, &models, Strategy::Balanced).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(0, 1), (1, 1)]);
    }

    #[test]
    fn shared_hardware_is_slower_per_device() {
        let models = [dev(0, 0, 1e10), dev(1, 0, 1e10)];
        let w = work(8 * 1024);
        let plan = plan(&w, 1024, &models, Strategy::Balanced).unwrap();
        check(&plan);
        // Both run at once on one adapter, each at half speed.
        assert_eq!(
            plan.assignments[0].estimated_seconds,
            models[0].seconds(&w, 4096, 4, 2)
        );
    }
}
