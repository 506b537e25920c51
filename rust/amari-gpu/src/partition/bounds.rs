//! The lower bound plans are judged against, and the efficiency figure derived from it.

use super::problem::Problem;

/// No plan can beat the larger of two limits: all groups streaming at the most their
/// members can do together under the model, with no launch cost, and one chunk (with its
/// launch) on the quickest device.
pub(crate) fn lower_bound(p: &Problem) -> f64 {
    let items = p.workload.items;
    if items == 0 {
        return 0.0;
    }
    // Members of a group share one piece of hardware: with k of them busy each runs its
    // sharing factor slower than alone, so the group's best is its k quickest members at
    // that pace, for the best k (one member alone when sharing gains nothing).
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); p.n_groups];
    for (i, d) in p.devs.iter().enumerate() {
        members[d.group].push(i);
    }
    let mut group_ips = vec![0.0f64; p.n_groups];
    for (g, m) in members.iter().enumerate() {
        for k in 1..=m.len() {
            let mut rates: Vec<f64> = m
                .iter()
                .map(|&i| p.devs[i].ips() / p.devs[i].model.sharing_factor(k))
                .collect();
            rates.sort_by(|a, b| b.total_cmp(a));
            group_ips[g] = group_ips[g].max(rates[..k].iter().sum());
        }
    }
    let throughput: f64 = group_ips.iter().sum();
    let one_chunk = p.chunk_items.min(items);
    let quickest_chunk = p
        .devs
        .iter()
        .map(|d| d.model.seconds(p.workload, one_chunk, 1, 1))
        .fold(f64::INFINITY, f64::min);
    (items as f64 / throughput).max(quickest_chunk)
}

/// `lower_bound / makespan`, capped at 1 so rounding cannot report a plan beating its bound.
pub(crate) fn efficiency(lower_bound_s: f64, makespan_s: f64) -> f64 {
    if makespan_s <= 0.0 {
        1.0
    } else {
        (lower_bound_s / makespan_s).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{dev, work};
    use super::super::problem::Problem;
    use super::*;

    #[test]
    fn groups_count_once_at_their_fastest_member() {
        let w = work(1 << 20);
        // Two logical devices of one adapter plus a separate one of the same speed: the
        // bound is the work over two devices' throughput, not three.
        let models = [dev(0, 0, 1e10), dev(1, 0, 1e10), dev(2, 1, 1e10)];
        let p = Problem::new(&w, 1 << 10, &models).unwrap();
        let spi = models[0].seconds_per_item(&w);
        let expected = (1u64 << 20) as f64 * spi / 2.0;
        assert!((lower_bound(&p) - expected).abs() <= expected * 1e-12);
    }

    #[test]
    fn unequal_members_count_at_their_own_speed() {
        // Two members of one group, one twice the other's speed, running together as fast
        // as apart (speedup 2): the group streams at the sum of the two, not at twice the
        // faster one (which no split can reach).
        let w = work(1 << 20);
        let mut models = [dev(0, 0, 2e10), dev(1, 0, 1e10)];
        for m in &mut models {
            (m.group_speedup, m.group_members) = (2.0, 2);
        }
        let p = Problem::new(&w, 1 << 10, &models).unwrap();
        let ips = [models[0].items_per_s(&w), models[1].items_per_s(&w)];
        let expected = (1u64 << 20) as f64 / (ips[0] + ips[1]);
        assert!((lower_bound(&p) - expected).abs() <= expected * 1e-12);
        // A speedup of 1 (sharing gains nothing): the faster member alone.
        for m in &mut models {
            m.group_speedup = 1.0;
        }
        let p = Problem::new(&w, 1 << 10, &models).unwrap();
        let expected = (1u64 << 20) as f64 / ips[0];
        assert!((lower_bound(&p) - expected).abs() <= expected * 1e-12);
    }

    #[test]
    fn one_chunk_bounds_tiny_problems() {
        let w = work(100);
        let models = [dev(0, 0, 1e10), dev(1, 1, 1e10)];
        let p = Problem::new(&w, 1 << 10, &models).unwrap();
        assert_eq!(lower_bound(&p), models[0].seconds(&w, 100, 1, 1));
    }

    #[test]
    fn efficiency_is_one_for_nothing_to_do() {
        assert_eq!(efficiency(0.0, 0.0), 1.0);
        assert_eq!(efficiency(1.0, 2.0), 0.5);
    }
}
