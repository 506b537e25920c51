//! The local improvement pass: moves chunks off the device that finishes last onto the one
//! that would finish soonest with them, while that shortens the plan.

use super::problem::Problem;

/// Moves tried at most per device: rounding leaves each device at most a chunk or two away
/// from balance, and bulk moves close larger gaps in a step, so a few per device suffice and
/// the pass stays O(devices^2) whatever the number of chunks.
const MOVES_PER_DEVICE: usize = 4;

/// Receivers tried per move, best estimate first: an estimate can miss how a move shifts
/// the grid's short last chunk between devices.
const TRIES: usize = 3;

/// Improves `counts` in place; device `i` never receives beyond `limit[i]` chunks (0 keeps
/// a device out of the plan, `u64::MAX` leaves it free).
pub(crate) fn improve(p: &Problem, counts: &mut [u64], limit: &[u64]) {
    let mut pass = Pass::new(p, counts);
    for _ in 0..MOVES_PER_DEVICE * p.devs.len() + 8 {
        let a = (0..p.devs.len())
            .max_by(|&x, &y| pass.times[x].total_cmp(&pass.times[y]))
            .unwrap_or(0);
        if counts[a] == 0 || !pass.step(counts, limit, a) {
            break;
        }
    }
}

/// Current and trial per-device times and per-group busy counts, reused across moves.
struct Pass<'p, 'a> {
    p: &'p Problem<'a>,
    active: Vec<usize>,
    times: Vec<f64>,
    trial_active: Vec<usize>,
    trial_times: Vec<f64>,
    makespan: f64,
    /// Per group: its busy members' largest time were one more member to join.
    joined: Vec<f64>,
    /// Receivers of the current move: (estimated time after, device, sharing after).
    found: Vec<(f64, usize, usize)>,
}

impl<'p, 'a> Pass<'p, 'a> {
    fn new(p: &'p Problem<'a>, counts: &[u64]) -> Self {
        let (mut active, mut times) = (vec![0; p.n_groups], vec![0.0; p.devs.len()]);
        let makespan = p.times(counts, &mut active, &mut times);
        let (trial_active, trial_times) = (active.clone(), times.clone());
        let (joined, found) = (vec![0.0; p.n_groups], Vec::with_capacity(p.devs.len()));
        Pass {
            p,
            active,
            times,
            trial_active,
            trial_times,
            makespan,
            joined,
            found,
        }
    }

    /// Moves chunks off `a` onto the first candidate that shortens the plan, if any does.
    fn step(&mut self, counts: &mut [u64], limit: &[u64], a: usize) -> bool {
        let p = self.p;
        let per_chunk = |i: usize, sharing: usize| p.seconds(i, p.chunk_items, 1, sharing);
        let ct_a = per_chunk(a, self.active[p.devs[a].group]);
        self.candidates(counts, limit, a);
        for _ in 0..TRIES {
            // Best estimate first; usually the first one tried is taken.
            let Some(best) =
                (0..self.found.len()).min_by(|&x, &y| self.found[x].0.total_cmp(&self.found[y].0))
            else {
                break;
            };
            let (_, b, sharing_b) = self.found.swap_remove(best);
            // Close the gap in one move when it spans many chunks, then fall back to one.
            let gap = (self.times[a] - self.times[b]) / (ct_a + per_chunk(b, sharing_b));
            let bulk = (gap.floor().max(1.0) as u64)
                .min(counts[a])
                .min(limit[b] - counts[b]);
            if self.try_move(counts, a, b, bulk) || (bulk > 1 && self.try_move(counts, a, b, 1)) {
                return true;
            }
        }
        false
    }

    /// Fills `found` with the receivers whose estimated time after one more chunk beats
    /// `a`'s. A device joining from idle slows its busy group-mates (one more way to share
    /// the hardware), so that slowdown is part of its estimate.
    fn candidates(&mut self, counts: &[u64], limit: &[u64], a: usize) {
        let p = self.p;
        let g_a = p.devs[a].group;
        let joined = &mut self.joined;
        joined.iter_mut().for_each(|j| *j = 0.0);
        self.found.clear();
        for (i, d) in p.devs.iter().enumerate().filter(|&(i, _)| counts[i] > 0) {
            let s = self.active[d.group] as f64;
            let launches = counts[i] as f64 * d.model.launch_latency_s;
            let slower = launches + (self.times[i] - launches) * (s + 1.0) / s;
            joined[d.group] = joined[d.group].max(slower);
        }
        // Whoever ends up last with work holds the grid's short chunk.
        let others_last = (0..counts.len())
            .rev()
            .find(|&i| counts[i] > u64::from(i == a));
        for b in (0..counts.len()).filter(|&b| b != a && counts[b] < limit[b]) {
            let g_b = p.devs[b].group;
            let sharing = self.active[g_b] + usize::from(counts[b] == 0)
                - usize::from(g_a == g_b && counts[a] == 1);
            let c = counts[b] + 1;
            let short = if others_last.is_none_or(|l| b >= l) {
                p.deficit
            } else {
                0
            };
            let items = c.saturating_mul(p.chunk_items).saturating_sub(short);
            let mut t = p.seconds(b, items, c, sharing);
            if counts[b] == 0 && g_b != g_a {
                t = t.max(joined[g_b]);
            }
            if t < self.times[a] {
                self.found.push((t, b, sharing));
            }
        }
    }

    /// Moves `k` chunks from `a` to `b` and keeps the move if it shortens the plan. Equal
    /// makespan still counts when `a` was one of several devices tied at the maximum and
    /// neither end of the move is there any more.
    fn try_move(&mut self, counts: &mut [u64], a: usize, b: usize, k: u64) -> bool {
        let t_a = self.times[a];
        counts[a] -= k;
        counts[b] += k;
        let m = self
            .p
            .times(counts, &mut self.trial_active, &mut self.trial_times);
        let (ta, tb) = (self.trial_times[a], self.trial_times[b]);
        if m < self.makespan || (m <= self.makespan && ta < t_a && tb < t_a) {
            self.makespan = m;
            std::mem::swap(&mut self.times, &mut self.trial_times);
            std::mem::swap(&mut self.active, &mut self.trial_active);
            return true;
        }
        counts[a] += k;
        counts[b] -= k;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{dev, work};
    use super::*;

    #[test]
    fn moves_chunks_off_a_slow_latency() {
        let w = work(1 << 20);
        let mut models = [dev(0, 0, 1e11), dev(1, 1, 1e11)];
        // Device 0's launch costs ten times its chunk's work, so it should keep few chunks.
        models[0].launch_latency_s = 1e-3;
        let p = Problem::new(&w, 1 << 10, &models).unwrap();
        let mut counts = vec![512, 512];
        let before = p.makespan(&counts);
        improve(&p, &mut counts, &[u64::MAX; 2]);
        assert_eq!(counts.iter().sum::<u64>(), 1024);
        assert!(counts[0] < counts[1], "{counts:?}");
        assert!(p.makespan(&counts) < before * 0.7);
    }

    #[test]
    fn respects_limits() {
        let w = work(1 << 20);
        let models = [dev(0, 0, 1e11), dev(1, 1, 1e9)];
        let p = Problem::new(&w, 1 << 10, &models).unwrap();
        let mut counts = vec![0, 1024];
        improve(&p, &mut counts, &[10, u64::MAX]);
        assert_eq!(counts, vec![10, 1014]);
    }
}
