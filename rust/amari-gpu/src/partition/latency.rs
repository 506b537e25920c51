//! The latency partitioner: the smallest makespan the model allows, per-chunk launch costs
//! and transfers included, found by a binary search on the makespan over the number of busy
//! members of each group.

use super::improve::improve;
use super::problem::Problem;

/// Passes over the groups revisiting the searched choice of members (see `searched`).
const REVISITS: usize = 3;

/// Latency-optimal counts: the searched split, or, when the proportional or equal split
/// happens to be quicker (the choice of devices is a search, not an exhaustion), that one.
pub(crate) fn counts(p: &Problem) -> Vec<u64> {
    let everyone = vec![true; p.devs.len()];
    let mut best = searched(p);
    let mut best_time = p.makespan(&best);
    // The first of equals wins, so ties keep the searched split.
    for c in [
        super::capability::counts(p, &everyone),
        super::balanced::counts(p),
    ] {
        let t = p.makespan(&c);
        if t < best_time {
            (best, best_time) = (c, t);
        }
    }
    best
}

/// Per group, how many members to run and which: for a candidate makespan each group
/// independently takes the number of busy members, and the members, that finish the most
/// whole chunks within it (more members share the hardware and pay more launches, so the
/// best number lies anywhere from one to all of them, and with members of unequal speeds
/// the quickest are not always the ones to keep). The smallest makespan whose chunks fit
/// is found by a binary search; the counts over the members chosen are then exact.
fn searched(p: &Problem) -> Vec<u64> {
    let n = p.n_chunks;
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); p.n_groups];
    for (i, d) in p.devs.iter().enumerate() {
        groups[d.group].push(i);
    }
    // per_chunk[i][k - 1]: a full chunk on device i while k members of its group are busy.
    // Treating the short last chunk as full only makes the search a little conservative.
    let per_chunk: Vec<Vec<f64>> = (0..p.devs.len())
        .map(|i| {
            let members = groups[p.devs[i].group].len();
            (1..=members)
                .map(|k| p.seconds(i, p.chunk_items, 1, k))
                .collect()
        })
        .collect();
    let fits = |i: usize, k: usize, t: f64| ((t / per_chunk[i][k - 1]).floor() as u64).min(n);
    // by_speed[g][k - 1]: the members of group g, quickest first at k busy (lowest index
    // among equals): within any makespan the k that finish the most chunks are its first k.
    // last_among_equals: the same with the highest index first among equals, since the
    // device holding the grid's short last chunk (the highest index with work) can matter.
    let order_by = |g: &Vec<usize>, k: usize, low_first: bool| {
        let mut order = g.clone();
        order.sort_by(|&a, &b| {
            let ids = if low_first { a.cmp(&b) } else { b.cmp(&a) };
            per_chunk[a][k - 1]
                .total_cmp(&per_chunk[b][k - 1])
                .then(ids)
        });
        order
    };
    let by_speed: Vec<Vec<Vec<usize>>> = groups
        .iter()
        .map(|g| (1..=g.len()).map(|k| order_by(g, k, true)).collect())
        .collect();
    let last_among_equals: Vec<Vec<Vec<usize>>> = groups
        .iter()
        .map(|g| (1..=g.len()).map(|k| order_by(g, k, false)).collect())
        .collect();
    // The best number of busy members of group g within `t`, and the chunks they finish
    // (fewest members among equals).
    let choose = |g: usize, t: f64| -> (u64, usize) {
        let mut best = (0u64, 0usize);
        for (k, order) in (1..).zip(&by_speed[g]) {
            let total = order[..k]
                .iter()
                .fold(0u64, |s, &i| s.saturating_add(fits(i, k, t)));
            if total > best.0 {
                best = (total, k);
            }
        }
        best
    };
    let capacity = |t: f64| (0..p.n_groups).fold(0u64, |s, g| s.saturating_add(choose(g, t).0));
    let fastest = (0..p.devs.len())
        .map(|i| per_chunk[i][0])
        .fold(f64::INFINITY, f64::min);
    // Everything on the fastest device alone is feasible; the margin absorbs division
    // rounding.
    let (mut lo, mut hi) = (0.0f64, n as f64 * fastest * (1.0 + 1e-12));
    while hi - lo > hi * 1e-12 {
        let mid = 0.5 * (lo + hi);
        if capacity(mid) >= n {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // The search counts every chunk full; the grid's short last chunk, counted exactly by
    // `fill`, can change the best number of members of a group (a last chunk of a few items
    // is not worth another device) or which of equal members to run (the highest index
    // holds it). So each group's choice is revisited, one group at a time, while that
    // shortens the plan (a few passes: the search is close).
    let mut busy: Vec<usize> = (0..p.n_groups).map(|g| choose(g, hi).1).collect();
    let mut high = vec![false; p.n_groups];
    let set_of = |busy: &[usize], high: &[bool]| {
        let mut set = vec![false; p.devs.len()];
        for (g, &k) in busy.iter().enumerate().filter(|&(_, &k)| k > 0) {
            let orders = if high[g] {
                &last_among_equals
            } else {
                &by_speed
            };
            orders[g][k - 1][..k].iter().for_each(|&i| set[i] = true);
        }
        set
    };
    let mut set = set_of(&busy, &high);
    let mut counts = fill(p, &set);
    let mut time = p.makespan(&counts);
    let mut best = (busy.clone(), high.clone());
    // Sets already filled: the same set comes up again from other groups and passes.
    let mut seen = vec![set.clone()];
    for _ in 0..REVISITS {
        let mut improved = false;
        for g in 0..p.n_groups {
            for (k, h) in (0..=groups[g].len()).flat_map(|k| [(k, false), (k, true)]) {
                (busy, high) = best.clone();
                (busy[g], high[g]) = (k, h);
                let other = set_of(&busy, &high);
                if seen.contains(&other) || !other.contains(&true) {
                    continue;
                }
                seen.push(other.clone());
                let c = fill(p, &other);
                let t = p.makespan(&c);
                if t < time {
                    (set, counts, time, improved) = (other, c, t, true);
                    best = (busy.clone(), high.clone());
                }
            }
        }
        if !improved {
            break;
        }
    }
    let limit: Vec<u64> = set.iter().map(|&s| if s { u64::MAX } else { 0 }).collect();
    improve(p, &mut counts, &limit);
    counts
}

/// The best of [`fill_exact`] over the prefixes of `set` (its members up to each of them):
/// the short last chunk goes to the highest index with work, and which member holds it can
/// be what pays for running the members after it, or not.
fn fill(p: &Problem, set: &[bool]) -> Vec<u64> {
    let mut best: Option<(Vec<u64>, f64)> = None;
    let mut prefix = set.to_vec();
    while let Some(last) = prefix.iter().rposition(|&s| s) {
        let counts = fill_exact(p, &prefix);
        let t = p.makespan(&counts);
        if best.as_ref().is_none_or(|b| t < b.1) {
            best = Some((counts, t));
        }
        prefix[last] = false;
    }
    best.map_or_else(|| vec![0; set.len()], |b| b.0)
}

/// The smallest-makespan counts over the devices in `set` (at least one), exact under the
/// model: with the set fixed, the sharing in each group and the holder of the grid's short
/// last chunk (the highest device index) are fixed and each device's time grows with its
/// count, so the least makespan is the n-th smallest of all the devices' times for 1, 2, …
/// chunks. It is found from the continuous relaxation (which no device's whole chunks beat)
/// by adding the quickest next chunk at most once per device, so the cost does not depend on
/// the number of chunks. Devices left with nothing then only make the others quicker (less
/// sharing, and the short chunk moves to a device that then holds fewer items).
fn fill_exact(p: &Problem, set: &[bool]) -> Vec<u64> {
    let n = p.n_chunks;
    let members: Vec<usize> = (0..p.devs.len()).filter(|&i| set[i]).collect();
    let mut sharing = vec![0usize; p.n_groups];
    members.iter().for_each(|&i| sharing[p.devs[i].group] += 1);
    let last = members[members.len() - 1];
    let time = |i: usize, c: u64| {
        let short = if i == last { p.deficit } else { 0 };
        let items = (c as u128 * p.chunk_items as u128).saturating_sub(short as u128) as u64;
        p.seconds(i, items, c, sharing[p.devs[i].group])
    };
    // time(i, c) = c * per_chunk - saved (the short chunk's missing items, on its holder).
    let per_chunk = |i: usize| time(i, 2) - time(i, 1);
    let saved = |i: usize| (per_chunk(i) - time(i, 1)).max(0.0);
    // Most chunks device i finishes within t: the closed form, corrected by a step either
    // way for rounding.
    let fits = |i: usize, t: f64| {
        let mut c = ((t + saved(i)) / per_chunk(i)).floor().clamp(0.0, n as f64) as u64;
        while c > 0 && time(i, c) > t {
            c -= 1;
        }
        while c < n && time(i, c + 1) <= t {
            c += 1;
        }
        c
    };
    let rates: f64 = members.iter().map(|&i| 1.0 / per_chunk(i)).sum();
    let relaxed = (n as f64
        - members
            .iter()
            .map(|&i| saved(i) / per_chunk(i))
            .sum::<f64>())
        / rates;
    let mut counts = vec![0u64; p.devs.len()];
    for &i in &members {
        counts[i] = fits(i, relaxed);
    }
    let mut total = members
        .iter()
        .fold(0u64, |s, &i| s.saturating_add(counts[i]));
    while total < n {
        let next = members
            .iter()
            .copied()
            .filter(|&i| counts[i] < n)
            .min_by(|&a, &b| {
                time(a, counts[a] + 1)
                    .total_cmp(&time(b, counts[b] + 1))
                    .then(a.cmp(&b))
            });
        let Some(i) = next else { break };
        counts[i] += 1;
        total += 1;
    }
    // Rounding can let the relaxation hold more than the grid: then the slowest-finishing
    // chunks go.
    while total > n {
        let slowest = members
            .iter()
            .copied()
            .filter(|&i| counts[i] > 0)
            .max_by(|&a, &b| {
                time(a, counts[a])
                    .total_cmp(&time(b, counts[b]))
                    .then(b.cmp(&a))
            });
        let Some(i) = slowest else { break };
        counts[i] -= 1;
        total -= 1;
    }
    let least = members
        .iter()
        .filter(|&&i| counts[i] > 0)
        .map(|&i| time(i, counts[i]))
        .fold(0.0, f64::max);
    // Within that makespan, fill the most capable first: devices left with nothing make
    // the others quicker.
    let mut order: Vec<(u64, usize)> = members.iter().map(|&i| (fits(i, least), i)).collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    counts.iter_mut().for_each(|c| *c = 0);
    let mut remaining = n;
    for &(fit, i) in &order {
        let take = fit.min(remaining);
        counts[i] = take;
        remaining -= take;
    }
    // Only rounding beyond f64's integer range can leave chunks over.
    counts[order[0].1] += remaining;
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
