//! The local improvement pass: moves chunks off the device that finishes last onto the one
//! that would finish soonest with them, while that shortens the plan.

use super::problem::Problem;

/// Moves tried at most per device: rounding leaves each device at most a chunk or two away
/// from balance, and bulk moves close larger gaps in a step, so a few per device suffice and
/// the pass stays O(devices^2) whatever the number of chunks.
const MOVES_PER_DEVICE: usize = 4;

/// Improves `counts` in place; device `i` never receives beyond `limit[i]` chunks (0 keeps
/// a device out of the plan, `u64::MAX` leaves it free).
pub(crate) fn improve(p: &Problem, counts: &mut [u64], limit: &[u64]) {
    let d = p.devs.len();
    let mut active = vec![0usize; p.n_groups];
    let mut times = vec![0.0f64; d];
    let mut trial_active = active.clone();
    let mut trial_times = times.clone();
    let mut makespan = p.times(counts, &mut active, &mut times);
    for _ in 0..MOVES_PER_DEVICE * d + 8 {
        let a = (0..d).max_by(|&x, &y| times[x].total_cmp(&times[y])).unwrap_or(0);
        let (t_a, g_a) = (times[a], p.devs[a].group);
        if counts[a] == 0 {
            break;
        }
        // The receiver whose time after one more chunk is smallest; joining an idle device
        // makes its group share the hardware one way more (or less, if `a` empties).
        let mut best: Option<(usize, f64, usize)> = None;
        for b in (0..d).filter(|&b| b != a && counts[b] < limit[b]) {
            let g_b = p.devs[b].group;
            let sharing = active[g_b] + usize::from(counts[b] == 0)
                - usize::from(g_a == g_b && counts[a] == 1);
            let c = counts[b] + 1;
            let t = p.seconds(b, c * p.chunk_items, c, sharing);
            if best.is_none_or(|(_, bt, _)| t < bt) {
                best = Some((b, t, sharing));
            }
        }
        let Some((b, t_b, sharing_b)) = best else { break };
        if t_b >= t_a {
            break;
        }
        // Close the gap in one move when it spans many chunks, then fall back to one.
        let per_chunk = |i: usize, sharing: usize| p.seconds(i, p.chunk_items, 1, sharing);
        let gap = (t_a - times[b]) / (per_chunk(a, active[g_a]) + per_chunk(b, sharing_b));
        let room = limit[b] - counts[b];
        let bulk = (gap.floor().max(1.0) as u64).min(counts[a]).min(room);
        let mut accepted = false;
        for k in [bulk, 1].into_iter().take(if bulk > 1 { 2 } else { 1 }) {
            counts[a] -= k;
            counts[b] += k;
            let m = p.times(counts, &mut trial_active, &mut trial_times);
            // Equal makespan still counts as progress when `a` was one of several devices
            // tied at the maximum and neither end of the move is there any more.
            if m < makespan || (m <= makespan && trial_times[a] < t_a && trial_times[b] < t_a) {
                makespan = m;
                std::mem::swap(&mut times, &mut trial_times);
                std::mem::swap(&mut active, &mut trial_active);
                accepted = true;
                break;
            }
            counts[a] += k;
            counts[b] -= k;
        }
        if !accepted {
            break;
        }
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
