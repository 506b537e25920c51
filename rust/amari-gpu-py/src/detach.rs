//! The one way core work is run from Python: on a thread of its own with the GIL released,
//! while the calling thread watches it. Every `POLL` the caller takes the GIL briefly to run
//! Python's signal handlers (a Ctrl-C raises `KeyboardInterrupt` there) and to report a grid
//! run's progress; either raising cancels the call (the core stops handing out chunks and
//! rounds, abandons the chunks it waits for to their devices, and returns), and the
//! exception is raised once the work has stopped. A panic anywhere in the work becomes an `AmariGpuError`, never a
//! `PanicException`. Core errors are mapped onto the package's exceptions.
//!
//! A call site that names its size class ([`Sized`]) runs on the calling thread instead
//! (still without the GIL, which a worker thread's log record may need) when its last
//! call of that class took only the engine's fast path: work that short needs no watching,
//! and a thread of its own would cost more than the work.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use amari_gpu::Interrupt;
use pyo3::prelude::*;

use crate::errors::to_pyerr;

/// How often the caller checks for signals while the work runs.
const POLL: Duration = Duration::from_millis(20);
/// Least time between two calls of a progress callback.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Runs `work` without the GIL and maps its outcome.
pub fn run_detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> amari_gpu::Result<T> + Send,
{
    run_watched(py, None, work)
}

/// Per context: whether the last call of a call site and size class took only the
/// engine's fast path (true) or was planned and split (false).
#[derive(Debug, Default)]
pub struct ShortCalls(Mutex<HashMap<(&'static str, u32), bool>>);

/// A call site's size class, for [`run_sized`]: the context's [`ShortCalls`] and the
/// class (bits of its largest dimension's size, rounded up to a power of two).
pub struct Sized<'a> {
    pub(crate) calls: &'a ShortCalls,
    pub(crate) size: usize,
}

/// [`run_detached`], or on the calling thread (the GIL released all the same) when the
/// last call of this call site (`F`'s type) and size class took only the fast path.
pub fn run_sized<T, F>(py: Python<'_>, sized: Option<Sized<'_>>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> amari_gpu::Result<T> + Send,
{
    let Some(sized) = sized else {
        return run_detached(py, work);
    };
    let key = (
        std::any::type_name::<F>(),
        usize::BITS - sized.size.saturating_sub(1).leading_zeros(),
    );
    let short = |calls: &ShortCalls| {
        calls
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .copied()
    };
    let interrupt = Interrupt::new();
    let outcome = if short(sized.calls) == Some(true) {
        let outcome = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| Interrupt::scope(&interrupt, work))).unwrap_or_else(
                |panic| Err(amari_gpu::Error::from_panic("the call", panic.as_ref())),
            )
        });
        py.check_signals()?;
        outcome.map_err(|e| to_pyerr(py, e))
    } else {
        run_in(py, None, &interrupt, work)
    };
    // A call that ran no kernel (a check) is as short as its caller's next one.
    let fast = !interrupt.took_split_path();
    if short(sized.calls) != Some(fast) {
        let mut calls = sized.calls.0.lock().unwrap_or_else(PoisonError::into_inner);
        calls.insert(key, fast);
    }
    outcome
}

/// [`run_detached`], calling `progress(steps_done, steps_total)` between a grid run's rounds
/// (at most every 0.1 s); an exception it raises cancels the run and is raised.
pub fn run_watched<T, F>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    work: F,
) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> amari_gpu::Result<T> + Send,
{
    run_in(py, progress, &Interrupt::new(), work)
}

/// [`run_watched`] with `interrupt` as the call's.
fn run_in<T, F>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    interrupt: &Arc<Interrupt>,
    work: F,
) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> amari_gpu::Result<T> + Send,
{
    let mut raised: Option<PyErr> = None;
    let outcome = std::thread::scope(|scope| {
        let ended = Arc::new(Ended::default());
        let worker_ended = Arc::clone(&ended);
        let worker_interrupt = Arc::clone(interrupt);
        let handle = scope.spawn(move || {
            // Tells the caller when the work ends, however it ends.
            let _signal = EndSignal(worker_ended);
            catch_unwind(AssertUnwindSafe(|| {
                Interrupt::scope(&worker_interrupt, work)
            }))
        });
        let mut last_progress: Option<Instant> = None;
        loop {
            if py.detach(|| ended.wait(POLL)) {
                break;
            }
            if raised.is_some() {
                continue;
            }
            if let Err(e) = py.check_signals() {
                interrupt.cancel();
                raised = Some(e);
                continue;
            }
            let due = last_progress.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY);
            if let (Some(callback), true) = (progress, due) {
                if let Some(steps) = interrupt.take_progress() {
                    last_progress = Some(Instant::now());
                    if let Err(e) = callback.call1(steps) {
                        interrupt.cancel();
                        raised = Some(e);
                    }
                }
            }
        }
        py.detach(|| handle.join())
    });
    if let Some(e) = raised {
        return Err(e);
    }
    py.check_signals()?;
    let outcome = match outcome {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(panic)) | Err(panic) => {
            Err(amari_gpu::Error::from_panic("the call", panic.as_ref()))
        }
    };
    // The last progress of a run that ended between two polls.
    if let (Some(callback), Ok(_)) = (progress, &outcome) {
        if let Some(steps) = interrupt.take_progress() {
            callback.call1(steps)?;
        }
    }
    outcome.map_err(|e| to_pyerr(py, e))
}

/// Whether the work has ended, and a condition variable to wait for it.
#[derive(Default)]
struct Ended {
    flag: Mutex<bool>,
    changed: Condvar,
}

impl Ended {
    /// Waits up to `limit` for the end; whether it came.
    fn wait(&self, limit: Duration) -> bool {
        let flag = self.flag.lock().unwrap_or_else(PoisonError::into_inner);
        let (flag, _) = self
            .changed
            .wait_timeout_while(flag, limit, |ended| !*ended)
            .unwrap_or_else(PoisonError::into_inner);
        *flag
    }
}

/// Sets [`Ended`] when dropped.
struct EndSignal(Arc<Ended>);

impl Drop for EndSignal {
    fn drop(&mut self) {
        *self.0.flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.0.changed.notify_all();
    }
}
