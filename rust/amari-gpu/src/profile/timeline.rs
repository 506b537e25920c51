//! The timeline itself: the kinds of step, the clock that timed each, the events and call
//! records, and the [`Profiler`] that collects them while a profile is active.

use std::sync::Mutex;
use std::time::Instant;

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
    /// The plan's lower bound.
    pub lower_bound_s: f64,
    /// The plan's estimated makespan.
    pub estimated_makespan_s: f64,
    /// Strategy that made the plan.
    pub strategy: String,
}

/// An active profile.
#[derive(Debug)]
pub struct Profiler {
    origin: Instant,
    events: Mutex<Vec<Event>>,
    calls: Mutex<Vec<CallRecord>>,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            origin: Instant::now(),
            events: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
        }
    }
}

impl Profiler {
    /// Seconds of `t` on the profile's clock.
    pub fn at(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.origin).as_secs_f64()
    }

    /// Records `step`, measured on the host between `start` and `end`.
    pub fn host(&self, step: HostStep, start: Instant, end: Instant) {
        self.push(Event {
            device: step.device,
            kind: step.kind,
            chunk: step.chunk,
            call: step.call,
            start_s: self.at(start),
            duration_s: end.saturating_duration_since(start).as_secs_f64(),
            bytes: step.bytes,
            items: step.items,
            clock: Clock::Host,
        });
    }

    /// Records an event as given.
    pub fn push(&self, event: Event) {
        self.events.lock().expect("profile lock").push(event);
    }

    /// Registers a call and returns its index.
    pub fn call(&self, record: CallRecord) -> u64 {
        let mut calls = self.calls.lock().expect("profile lock");
        calls.push(record);
        calls.len() as u64 - 1
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
