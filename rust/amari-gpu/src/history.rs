//! Online refinement of the cost model from completed calls: per device and kernel family,
//! an exponentially weighted ratio of observed to predicted time (as StarPU's history-based
//! models do) and the spread of that ratio. Each call gives one observation per device: the
//! summed time of the chunks it completed over their summed prediction.

use std::collections::HashMap;
use std::sync::Mutex;

/// Weight of the newest observation.
const ALPHA: f64 = 0.25;

#[derive(Debug, Clone, Copy)]
struct Entry {
    correction: f64,
    uncertainty: f64,
    samples: u64,
}

/// Observed/predicted history for every (device, family).
#[derive(Debug, Default)]
pub struct History {
    entries: Mutex<HashMap<(usize, String), Entry>>,
}

impl History {
    /// (correction, uncertainty) for a device and family: (1, 0) before any observation.
    pub fn get(&self, device: usize, family: &str) -> (f64, f64) {
        self.entries
            .lock()
            .expect("history lock")
            .get(&(device, family.to_string()))
            .map_or((1.0, 0.0), |e| (e.correction, e.uncertainty))
    }

    /// Forgets every observation of `device`: they were ratios to figures it no longer has.
    pub fn forget(&self, device: usize) {
        let mut entries = self.entries.lock().expect("history lock");
        entries.retain(|(d, _), _| *d != device);
    }

    /// Records work that took `observed_s` where the uncorrected model said `predicted_s`.
    pub fn record(&self, device: usize, family: &str, predicted_s: f64, observed_s: f64) {
        if !(predicted_s > 0.0
            && observed_s > 0.0
            && predicted_s.is_finite()
            && observed_s.is_finite())
        {
            return;
        }
        let ratio = observed_s / predicted_s;
        let mut entries = self.entries.lock().expect("history lock");
        let entry = entries
            .entry((device, family.to_string()))
            .or_insert(Entry {
                correction: ratio,
                uncertainty: 0.0,
                samples: 0,
            });
        let deviation = (ratio / entry.correction - 1.0).abs();
        entry.uncertainty = (1.0 - ALPHA) * entry.uncertainty + ALPHA * deviation;
        entry.correction = (1.0 - ALPHA) * entry.correction + ALPHA * ratio;
        entry.samples += 1;
    }

    /// Observations recorded for a device and family.
    #[cfg(test)]
    pub fn samples(&self, device: usize, family: &str) -> u64 {
        self.entries
            .lock()
            .expect("history lock")
            .get(&(device, family.to_string()))
            .map_or(0, |e| e.samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_a_steady_ratio_with_falling_uncertainty() {
        let h = History::default();
        assert_eq!(h.get(0, "f"), (1.0, 0.0));
        for _ in 0..40 {
            h.record(0, "f", 1.0, 2.0);
        }
        let (c, u) = h.get(0, "f");
        assert!((c - 2.0).abs() < 1e-9 && u < 1e-9);
        h.record(0, "f", 1.0, 4.0);
        assert!(h.get(0, "f").1 > 0.2);
        assert_eq!(h.samples(0, "f"), 41);
    }

    #[test]
    fn nonsense_observations_are_ignored() {
        let h = History::default();
        h.record(0, "f", 0.0, 1.0);
        h.record(0, "f", 1.0, f64::NAN);
        assert_eq!(h.samples(0, "f"), 0);
    }
}
