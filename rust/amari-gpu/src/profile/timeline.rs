//! The timeline itself: the kinds of step, the clock that timed each, the events and call
//! records, and the [`Profiler`] that collects them while a profile is active.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use super::calls::{CallScope, UserCall};

/// What a step was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Deciding the plan of a call (host).
    Plan,
    /// Copying a chunk's inputs towards the device.
    Upload,
    /// The kernel of one chunk on the device.
    Kernel,
    /// Copying a chunk's results back into the output.
    Readback,
    /// Waiting for the device to finish submitted work.
    Wait,
    /// Re-running a chunk whose device failed, on another device.
    Retry,
    /// Passing halo rows between devices through the host (domain decomposition).
    Exchange,
}

impl Kind {
    /// The public name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Plan => "plan",
            Kind::Upload => "upload",
            Kind::Kernel => "kernel",
            Kind::Readback => "readback",
            Kind::Wait => "wait",
            Kind::Retry => "retry",
            Kind::Exchange => "exchange",
        }
    }
}

/// Which clock measured an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Host wall clock around the step.
    Host,
    /// GPU timestamp queries, aligned to the host clock.
    Gpu,
}

impl Clock {
    /// The public name.
    pub fn name(self) -> &'static str {
        match self {
            Clock::Host => "host",
            Clock::Gpu => "gpu",
        }
    }
}

/// One step on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Device id, or `None` for host-wide steps (planning).
    pub device: Option<usize>,
    /// What the step was.
    pub kind: Kind,
    /// Chunk index in the call's grid, if the step belongs to one chunk.
    pub chunk: Option<u64>,
    /// Index of the call within the profile (0 for the first call).
    pub call: u64,
    /// Seconds since the profile started.
    pub start_s: f64,
    /// Seconds the step took.
    pub duration_s: f64,
    /// Bytes the step moved.
    pub bytes: u64,
    /// Items the step covered.
    pub items: u64,
    /// Which clock measured it.
    pub clock: Clock,
}

/// What a step timed on the host was: an [`Event`] but for its times and clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostStep {
    /// Device id, or `None` for host-wide steps.
    pub device: Option<usize>,
    /// What the step was.
    pub kind: Kind,
    /// Chunk (or round) index, if the step belongs to one.
    pub chunk: Option<u64>,
    /// Index of the call within the profile.
    pub call: u64,
    /// Bytes the step moved.
    pub bytes: u64,
    /// Items the step covered.
    pub items: u64,
}

/// A call seen by the profiler: its plan's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// Kernel name.
    pub kernel: String,
    /// Items of the call.
    pub items: u64,
    /// Arithmetic operations per item, as the kernel's cost model counts them (0 for a call
    /// that runs no kernel: a resident array's upload or gather).
    pub flops_per_item: f64,
    /// Bytes per item the call moves at the least: its per-item inputs and outputs.
    pub bytes_per_item: f64,
    /// The plan's lower bound.
    pub lower_bound_s: f64,
    /// The plan's estimated makespan.
    pub estimated_makespan_s: f64,
    /// Strategy that made the plan.
    pub strategy: String,
}

#[cfg(test)]
impl CallRecord {
    /// A call of `kernel` over one item, its plan "auto" with a bound of 0.25 s and an
    /// estimate of 0.5 s.
    pub(crate) fn named(kernel: &str) -> Self {
        CallRecord {
            kernel: kernel.into(),
            items: 1,
            flops_per_item: 1.0,
            bytes_per_item: 4.0,
            lower_bound_s: 0.25,
            estimated_makespan_s: 0.5,
            strategy: "auto".into(),
        }
    }
}

/// Steps of the profile's clock per second: 2^30 (a step is about 0.93 ns). Every time on
/// the timeline is a whole number of steps, which an `f64` holds exactly (below 2^23 s), as
/// it does their sums and differences: a slice's start plus its duration is exactly its end,
/// so a slice that begins when another ends (a readback after its wait) touches it and
/// never overlaps it by a rounding error, which Perfetto would refuse.
const STEPS_PER_S: f64 = (1u64 << 30) as f64;

/// `seconds` on the profile clock's grid (the nearest step).
fn on_grid(seconds: f64) -> f64 {
    (seconds * STEPS_PER_S).round() / STEPS_PER_S
}

/// How one device's GPU timestamps map onto the profile's clock.
#[derive(Debug, Default)]
struct GpuAlignment {
    /// Profile seconds minus GPU seconds: the smallest gap seen between a kernel's GPU end
    /// and the host seeing it done, the tightest alignment the host can know.
    offset_s: Option<f64>,
    /// Where the last kernel mapped for the device ends on the profile's clock.
    queue_end_s: f64,
}

/// An active profile.
#[derive(Debug)]
pub struct Profiler {
    origin: Instant,
    events: Mutex<Vec<Event>>,
    calls: Mutex<Vec<CallRecord>>,
    users: Mutex<Vec<UserCall>>,
    gpu: Mutex<BTreeMap<usize, GpuAlignment>>,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            origin: Instant::now(),
            events: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            users: Mutex::new(Vec::new()),
            gpu: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Profiler {
    /// Seconds of `t` on the profile's clock (on its grid of [`STEPS_PER_S`]).
    pub fn at(&self, t: Instant) -> f64 {
        on_grid(t.saturating_duration_since(self.origin).as_secs_f64())
    }

    /// Seconds from `start` to `end` on the profile's clock: `at(start)` plus this is
    /// exactly `at(end)` (0 when `end` is not after `start`).
    pub fn between(&self, start: Instant, end: Instant) -> f64 {
        (self.at(end) - self.at(start)).max(0.0)
    }

    /// Records `step`, measured on the host between `start` and `end`.
    pub fn host(&self, step: HostStep, start: Instant, end: Instant) {
        self.push(Event {
            device: step.device,
            kind: step.kind,
            chunk: step.chunk,
            call: step.call,
            start_s: self.at(start),
            duration_s: self.between(start, end),
            bytes: step.bytes,
            items: step.items,
            clock: Clock::Host,
        });
    }

    /// The start and duration on the profile's clock of a kernel that device `device`
    /// timed from `ticks.0` to `ticks.1` (GPU ticks of `period_ns`), seen done by the host
    /// at `seen`. One alignment per device for the whole profile, tightened by every
    /// kernel: a tighter one maps a kernel earlier than the ones before it were, so a
    /// kernel starts no earlier than the device's previous kernel ended (its queue runs
    /// them one after another) and slices on the queue never overlap.
    pub fn gpu_kernel(
        &self,
        device: usize,
        seen: Instant,
        ticks: (u64, u64),
        period_ns: f64,
    ) -> (f64, f64) {
        let begin_s = ticks.0 as f64 * period_ns * 1e-9;
        let end_s = ticks.1.max(ticks.0) as f64 * period_ns * 1e-9;
        let gap = self.at(seen) - end_s;
        let mut gpu = self.gpu.lock().unwrap_or_else(PoisonError::into_inner);
        let alignment = gpu.entry(device).or_default();
        let offset = alignment.offset_s.map_or(gap, |o| o.min(gap));
        alignment.offset_s = Some(offset);
        let start = on_grid(begin_s + offset)
            .max(alignment.queue_end_s)
            .max(0.0);
        let duration = on_grid(end_s - begin_s);
        alignment.queue_end_s = start + duration;
        (start, duration)
    }

    /// Records an event, its times put on the profile clock's grid.
    pub fn push(&self, mut event: Event) {
        let start = on_grid(event.start_s);
        let end = on_grid(event.start_s + event.duration_s.max(0.0)).max(start);
        event.start_s = start;
        event.duration_s = end - start;
        self.events.lock().expect("profile lock").push(event);
    }

    /// Registers a kernel call and returns its index; it belongs to the user call the
    /// current thread works for, if that is one of this profile's.
    pub fn call(&self, record: CallRecord) -> u64 {
        let index = {
            let mut calls = self.calls.lock().expect("profile lock");
            calls.push(record);
            calls.len() as u64 - 1
        };
        if let Some(user) = CallScope::current().call_in(self.address()) {
            let mut users = self.users.lock().expect("profile lock");
            if let Some(user) = users.get_mut(user as usize) {
                user.kernel_calls.push(index);
            }
        }
        index
    }

    /// This profile's identity in a thread's [`CallScope`].
    fn address(&self) -> usize {
        self as *const Self as usize
    }

    /// Opens a user call of `method` on `args` (a few words) and makes the current thread
    /// work for it; returns its index, or `None` when the thread already works for one of
    /// this profile's (a call made inside another belongs to the outer one).
    pub fn begin_call(&self, method: &str, args: &str) -> Option<u64> {
        if CallScope::current().call_in(self.address()).is_some() {
            return None;
        }
        let start_s = self.at(Instant::now());
        let mut users = self.users.lock().expect("profile lock");
        users.push(UserCall {
            method: method.to_string(),
            args: args.to_string(),
            start_s,
            end_s: None,
            kernel_calls: Vec::new(),
        });
        let index = users.len() as u64 - 1;
        CallScope::set(self.address(), Some(index));
        Some(index)
    }

    /// Closes user call `index` (from [`begin_call`](Self::begin_call), on the same
    /// thread): the thread works for no user call any more. Closing again does nothing.
    pub fn end_call(&self, index: u64) {
        let end_s = self.at(Instant::now());
        let mut users = self.users.lock().expect("profile lock");
        if let Some(user) = users.get_mut(index as usize) {
            user.end_s.get_or_insert(end_s);
        }
        if CallScope::current().call_in(self.address()) == Some(index) {
            CallScope::set(self.address(), None);
        }
    }

    /// Every user call so far, in the order they began.
    pub fn user_calls(&self) -> Vec<UserCall> {
        self.users.lock().expect("profile lock").clone()
    }

    /// Every event so far, ordered by start time.
    pub fn events(&self) -> Vec<Event> {
        let mut events = self.events.lock().expect("profile lock").clone();
        events.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        events
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.calls.lock().expect("profile lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn step(kind: Kind) -> HostStep {
        HostStep {
            device: Some(0),
            kind,
            chunk: Some(0),
            call: 0,
            bytes: 0,
            items: 1,
        }
    }

    /// A slice that begins when another ends touches it exactly: start plus duration, added
    /// as any reader adds them, is the next slice's start, for times all over the range.
    #[test]
    fn adjacent_host_slices_touch_exactly() {
        let p = Profiler::default();
        let mut t = p.origin;
        for i in 0..2000u64 {
            // Odd nanosecond lengths, growing: rounding would show within a few.
            let wait_end = t + Duration::from_nanos(1_234_567 * i + 4_321);
            let copied = wait_end + Duration::from_nanos(987_654 + 7 * i);
            p.host(step(Kind::Wait), t, wait_end);
            p.host(step(Kind::Readback), wait_end, copied);
            t = copied + Duration::from_nanos(i % 3);
        }
        let events = p.events();
        for pair in events.windows(2) {
            let end = pair[0].start_s + pair[0].duration_s;
            assert!(
                end <= pair[1].start_s,
                "{:?} overlaps {:?}",
                pair[0],
                pair[1]
            );
        }
        for e in &events {
            assert_eq!(on_grid(e.start_s), e.start_s);
            assert_eq!(on_grid(e.duration_s), e.duration_s);
        }
    }

    /// Events pushed with times off the grid are put on it, their end kept within a step.
    #[test]
    fn pushed_events_are_put_on_the_grid() {
        let p = Profiler::default();
        p.push(Event {
            device: Some(0),
            kind: Kind::Kernel,
            chunk: None,
            call: 0,
            start_s: 0.1,
            duration_s: 0.2,
            bytes: 0,
            items: 0,
            clock: Clock::Host,
        });
        let e = &p.events()[0];
        assert_eq!(on_grid(e.start_s), e.start_s);
        assert!((e.start_s - 0.1).abs() <= 0.5 / STEPS_PER_S);
        assert!((e.start_s + e.duration_s - 0.3).abs() <= 0.5 / STEPS_PER_S);
    }

    /// A later, tighter estimate of the GPU clock's offset never maps a kernel before the
    /// end of the device's previous one; other devices are aligned on their own.
    #[test]
    fn gpu_kernels_on_one_queue_never_overlap() {
        let p = Profiler::default();
        let origin = p.origin;
        let at = |ms: u64| origin + Duration::from_millis(ms);
        // 1 ns ticks. Kernel 1: GPU 100–110 ms, seen at 130 ms (offset 20 ms).
        let (s1, d1) = p.gpu_kernel(0, at(130), (100_000_000, 110_000_000), 1.0);
        assert!(
            (s1 - 0.120).abs() < 1e-6 && (d1 - 0.010).abs() < 1e-6,
            "{s1} {d1}"
        );
        // Kernel 2: GPU 111–121 ms, seen at 122 ms: the offset shrinks to 1 ms, which would
        // map it to 112 ms, inside kernel 1 (120–130 ms). It starts when kernel 1 ended.
        let (s2, d2) = p.gpu_kernel(0, at(122), (111_000_000, 121_000_000), 1.0);
        assert_eq!(s2, s1 + d1);
        assert!((d2 - 0.010).abs() < 1e-6);
        // Kernel 3, well after: mapped with the tight offset.
        let (s3, _) = p.gpu_kernel(0, at(300), (290_000_000, 295_000_000), 1.0);
        assert!((s3 - 0.291).abs() < 1e-6, "{s3}");
        // Another device has its own alignment.
        let (s4, _) = p.gpu_kernel(1, at(130), (100_000_000, 110_000_000), 1.0);
        assert!((s4 - 0.120).abs() < 1e-6, "{s4}");
    }
}
