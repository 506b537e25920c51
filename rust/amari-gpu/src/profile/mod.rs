//! The profiler timeline: every step of every call (plan, upload, kernel, readback, wait,
//! retry, halo exchange) as an event on the context's clock. Kernel events come from GPU
//! timestamp queries when the device has them, aligned to the host clock; otherwise from
//! host timing. Kernel calls are grouped by the user call (the API method) that made them.
//! Nothing is recorded, and nothing costs, while no profile is active.

mod calls;
mod merged;
mod summary;
mod timeline;
mod trace;

pub use calls::{CallScope, UserCall};
pub use merged::{chrome_trace_merged, TraceProcess};
pub use summary::{summarize, summarize_calls, CallSummary, DeviceSummary, Summary};
pub use timeline::{CallRecord, Clock, Event, HostStep, Kind, Profiler};
pub use trace::chrome_trace;
