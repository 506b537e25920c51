//! Interrupting a call from outside it. Whoever starts a call (the Python bindings, on a
//! thread of their own) runs it inside [`Interrupt::scope`]; the core checks the call's
//! interrupt between chunks and between rounds and stops handing out work once it is set;
//! the engine's workers also stop waiting for the chunks they have in flight (abandoned to
//! the device, whose buffers wgpu keeps until it is done), and the call returns
//! [`Error::Cancelled`]. Grid runs also publish their progress here, for the caller to
//! report while it waits.
//!
//! A thread-local carries the interrupt so that entry points need no extra argument: the
//! calling thread reads it once per call and hands it to the call's workers. The interrupt
//! also carries the user call its creator works for (see [`CallScope`]), so a profile
//! counts the work done on the call's own thread as that call's.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::profile::CallScope;

/// The cancellation flag and latest progress of one call.
#[derive(Debug, Default)]
pub struct Interrupt {
    cancelled: AtomicBool,
    progress: Mutex<Option<(u64, u64)>>,
    /// The user call of the thread that created it.
    user_call: CallScope,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Interrupt>>> = const { RefCell::new(None) };
}

/// Restores the thread's previous interrupt when a scope ends, even by unwinding.
struct Restore(Option<Arc<Interrupt>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

impl Interrupt {
    /// A fresh interrupt, not set, for a call of the user call this thread works for.
    pub fn new() -> Arc<Self> {
        Arc::new(Interrupt {
            user_call: CallScope::current(),
            ..Interrupt::default()
        })
    }

    /// Asks the call to stop as soon as it can.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Whether the call was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// The latest (steps done, steps in total) a grid run published, once.
    pub fn take_progress(&self) -> Option<(u64, u64)> {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Runs `work` on this thread with `this` as the interrupt of every call it makes, for
    /// the user call of the thread that created `this`.
    pub fn scope<T>(this: &Arc<Self>, work: impl FnOnce() -> T) -> T {
        let previous = CURRENT.with(|c| c.borrow_mut().replace(Arc::clone(this)));
        let _restore = Restore(previous);
        this.user_call.enter(work)
    }
}

/// The interrupt of the call running on this thread, if its caller gave one.
pub(crate) fn current() -> Option<Arc<Interrupt>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// [`Error::Cancelled`] when the call running on this thread was asked to stop.
pub(crate) fn check() -> Result<()> {
    match current() {
        Some(i) if i.is_cancelled() => Err(Error::Cancelled),
        _ => Ok(()),
    }
}

/// Publishes a grid run's progress for its caller.
pub(crate) fn progress(done: u64, total: u64) {
    if let Some(i) = current() {
        *i.progress.lock().unwrap_or_else(PoisonError::into_inner) = Some((done, total));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_sets_and_restores_the_interrupt() {
        assert!(check().is_ok());
        let i = Interrupt::new();
        Interrupt::scope(&i, || {
            assert!(check().is_ok());
            progress(3, 10);
            i.cancel();
            assert_eq!(check(), Err(Error::Cancelled));
        });
        assert!(current().is_none());
        assert_eq!(i.take_progress(), Some((3, 10)));
        assert_eq!(i.take_progress(), None);
        let caught = std::panic::catch_unwind(|| Interrupt::scope(&i, || panic!("boom")));
        assert!(caught.is_err());
        assert!(current().is_none());
    }
}
