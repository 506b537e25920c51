//! The latency partitioner: the smallest makespan the model allows, per-chunk launch costs
//! and transfers included. Exact under the model: a bisection on the makespan finds the least
//! one that some set of busy devices meets, and the counts over that set are then exact.

use super::problem::Problem;

/// Relative width at which the bisection on the makespan stops: far finer than the model's
/// figures, and about 40 halvings from the first bracket.
const TOLERANCE: f64 = 1e-12;

/// Latency-optimal counts: the quickest set of busy devices, filled exactly.
pub(crate) fn counts(p: &Problem) -> Vec<u64> {
    fill_exact(p, &Search::new(p).quickest_set())
}

/// The search for the set of busy devices with the least makespan.
///
/// A set fixes how many members of each group share its hardware and which device holds the
/// grid's short last chunk (the highest index in the set), so neither the quickest members
/// nor the holder can be chosen greedily: a few more members may pay their sharing or not,
/// and a slow device can be worth running last for the short chunk alone. But within a
/// candidate makespan `t`, with the holder fixed, the groups are independent: with k busy
/// members a group finishes the most chunks on the holder (when it is one of them) and the
/// k members before it that each finish the most at that sharing, for the best k. So whether
/// some plan meets `t` is decided exactly by trying each holder, and the least such `t` is
/// found by bisection: the cost grows with the devices, never with the chunks.
struct Search<'p, 'a> {
    p: &'p Problem<'a>,
    /// Members of each group, ascending index.
    groups: Vec<Vec<usize>>,
    /// Per group, row k - 1 for k busy members: the chunks each member finishes within the
    /// candidate makespan, not holding the short chunk.
    fits: Vec<Vec<u64>>,
    /// Per group, row k - 1: positions in `groups[g]` by those chunks, most first.
    order: Vec<Vec<usize>>,
    /// Busy members per group of the last holder tried.
    busy: Vec<usize>,
    /// The devices worth trying as the holder of the short chunk, ascending.
    holders: Vec<usize>,
    /// The first of `holders` that may still meet a makespan the bisection asks about.
    first_holder: usize,
    /// Makespans asked about, and holders tried for them: the search's cost.
    asked: usize,
    tried: usize,
}

impl<'p, 'a> Search<'p, 'a> {
    fn new(p: &'p Problem<'a>) -> Self {
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); p.n_groups];
        for (i, d) in p.devs.iter().enumerate() {
            groups[d.group].push(i);
        }
        let square = |g: &Vec<usize>| g.len() * g.len();
        // A device is no holder worth trying when a later member of its group is as quick
        // at every count and sharing: in any set it would end, that member in its place
        // ends the set too, with the same sharing, and is no slower.
        let dominated = |a: usize| {
            let (da, members) = (&p.devs[a], &groups[p.devs[a].group]);
            members.iter().filter(|&&b| b > a).any(|&b| {
                let db = &p.devs[b];
                db.model.launch_latency_s <= da.model.launch_latency_s
                    && db.spi <= da.spi
                    && (1..=members.len())
                        .all(|k| db.model.sharing_factor(k) <= da.model.sharing_factor(k))
            })
        };
        let holders = (0..p.devs.len()).filter(|&a| !dominated(a)).collect();
        Search {
            p,
            fits: groups.iter().map(|g| vec![0; square(g)]).collect(),
            order: groups.iter().map(|g| vec![0; square(g)]).collect(),
            groups,
            busy: vec![0; p.n_groups],
            holders,
            first_holder: 0,
            asked: 0,
            tried: 0,
        }
    }

    /// The busy devices of a plan with the least makespan: exact when the bracket closes,
    /// else to [`TOLERANCE`].
    ///
    /// The bisection keeps the least makespan within `[lo, hi]` and moves each end past the
    /// midpoint: a plan that meets `mid` ends at the latest of its devices' finishing
    /// times, which becomes `hi`; when none meets `mid`, none meets a makespan before the
    /// next time at which some device finishes one more chunk (what a plan can do changes
    /// only there), which becomes `lo`. The bracket so closes on the optimum once no such
    /// time is left inside it, long before halving would reach the tolerance.
    fn quickest_set(&mut self) -> Vec<bool> {
        let p = self.p;
        // Everything on one device, which then holds the short chunk, is a plan: the
        // quickest such is the first upper bound.
        let alone = |i: usize| p.run_seconds(i, p.n_chunks, 1, true);
        let quickest = (0..p.devs.len())
            .min_by(|&a, &b| alone(a).total_cmp(&alone(b)))
            .unwrap_or(0);
        let (mut lo, mut hi) = (0.0f64, alone(quickest));
        while hi - lo > hi * TOLERANCE {
            let mid = 0.5 * (lo + hi);
            match self.meeting(mid) {
                Some(holder) => hi = self.ends(mid, holder).min(mid),
                None => lo = self.next_change(mid).min(hi),
            }
        }
        let mut set = vec![false; p.devs.len()];
        if let Some(holder) = self.meeting(hi) {
            for g in 0..self.groups.len() {
                let k = self.busy[g];
                for (position, _) in self.taken(g, k, holder) {
                    set[self.groups[g][position]] = true;
                }
                if let Some(h) = holder.filter(|&h| p.devs[h].group == g && k > 0) {
                    set[h] = true;
                }
            }
        }
        // `hi` is always met (the quickest device alone meets its first value); were
        // rounding to say otherwise, that device alone is the plan.
        if !set.contains(&true) {
            set[quickest] = true;
        }
        set
    }

    /// When the plan [`Search::meeting`] just found within `t` (its holder `holder`, its
    /// busy members in `busy`) ends: the latest of its devices' times for the chunks each
    /// finishes within `t`. That plan meets this makespan too.
    fn ends(&self, t: f64, holder: Option<usize>) -> f64 {
        let p = self.p;
        let mut end = 0.0f64;
        for g in 0..self.groups.len() {
            let k = self.busy[g];
            for (position, fit) in self.taken(g, k, holder) {
                end = end.max(p.run_seconds(self.groups[g][position], fit, k, false));
            }
            if let Some(h) = holder.filter(|&h| p.devs[h].group == g && k > 0) {
                end = end.max(p.run_seconds(h, p.chunks_within(h, k, true, t), k, true));
            }
        }
        end
    }

    /// The first time after `t` at which some device, at some sharing, holding the short
    /// chunk or not, finishes one more chunk than within `t` (infinite when each finishes
    /// the whole grid): all [`Search::meeting`] decides from stays the same until then.
    /// Reads the chunks within `t` of the last [`Search::meeting`] call, which was at `t`.
    fn next_change(&self, t: f64) -> f64 {
        let p = self.p;
        let n = p.n_chunks;
        let mut next = f64::INFINITY;
        for (g, members) in self.groups.iter().enumerate() {
            let m = members.len();
            for k in 1..=m {
                for (j, &i) in members.iter().enumerate() {
                    let fit = self.fits[g][(k - 1) * m + j];
                    if fit < n {
                        next = next.min(p.run_seconds(i, fit + 1, k, false));
                    }
                    // Holding the short chunk, a device finishes as many or one more: a run
                    // of c + 1 chunks with it has more items than one of c without.
                    let mut held = fit;
                    while held < n && p.run_seconds(i, held + 1, k, true) <= t {
                        held += 1;
                    }
                    if held < n {
                        next = next.min(p.run_seconds(i, held + 1, k, true));
                    }
                }
            }
        }
        next
    }

    /// The holder of a set of devices that finishes every chunk within `t` (`Some(None)`
    /// when the grid has no short chunk, so no holder matters), its busy members per group
    /// left in `busy`; `None` when no set does.
    ///
    /// Two shortcuts keep the holders tried few, neither changing the answer. Holding the
    /// short chunk lets a set finish at most one chunk more than the same devices without
    /// it (a run of c + 1 chunks with it has more items than one of c without), so when the
    /// best set of any devices, no holder asked, falls more than a chunk short, no holder
    /// can make up for it. And the holders before the one found at a makespan cannot meet
    /// it, nor the shorter ones the bisection asks about next: they are not tried again.
    fn meeting(&mut self, t: f64) -> Option<Option<usize>> {
        let p = self.p;
        self.asked += 1;
        for (g, members) in self.groups.iter().enumerate() {
            let m = members.len();
            for k in 1..=m {
                let fits = &mut self.fits[g][(k - 1) * m..k * m];
                for (f, &i) in fits.iter_mut().zip(members) {
                    *f = p.chunks_within(i, k, false, t);
                }
                let order = &mut self.order[g][(k - 1) * m..k * m];
                order.iter_mut().enumerate().for_each(|(j, o)| *o = j);
                order.sort_unstable_by(|&a, &b| fits[b].cmp(&fits[a]).then(a.cmp(&b)));
            }
        }
        let unheld = self.capacity(t, None);
        if p.deficit == 0 {
            return (unheld >= p.n_chunks).then_some(None);
        }
        if unheld.saturating_add(1) < p.n_chunks {
            return None;
        }
        for j in self.first_holder..self.holders.len() {
            let h = self.holders[j];
            self.tried += 1;
            if self.capacity(t, Some(h)) >= p.n_chunks {
                self.first_holder = j;
                return Some(Some(h));
            }
        }
        None
    }

    /// The most chunks finished within `t` by sets whose highest member is `holder` (any
    /// set for `None`), with the busy members per group in `busy`; 0 when the holder
    /// cannot finish even the short chunk.
    fn capacity(&mut self, t: f64, holder: Option<usize>) -> u64 {
        let p = self.p;
        let mut total = 0u64;
        for g in 0..self.groups.len() {
            let holds = holder.filter(|&h| p.devs[h].group == g);
            let mut best = (0u64, 0usize);
            for k in 1..=self.groups[g].len() {
                let own = match holds {
                    Some(h) => p.chunks_within(h, k, true, t),
                    None => 0,
                };
                if holds.is_some() && own == 0 {
                    // More sharing only slows the holder down.
                    break;
                }
                let others = k - usize::from(holds.is_some());
                let (count, sum) = self
                    .taken(g, k, holder)
                    .fold((0, own), |(c, s), (_, f)| (c + 1, s.saturating_add(f)));
                if count < others {
                    // Fewer members before the holder than asked: more cannot be.
                    break;
                }
                if sum > best.0 {
                    best = (sum, k);
                }
            }
            if holds.is_some() && best.1 == 0 {
                return 0;
            }
            self.busy[g] = best.1;
            total = total.saturating_add(best.0);
        }
        total
    }

    /// The members group `g` runs besides the holder with `k` busy, as (position in the
    /// group, chunks within the candidate makespan): those before the holder (any, for
    /// `None`) that finish the most, as many as there are up to `k` less the holder.
    fn taken(
        &self,
        g: usize,
        k: usize,
        holder: Option<usize>,
    ) -> impl Iterator<Item = (usize, u64)> + '_ {
        let members = &self.groups[g];
        let m = members.len();
        let holds = holder.is_some_and(|h| self.p.devs[h].group == g);
        let row = k.saturating_sub(1) * m;
        let (fits, order) = (&self.fits[g], &self.order[g]);
        order[row..row + m * usize::from(k > 0)]
            .iter()
            .filter(move |&&j| holder.is_none_or(|h| members[j] < h))
            .take(k - usize::from(holds && k > 0))
            .map(move |&j| (j, fits[row + j]))
    }
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
    let time = |i: usize, c: u64| p.run_seconds(i, c, sharing[p.devs[i].group], i == last);
    let fits = |i: usize, t: f64| p.chunks_within(i, sharing[p.devs[i].group], i == last, t);
    // time(i, c) = c * per_chunk - saved (the short chunk's missing items, on its holder).
    let per_chunk = |i: usize| time(i, 2) - time(i, 1);
    let saved = |i: usize| (per_chunk(i) - time(i, 1)).max(0.0);
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
    use super::super::problem::Problem;
    use super::{Search, TOLERANCE};
    use crate::model::DeviceModel;
    use crate::partition::plan;
    use crate::plan::Strategy;

    // Halving from [0, the quickest device alone] to the tolerance asks about at least
    // log2(1 / TOLERANCE) makespans, each trying every holder up to the first that meets
    // it; the search moves both ends of its bracket to where what a plan can do changes,
    // and skips the holders that cannot help. (Its plans' optimality: partition_props.rs.)
    #[test]
    fn the_search_closes_on_the_optimum_before_halving_would_and_tries_few_holders() {
        let halvings = (1.0 / TOLERANCE).log2().floor() as usize;
        for n in [8, 16] {
            // Logical devices of one adapter, each with its own rate and launch cost.
            let models: Vec<DeviceModel> = (0..n)
                .map(|i| DeviceModel {
                    launch_latency_s: 1e-5 * 100f64.powf((i * 7 % n) as f64 / n as f64),
                    group_speedup: 1.5,
                    group_members: n,
                    ..dev(i, 0, 1e10 * 100f64.powf(1.0 - i as f64 / (n - 1) as f64))
                })
                .collect();
            // 10^7 items in chunks of 16384: a short last chunk, so holders matter.
            let w = work(10_000_000);
            let p = Problem::new(&w, 16_384, &models).unwrap();
            let mut search = Search::new(&p);
            assert!(
                p.deficit > 0 && search.holders.len() == n,
                "no member dominated"
            );
            assert!(search.quickest_set().contains(&true));
            assert!(search.asked < halvings, "{} makespans", search.asked);
            assert!(search.tried <= 8 * n, "{} holders tried", search.tried);
        }
    }

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
