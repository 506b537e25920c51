//! The latency partitioner: the smallest makespan the model allows, per-chunk launch costs
//! and transfers included, found by a binary search on the makespan.

use super::improve::improve;
use super::problem::Problem;

/// The fastest eligible member of each group (the lowest id among equals): the candidate set
/// when running more members of one piece of hardware together gains too little to pay for
/// their launches.
pub(crate) fn representatives(p: &Problem) -> Vec<bool> {
    let mut best: Vec<Option<usize>> = vec![None; p.n_groups];
    for (i, d) in p.devs.iter().enumerate() {
        let slot = &mut best[d.group];
        if slot.is_none_or(|j| d.spi < p.devs[j].spi) {
            *slot = Some(i);
        }
    }
    let mut reps = vec![false; p.devs.len()];
    best.into_iter().flatten().for_each(|i| reps[i] = true);
    reps
}

/// Latency-optimal counts: the best of the searched candidates — one device per group, or
/// every eligible device (worth it when a group's measured speedup pays for the extra
/// launches) — and, since both searches are heuristics, the proportional and equal splits.
pub(crate) fn counts(p: &Problem) -> Vec<u64> {
    let reps = representatives(p);
    let everyone = vec![true; p.devs.len()];
    let mut candidates = vec![counts_over(p, &reps)];
    if !reps.iter().all(|&r| r) {
        candidates.push(counts_over(p, &everyone));
    }
    candidates.push(super::capability::counts(p, &everyone));
    candidates.push(super::balanced::counts(p));
    // The first of equals wins, so ties keep the one-per-group search.
    let mut best = candidates.swap_remove(0);
    let mut best_time = p.makespan(&best);
    for c in candidates {
        let t = p.makespan(&c);
        if t < best_time {
            (best, best_time) = (c, t);
        }
    }
    best
}

/// Counts over the devices in `set`, each as many whole chunks as fit the smallest feasible
/// makespan, most capable first.
fn counts_over(p: &Problem, reps: &[bool]) -> Vec<u64> {
    let n = p.n_chunks;
    let mut members = vec![0usize; p.n_groups];
    for (i, d) in p.devs.iter().enumerate() {
        members[d.group] += usize::from(reps[i]);
    }
    // A full chunk while every member of the set in its group is busy; treating the short
    // last chunk as full only makes the search a little conservative, and the improvement
    // pass sees the exact costs.
    let per_chunk: Vec<f64> = (0..p.devs.len())
        .map(|i| p.seconds(i, p.chunk_items, 1, members[p.devs[i].group]))
        .collect();
    let fits = |i: usize, t: f64| ((t / per_chunk[i]).floor() as u64).min(n);
    let capacity = |t: f64| {
        (0..p.devs.len())
            .filter(|&i| reps[i])
            .fold(0u64, |s, i| s.saturating_add(fits(i, t)))
    };
    let fastest = (0..p.devs.len())
        .filter(|&i| reps[i])
        .map(|i| per_chunk[i])
        .fold(f64::INFINITY, f64::min);
    // Everything on the fastest device is feasible; the margin absorbs division rounding.
    let (mut lo, mut hi) = (0.0f64, n as f64 * fastest * (1.0 + 1e-12));
    while hi - lo > hi * 1e-12 {
        let mid = 0.5 * (lo + hi);
        if capacity(mid) >= n {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut order: Vec<usize> = (0..p.devs.len()).filter(|&i| reps[i]).collect();
    order.sort_by(|&a, &b| per_chunk[a].total_cmp(&per_chunk[b]).then(a.cmp(&b)));
    let mut counts = vec![0u64; p.devs.len()];
    let mut remaining = n;
    for &i in &order {
        let take = fits(i, hi).min(remaining);
        counts[i] = take;
        remaining -= take;
    }
    // Only rounding beyond f64's integer range can leave chunks over.
    counts[order[0]] += remaining;
    let limit: Vec<u64> = reps.iter().map(|&r| if r { u64::MAX } else { 0 }).collect();
    improve(p, &mut counts, &limit);
    counts
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{check, chunks, dev, devs, work};
    use crate::partition::plan;
    use crate::plan::Strategy;

    #[test]
    fn a_device_whose_launch_outweighs_its_share_gets_nothing() {
        let mut models = [dev(0, 0, 1e11), dev(1, 1, 1e11)];
        models[1].launch_latency_s = 1.0;
        let w = work(1 << 20);
        let plan = plan(&w, 1 << 12, &models, Strategy::Latency).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(0, 256)]);
        let cap = super::super::plan(&w, 1 << 12, &models, Strategy::Capability).unwrap();
        assert!(plan.estimated_makespan_s <= cap.estimated_makespan_s);
    }

    #[test]
    fn near_the_bound_when_launches_are_cheap() {
        let models = devs([(0, 1e12), (1, 3e11), (2, 1e11), (3, 1e10)]);
        // Launches cost about 4% of a chunk's work on the fastest device.
        let plan = plan(&work(1 << 24), 1 << 14, &models, Strategy::Latency).unwrap();
        check(&plan);
        assert!(plan.efficiency > 0.95, "{plan:?}");
        assert_eq!(plan.strategy, Strategy::Latency);
    }

    #[test]
    fn one_device_per_adapter() {
        // Devices 0 and 1 share an adapter (1 is faster); device 2 is separate.
        let models = [dev(0, 5, 1e11), dev(1, 5, 2e11), dev(2, 6, 2e11)];
        let plan = plan(&work(1 << 22), 1 << 12, &models, Strategy::Latency).unwrap();
        check(&plan);
        assert_eq!(chunks(&plan), vec![(1, 512), (2, 512)]);
        assert!(plan.efficiency > 0.95, "{plan:?}");
    }

    #[test]
    fn uneven_launch_costs_shift_chunks() {
        let mut models = [dev(0, 0, 1e11), dev(1, 1, 1e11)];
        models[0].launch_latency_s = 2e-4;
        let w = work(1 << 22);
        let lat = plan(&w, 1 << 12, &models, Strategy::Latency).unwrap();
        let cap = plan(&w, 1 << 12, &models, Strategy::Capability).unwrap();
        check(&lat);
        let c = chunks(&lat);
        assert!(c[0].1 < c[1].1, "{c:?}");
        assert!(lat.estimated_makespan_s <= cap.estimated_makespan_s * (1.0 + 1e-12));
    }
}
