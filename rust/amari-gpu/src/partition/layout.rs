//! Turning chunk counts into a [`Plan`]: contiguous runs in device-id order, with the
//! model's estimates, the lower bound and the efficiency.

use super::bounds;
use super::problem::Problem;
use crate::plan::{DeviceWorkload, Plan, Strategy};

impl Problem<'_> {
    /// Lays out the counts as contiguous runs in device-id order and reports the estimates.
    pub fn finish(&self, counts: &[u64], strategy: Strategy, requested: Strategy) -> Plan {
        debug_assert_eq!(counts.iter().sum::<u64>(), self.n_chunks);
        let mut active = vec![0usize; self.n_groups];
        for (i, d) in self.devs.iter().enumerate() {
            active[d.group] += usize::from(counts[i] > 0);
        }
        let items = self.workload.items;
        let mut assignments = Vec::with_capacity(counts.iter().filter(|&&c| c > 0).count());
        let mut first_chunk = 0u64;
        let mut makespan = 0.0f64;
        for (i, d) in self.devs.iter().enumerate().filter(|&(i, _)| counts[i] > 0) {
            let chunks = counts[i];
            let start = first_chunk * self.chunk_items;
            let stop = ((first_chunk + chunks) as u128 * self.chunk_items as u128)
                .min(items as u128) as u64;
            let estimated_seconds =
                d.model
                    .seconds(self.workload, stop - start, chunks, active[d.group]);
            makespan = makespan.max(estimated_seconds);
            assignments.push(DeviceWorkload {
                device: d.model.device,
                start,
                stop,
                items: stop - start,
                first_chunk,
                chunks,
                estimated_seconds,
            });
            first_chunk += chunks;
        }
        let lower_bound_s = bounds::lower_bound(self);
        Plan {
            strategy,
            requested,
            items,
            chunk_items: self.chunk_items,
            n_chunks: self.n_chunks,
            assignments,
            estimated_makespan_s: makespan,
            lower_bound_s,
            efficiency: bounds::efficiency(lower_bound_s, makespan),
            fast_path: false,
            left_out: Vec::new(),
        }
    }
}

/// The plan of an empty workload; Auto resolves as it would on a tie, to latency.
pub(crate) fn empty(chunk_items: u64, requested: Strategy) -> Plan {
    Plan {
        strategy: requested.resolved(),
        requested,
        items: 0,
        chunk_items,
        n_chunks: 0,
        assignments: Vec::new(),
        estimated_makespan_s: 0.0,
        lower_bound_s: 0.0,
        efficiency: 1.0,
        fast_path: false,
        left_out: Vec::new(),
    }
}
