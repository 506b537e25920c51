//! Per-device health and counters: whether a device may be given work, why not, injected
//! faults for testing recovery, and what the device has done so far.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Debug, Default)]
struct State {
    failed: Option<String>,
    fault_after_chunks: Option<u64>,
    hold_after_chunks: Option<u64>,
    grid_rate: Option<f64>,
}

/// Whether a device is usable, and the fault injected into it, if any.
#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<State>,
}

impl Health {
    /// True until the device fails (or an injected fault fires).
    pub fn is_healthy(&self) -> bool {
        self.state.lock().expect("health lock").failed.is_none()
    }

    /// Why the device was marked unhealthy.
    pub fn reason(&self) -> Option<String> {
        self.state.lock().expect("health lock").failed.clone()
    }

    /// Marks the device unhealthy; later calls avoid it. The first reason is kept.
    pub fn mark_failed(&self, reason: &str) {
        let mut state = self.state.lock().expect("health lock");
        if state.failed.is_none() {
            state.failed = Some(reason.to_string());
        }
    }

    /// Makes the device usable again and drops any pending injected fault (and an
    /// injected grid rate).
    pub fn reset(&self) {
        *self.state.lock().expect("health lock") = State::default();
    }

    /// The device will fail when it starts its next chunk after completing `chunks` more.
    pub fn inject_fault(&self, chunks: u64) {
        self.state.lock().expect("health lock").fault_after_chunks = Some(chunks);
    }

    /// Called before a chunk starts: the injected failure's message when it is due.
    pub fn injected_fault_due(&self) -> Option<String> {
        let state = self.state.lock().expect("health lock");
        (state.fault_after_chunks == Some(0)).then(|| "injected fault (inject_fault)".to_string())
    }

    /// After completing `chunks` more, the device's waits for its work do not end until
    /// [`Health::reset`]: a device that never answers, for tests of what depends on one
    /// being slow (`sync_timeout_ms`, interrupts) that no machine is too fast for.
    pub fn inject_hold(&self, chunks: u64) {
        self.state.lock().expect("health lock").hold_after_chunks = Some(chunks);
    }

    /// Whether an injected hold is due: the device's waits see no answer while it is.
    pub fn hold_due(&self) -> bool {
        self.state.lock().expect("health lock").hold_after_chunks == Some(0)
    }

    /// For tests of the grid rebalancer: its rounds are judged as if the device computed
    /// `cells_per_s` cells per second with no fixed cost per round, instead of by their
    /// measured time (they still run at the device's own speed), so where rows go does not
    /// depend on how busy the machine is. `None` measures again.
    pub fn inject_grid_rate(&self, cells_per_s: Option<f64>) {
        self.state.lock().expect("health lock").grid_rate = cells_per_s;
    }

    /// The injected grid rate, if any (see [`Health::inject_grid_rate`]).
    pub fn grid_rate(&self) -> Option<f64> {
        self.state.lock().expect("health lock").grid_rate
    }

    /// Whether an injected fault or hold is counting down: a worker then takes its chunks
    /// one by one (no batch), so that the countdown ends after exactly the chunks it says.
    pub fn counting_down(&self) -> bool {
        let state = self.state.lock().expect("health lock");
        state.fault_after_chunks.is_some() || state.hold_after_chunks.is_some()
    }

    /// Called when a chunk completes: counts down an injected fault or hold.
    pub fn chunk_completed(&self) {
        let mut state = self.state.lock().expect("health lock");
        if let Some(n) = state.fault_after_chunks.as_mut() {
            *n = n.saturating_sub(1);
        }
        if let Some(n) = state.hold_after_chunks.as_mut() {
            *n = n.saturating_sub(1);
        }
    }
}

/// Running totals of what a device did, over the life of the context.
#[derive(Debug, Default)]
pub struct Counters {
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    items: AtomicU64,
    chunks: AtomicU64,
    busy_ns: AtomicU64,
    failed_chunks: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CounterSnapshot {
    /// Bytes uploaded.
    pub bytes_up: u64,
    /// Bytes read back.
    pub bytes_down: u64,
    /// Items computed.
    pub items: u64,
    /// Chunks completed.
    pub chunks: u64,
    /// Seconds the device had work in flight.
    pub busy_s: f64,
    /// Chunks that failed on this device (and were re-run elsewhere).
    pub failed_chunks: u64,
}

impl Counters {
    /// Records one completed chunk.
    pub fn chunk_done(&self, items: u64, bytes_up: u64, bytes_down: u64) {
        self.items.fetch_add(items, Ordering::Relaxed);
        self.chunks.fetch_add(1, Ordering::Relaxed);
        self.bytes_up.fetch_add(bytes_up, Ordering::Relaxed);
        self.bytes_down.fetch_add(bytes_down, Ordering::Relaxed);
    }

    /// Records bytes moved outside a chunk (resident arrays: uploads, gathers, reshards).
    pub fn moved(&self, bytes_up: u64, bytes_down: u64) {
        self.bytes_up.fetch_add(bytes_up, Ordering::Relaxed);
        self.bytes_down.fetch_add(bytes_down, Ordering::Relaxed);
    }

    /// Adds busy wall time.
    pub fn add_busy(&self, seconds: f64) {
        self.busy_ns
            .fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }

    /// Records chunks lost to a failure.
    pub fn chunks_failed(&self, chunks: u64) {
        self.failed_chunks.fetch_add(chunks, Ordering::Relaxed);
    }

    /// The current totals.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            bytes_up: self.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.bytes_down.load(Ordering::Relaxed),
            items: self.items.load(Ordering::Relaxed),
            chunks: self.chunks.load(Ordering::Relaxed),
            busy_s: self.busy_ns.load(Ordering::Relaxed) as f64 / 1e9,
            failed_chunks: self.failed_chunks.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_injected_grid_rate_stays_until_reset() {
        let health = Health::default();
        assert_eq!(health.grid_rate(), None);
        health.inject_grid_rate(Some(5.0));
        health.chunk_completed();
        assert_eq!(health.grid_rate(), Some(5.0));
        health.reset();
        assert_eq!(health.grid_rate(), None);
    }

    #[test]
    fn injected_fault_fires_after_the_given_number_of_chunks() {
        let health = Health::default();
        health.inject_fault(2);
        assert!(health.injected_fault_due().is_none());
        health.chunk_completed();
        assert!(health.injected_fault_due().is_none());
        health.chunk_completed();
        assert!(health.injected_fault_due().is_some());
        health.mark_failed("injected");
        assert!(!health.is_healthy());
        health.reset();
        assert!(health.is_healthy() && health.injected_fault_due().is_none());
    }

    #[test]
    fn an_injected_hold_is_due_after_the_given_number_of_chunks_until_reset() {
        let health = Health::default();
        health.inject_hold(1);
        assert!(!health.hold_due());
        health.chunk_completed();
        assert!(health.hold_due() && health.injected_fault_due().is_none());
        health.reset();
        assert!(!health.hold_due());
    }
}
