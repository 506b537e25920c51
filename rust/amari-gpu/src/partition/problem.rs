//! The problem every partitioner works on: the chunk grid, the eligible devices in device-id
//! order, and the exact cost of a vector of per-device chunk counts.

use crate::error::{Error, Result};
use crate::model::DeviceModel;
use crate::workload::Workload;

/// One device that accepts a chunk, with the figures the partitioners use over and over.
pub(crate) struct Dev<'a> {
    pub model: &'a DeviceModel,
    /// Dense group index (0..n_groups), so per-group tallies are plain vectors.
    pub group: usize,
    /// Seconds per item alone, cached because every cost evaluation needs it.
    pub spi: f64,
}

impl Dev<'_> {
    /// Items per second alone.
    pub fn ips(&self) -> f64 {
        1.0 / self.spi
    }
}

/// A non-empty workload, its grid and its eligible devices (at least one).
pub(crate) struct Problem<'a> {
    pub workload: &'a Workload,
    pub chunk_items: u64,
    pub n_chunks: u64,
    /// Items the grid's last chunk lacks (`n_chunks * chunk_items - items`).
    pub deficit: u64,
    /// Eligible devices, ascending device id: the order runs are laid out in.
    pub devs: Vec<Dev<'a>>,
    pub n_groups: usize,
}

/// The argument checks every strategy shares; done before an empty workload short-cuts.
pub(crate) fn validate(
    workload: &Workload,
    chunk_items: u64,
    models: &[DeviceModel],
) -> Result<()> {
    workload.validate()?;
    if chunk_items == 0 {
        return Err(Error::invalid(
            "chunk_items",
            "expected at least 1 item per chunk, got 0",
        ));
    }
    if models.is_empty() {
        return Err(Error::no_adapter_hint("no healthy device to plan for"));
    }
    for m in models {
        let spi = m.seconds_per_item(workload);
        // A NaN or infinite rate would silently poison every comparison of the plan.
        let latency = m.launch_latency_s;
        let sound = spi.is_finite() && spi > 0.0 && latency.is_finite() && latency >= 0.0;
        if !sound {
            return Err(Error::invalid(
                "models",
                format!(
                    "device {}: expected positive finite rates and a finite latency >= 0 \
                     (seconds per item {spi}, launch latency {} s)",
                    m.device, latency
                ),
            ));
        }
    }
    Ok(())
}

impl<'a> Problem<'a> {
    /// The eligible devices of a validated, non-empty workload.
    pub fn new(
        workload: &'a Workload,
        chunk_items: u64,
        models: &'a [DeviceModel],
    ) -> Result<Self> {
        let mut eligible: Vec<&DeviceModel> = models
            .iter()
            .filter(|m| m.accepts_chunk(workload, chunk_items))
            .collect();
        if eligible.is_empty() {
            let bytes = workload.widest_bytes_per_item() * chunk_items as f64;
            let largest = models
                .iter()
                .map(|m| m.max_binding_bytes)
                .max()
                .unwrap_or(0);
            return Err(Error::invalid(
                "chunk_items",
                format!(
                    "a chunk of {chunk_items} items binds {bytes} bytes, more than any device \
                     accepts (largest binding limit {largest} bytes)"
                ),
            ));
        }
        eligible.sort_by_key(|m| m.device);
        let mut group_ids: Vec<usize> = Vec::new();
        let devs = eligible
            .into_iter()
            .map(|model| {
                let group = match group_ids.iter().position(|&g| g == model.group) {
                    Some(g) => g,
                    None => {
                        group_ids.push(model.group);
                        group_ids.len() - 1
                    }
                };
                Dev {
                    model,
                    group,
                    spi: model.seconds_per_item(workload),
                }
            })
            .collect();
        let items = workload.items;
        let n_chunks = items.div_ceil(chunk_items);
        let deficit = (n_chunks as u128 * chunk_items as u128 - items as u128) as u64;
        Ok(Problem {
            workload,
            chunk_items,
            n_chunks,
            deficit,
            devs,
            n_groups: group_ids.len(),
        })
    }

    /// Same formula as [`DeviceModel::seconds`], with the cached seconds per item, so that
    /// hot loops agree bit for bit with the figures the finished plan reports.
    pub fn seconds(&self, i: usize, items: u64, chunks: u64, sharing: usize) -> f64 {
        if items == 0 {
            return 0.0;
        }
        let d = &self.devs[i];
        chunks as f64 * d.model.launch_latency_s
            + items as f64 * d.spi * d.model.sharing_factor(sharing)
    }

    /// Items in a run of `chunks` chunks: whole chunks, less the grid's short last chunk's
    /// missing items when the run holds it (the last device with work does).
    pub fn run_items(&self, chunks: u64, holds_short: bool) -> u64 {
        let full = chunks as u128 * self.chunk_items as u128;
        let short = if holds_short { self.deficit as u128 } else { 0 };
        u64::try_from(full.saturating_sub(short)).unwrap_or(u64::MAX)
    }

    /// Items device `i` holds when the last device with work is `last`.
    pub fn items_of(&self, counts: &[u64], i: usize, last: usize) -> u64 {
        self.run_items(counts[i], i == last)
    }

    /// Seconds device `i` takes for a run of `chunks` chunks while `sharing` members of its
    /// group are busy.
    pub fn run_seconds(&self, i: usize, chunks: u64, sharing: usize, holds_short: bool) -> f64 {
        self.seconds(i, self.run_items(chunks, holds_short), chunks, sharing)
    }

    /// The most chunks (at most the grid's) device `i` finishes within `t` while `sharing`
    /// members of its group are busy: the closed form, corrected by a step either way so
    /// that it agrees with [`Problem::run_seconds`] despite rounding.
    pub fn chunks_within(&self, i: usize, sharing: usize, holds_short: bool, t: f64) -> u64 {
        let n = self.n_chunks;
        let d = &self.devs[i];
        // run_seconds(c) = c * per_chunk - saved (the short chunk's missing items).
        let per_item = d.spi * d.model.sharing_factor(sharing);
        let per_chunk = d.model.launch_latency_s + self.chunk_items as f64 * per_item;
        let saved = if holds_short {
            self.deficit as f64 * per_item
        } else {
            0.0
        };
        let time = |c: u64| self.run_seconds(i, c, sharing, holds_short);
        let mut c = ((t + saved) / per_chunk).floor().clamp(0.0, n as f64) as u64;
        while c > 0 && time(c) > t {
            c -= 1;
        }
        while c < n && time(c + 1) <= t {
            c += 1;
        }
        c
    }

    /// Fills `active` (devices with work per group) and `times`; returns the makespan.
    pub fn times(&self, counts: &[u64], active: &mut [usize], times: &mut [f64]) -> f64 {
        active.iter_mut().for_each(|a| *a = 0);
        let mut last = 0;
        for (i, d) in self.devs.iter().enumerate() {
            if counts[i] > 0 {
                active[d.group] += 1;
                last = i;
            }
        }
        let mut makespan = 0.0f64;
        for (i, d) in self.devs.iter().enumerate() {
            let items = self.items_of(counts, i, last);
            times[i] = self.seconds(i, items, counts[i], active[d.group]);
            makespan = makespan.max(times[i]);
        }
        makespan
    }

    /// The makespan of a count vector (allocates; for comparisons outside hot loops).
    pub fn makespan(&self, counts: &[u64]) -> f64 {
        let mut active = vec![0; self.n_groups];
        let mut times = vec![0.0; self.devs.len()];
        self.times(counts, &mut active, &mut times)
    }
}
