//! The capability partitioner (also the adaptive strategy's prediction): chunk counts in
//! proportion to each device's effective speed, then polished by the improvement pass.

use super::apportion::apportion;
use super::improve::improve;
use super::problem::Problem;

/// Effective speeds of the devices in `members` (0 for the others): a device's items per
/// second divided among the members of its group, which all run at once on one piece of
/// hardware and so each get their share of it.
pub(crate) fn effective_speeds(p: &Problem, members: &[bool]) -> Vec<f64> {
    let mut per_group = vec![0usize; p.n_groups];
    for (d, _) in p.devs.iter().zip(members).filter(|(_, &m)| m) {
        per_group[d.group] += 1;
    }
    p.devs
        .iter()
        .zip(members)
        .map(|(d, &m)| {
            if m {
                d.ips() / per_group[d.group] as f64
            } else {
                0.0
            }
        })
        .collect()
}

/// Capability counts over the devices in `members`; the others get nothing.
pub(crate) fn counts(p: &Problem, members: &[bool]) -> Vec<u64> {
    let limit: Vec<u64> = members
        .iter()
        .map(|&m| if m { u64::MAX } else { 0 })
        .collect();
    let mut counts = apportion(p.n_chunks, &effective_speeds(p, members), &limit);
    improve(p, &mut counts, &limit);
    counts
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{check, chunks, dev, work};
    use crate::partition::plan;
    use crate::plan::Strategy;

    #[test]
    fn twice_as_fast_takes_twice_as_much() {
        let models = [dev(0, 0, 2e11), dev(1, 1, 1e11)];
        let plan = plan(&work(3 << 20), 1 << 12, &models, Strategy::Capability).unwrap();
        check(&plan);
        let c = chunks(&plan);
        assert_eq!(c[0].1 + c[1].1, 768);
        // Speeds 2:1 apart from the bus; the split follows within a chunk or two.
        let ratio = c[0].1 as f64 / c[1].1 as f64;
        assert!((1.8..2.05).contains(&ratio), "{c:?}");
        assert!(plan.efficiency > 0.95, "{plan:?}");
    }

    #[test]
    fn two_devices_of_one_adapter_each_take_half_its_share() {
        // Devices 0 and 1 share one adapter as fast as device 2: together they match it.
        let mut models = [dev(0, 7, 1e11), dev(1, 7, 1e11), dev(2, 3, 1e11)];
        // Without launch costs the proportional split is exactly balanced.
        models.iter_mut().for_each(|m| m.launch_latency_s = 0.0);
        let plan = plan(&work(1 << 22), 1 << 12, &models, Strategy::Capability).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(0, 256), (1, 256), (2, 512)]);
        assert!(plan.efficiency > 0.99, "{plan:?}");
    }

    #[test]
    fn adaptive_predicts_the_capability_split() {
        let models = [dev(0, 0, 3e11), dev(1, 1, 1e11), dev(2, 2, 5e10)];
        let w = work(1 << 22);
        let cap = plan(&w, 1 << 12, &models, Strategy::Capability).unwrap();
        let ada = plan(&w, 1 << 12, &models, Strategy::Adaptive).unwrap();
        assert_eq!(cap.assignments, ada.assignments);
        assert_eq!(
            (ada.strategy, ada.requested),
            (Strategy::Adaptive, Strategy::Adaptive)
        );
    }

    #[test]
    fn ineligible_devices_get_nothing() {
        let mut models = [dev(0, 0, 1e11), dev(1, 1, 1e12)];
        models[1].max_binding_bytes = 1 << 10;
        let plan = plan(&work(1 << 20), 1 << 12, &models, Strategy::Capability).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(0, 256)]);
    }
}
