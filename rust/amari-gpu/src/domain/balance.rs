//! Rebalancing bands from measured round times: each device's rate (cells per second of its
//! round beyond its fixed per-round cost, ghost work included) is smoothed over rounds, and a new split in proportion to the
//! rates is taken when it is predicted to save more over the remaining rounds than moving
//! the rows costs, and at least a tenth of a round.

use std::collections::BTreeMap;

use super::bands::split_rows;

/// Weight of the newest round in a device's smoothed rate.
const SMOOTHING: f64 = 0.5;
/// Smallest predicted saving, as a fraction of the current round time, worth a new layout.
const MIN_GAIN: f64 = 0.10;
/// Rounds to measure after a new layout before judging it.
const SETTLE_ROUNDS: usize = 1;

/// Seconds that moving to a split ((device, rows) in device order) would cost.
pub type MoveCost<'a> = &'a dyn Fn(&[(usize, usize)]) -> f64;

/// Smoothed per-device rates and the decision to move rows.
#[derive(Debug, Default)]
pub struct Balancer {
    rates: BTreeMap<usize, f64>,
    rounds_since_layout: usize,
}

/// A proposed new split with the figures behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// (device, rows) in device order.
    pub split: Vec<(usize, usize)>,
    /// Predicted seconds per row-step of the slowest device now.
    pub current_s: f64,
    /// The same, after the move.
    pub proposed_s: f64,
}

impl Balancer {
    /// Records that `device` computed `cells` cells in `seconds`, of which `overhead_s` is
    /// its fixed cost per round (launch and synchronisation, whatever the rows): a device
    /// with few rows is otherwise judged by its overhead and never given more.
    pub fn observe(&mut self, device: usize, cells: u64, seconds: f64, overhead_s: f64) {
        if cells == 0 || seconds <= 0.0 {
            return;
        }
        // At least a tenth of the round counts as work, so noise cannot make a rate infinite.
        let rate = cells as f64 / (seconds - overhead_s).max(0.1 * seconds);
        let smoothed = self
            .rates
            .get(&device)
            .map_or(rate, |old| SMOOTHING * rate + (1.0 - SMOOTHING) * old);
        self.rates.insert(device, smoothed);
    }

    /// Marks the end of a round.
    pub fn round_done(&mut self) {
        self.rounds_since_layout += 1;
    }

    /// Marks a new layout: its first rounds are measured before it is judged again.
    pub fn relaid(&mut self) {
        self.rounds_since_layout = 0;
    }

    /// The split in proportion to the measured rates, if every device in `split` has been
    /// measured (a device without rows counts at the slowest rate seen) and moving to it
    /// saves at least [`MIN_GAIN`] of a round and, over `remaining_rounds`, more than
    /// `move_s` says moving to it costs. `round_s` is the last round's time.
    pub fn propose(
        &self,
        split: &[(usize, usize)],
        round_s: f64,
        remaining_rounds: usize,
        move_s: MoveCost<'_>,
    ) -> Option<Proposal> {
        if self.rounds_since_layout < SETTLE_ROUNDS || remaining_rounds == 0 {
            return None;
        }
        let slowest = self.rates.values().copied().fold(f64::INFINITY, f64::min);
        if !slowest.is_finite() {
            return None;
        }
        let mut rates = Vec::with_capacity(split.len());
        for &(device, rows) in split {
            match self.rates.get(&device) {
                Some(&r) => rates.push(r),
                None if rows == 0 => rates.push(slowest),
                None => return None,
            }
        }
        let height = split.iter().map(|s| s.1).sum();
        let rows = split_rows(height, &rates);
        let time = |rows: &[usize]| {
            rows.iter()
                .zip(&rates)
                .map(|(&n, &r)| n as f64 / r)
                .fold(0.0, f64::max)
        };
        let current: Vec<usize> = split.iter().map(|s| s.1).collect();
        let (current_s, proposed_s) = (time(&current), time(&rows));
        if current_s <= 0.0 || rows == current {
            return None;
        }
        let gain = 1.0 - proposed_s / current_s;
        let saved_s = gain * round_s * remaining_rounds as f64;
        let proposed: Vec<(usize, usize)> = split.iter().map(|s| s.0).zip(rows).collect();
        let worth = gain >= MIN_GAIN && saved_s > move_s(&proposed);
        if worth {
            log::info!(
                "rebalancing bands (device, rows) {split:?} -> {proposed:?}: slowest device's round predicted {:.3} ms -> {:.3} ms, {saved_s:.3} s saved over {remaining_rounds} rounds",
                current_s * 1e3,
                proposed_s * 1e3
            );
        }
        worth.then_some(Proposal {
            split: proposed,
            current_s,
            proposed_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_device_is_given_fewer_rows() {
        let mut b = Balancer::default();
        b.observe(0, 1000, 1.0, 0.0);
        b.observe(1, 3000, 1.0, 0.0);
        b.round_done();
        let p = b.propose(&[(0, 50), (1, 50)], 1.0, 10, &|_| 0.1).unwrap();
        assert_eq!(p.split, [(0, 25), (1, 75)]);
        assert!(p.proposed_s < p.current_s);
    }

    #[test]
    fn no_move_when_balanced_settling_or_not_worth_it() {
        let mut b = Balancer::default();
        b.observe(0, 1000, 1.0, 0.0);
        b.observe(1, 1050, 1.0, 0.0);
        assert_eq!(b.propose(&[(0, 50), (1, 50)], 1.0, 10, &|_| 0.0), None);
        b.round_done();
        assert_eq!(b.propose(&[(0, 50), (1, 50)], 1.0, 10, &|_| 0.0), None);
        b.observe(1, 4000, 1.0, 0.0);
        assert!(b.propose(&[(0, 50), (1, 50)], 1.0, 10, &|_| 0.0).is_some());
        // The saving over the remaining rounds must pay for moving the rows.
        assert_eq!(b.propose(&[(0, 50), (1, 50)], 1.0, 1, &|_| 100.0), None);
    }

    #[test]
    fn fixed_round_costs_do_not_count_against_a_lightly_loaded_device() {
        let mut b = Balancer::default();
        // Same speed per cell; device 1's round is mostly its 0.5 s fixed cost.
        b.observe(0, 9000, 9.5, 0.5);
        b.observe(1, 1000, 1.5, 0.5);
        b.round_done();
        let p = b.propose(&[(0, 90), (1, 10)], 9.5, 10, &|_| 0.0).unwrap();
        assert_eq!(p.split, [(0, 50), (1, 50)]);
    }

    #[test]
    fn unmeasured_devices_with_rows_block_a_proposal() {
        let mut b = Balancer::default();
        b.observe(0, 1000, 1.0, 0.0);
        b.round_done();
        assert_eq!(b.propose(&[(0, 10), (1, 10)], 1.0, 10, &|_| 0.0), None);
        // A device without rows counts at the slowest measured rate.
        let p = b.propose(&[(0, 10), (1, 0)], 1.0, 10, &|_| 0.0).unwrap();
        assert_eq!(p.split, [(0, 5), (1, 5)]);
    }
}
