//! User calls: what a caller of the API asked for (one `shortest_paths`, one
//! `geometric_product`), as opposed to the kernel calls the engine made to answer it (a
//! shortest-paths call runs one tiled product per round). The caller opens a user call
//! around its work ([`Profiler::begin_call`](super::Profiler::begin_call)); every kernel call
//! registered meanwhile by a thread working for it belongs to it. The thread-local here says
//! which user call a thread works for; a call's work that moves to a thread of its own
//! (the bindings' watched thread) takes it along with the call's interrupt.

use std::cell::Cell;

/// A call the caller made, as the profile recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct UserCall {
    /// The method called, e.g. `shortest_paths`.
    pub method: String,
    /// Its arguments in a few words, e.g. `1000×1000`.
    pub args: String,
    /// When it began, seconds since the profile started.
    pub start_s: f64,
    /// When it ended (`None` while it runs).
    pub end_s: Option<f64>,
    /// Indices of the kernel calls it made, in the order they were registered.
    pub kernel_calls: Vec<u64>,
}

impl UserCall {
    /// The name its slice carries: `method(args)`.
    pub fn name(&self) -> String {
        format!("{}({})", self.method, self.args)
    }
}

thread_local! {
    /// The user call this thread works for: its profile (by address) and index.
    static CURRENT: Cell<Option<(usize, u64)>> = const { Cell::new(None) };
}

/// Which user call a thread works for, to hand to another thread that takes over its work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallScope(Option<(usize, u64)>);

impl CallScope {
    /// The user call the current thread works for.
    pub fn current() -> Self {
        CallScope(CURRENT.with(Cell::get))
    }

    /// Runs `work` on this thread as part of this scope's user call.
    pub fn enter<T>(self, work: impl FnOnce() -> T) -> T {
        /// Restores the thread's scope when `work` ends, even by unwinding.
        struct Restore(Option<(usize, u64)>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(self.0)));
        work()
    }

    /// The user call of profile `profile` (its address) this scope names.
    pub(crate) fn call_in(self, profile: usize) -> Option<u64> {
        self.0.filter(|&(p, _)| p == profile).map(|(_, call)| call)
    }

    /// Makes this thread work for `call` of profile `profile` (or for none).
    pub(crate) fn set(profile: usize, call: Option<u64>) {
        CURRENT.with(|c| c.set(call.map(|call| (profile, call))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{CallRecord, Profiler};

    /// Kernel calls registered inside a user call belong to it, on the thread that opened
    /// it and on a thread that entered its scope; one opened inside another is not a call
    /// of its own; calls outside belong to none.
    #[test]
    fn kernel_calls_belong_to_the_user_call_their_thread_works_for() {
        let p = Profiler::default();
        let outside = p.call(CallRecord::named("before"));
        let user = p.begin_call("shortest_paths", "4×4").expect("a new call");
        assert_eq!(p.begin_call("inner", ""), None);
        let first = p.call(CallRecord::named("tropical/a"));
        let scope = CallScope::current();
        let second = std::thread::scope(|s| {
            s.spawn(|| scope.enter(|| p.call(CallRecord::named("tropical/b"))))
                .join()
                .unwrap()
        });
        p.end_call(user);
        let after = p.call(CallRecord::named("after"));
        let users = p.user_calls();
        assert_eq!(users.len(), 1);
        assert_eq!(users[0].name(), "shortest_paths(4×4)");
        assert_eq!(users[0].kernel_calls, vec![first, second]);
        assert!(users[0].end_s.is_some_and(|e| e >= users[0].start_s));
        assert!(![outside, after]
            .iter()
            .any(|k| users[0].kernel_calls.contains(k)));
        assert_eq!(CallScope::current(), CallScope::default());
    }
}
