//! The one way core work is run from Python: on a thread of its own with the GIL released,
//! while the calling thread watches it. Every `POLL` the caller takes the GIL briefly to run
//! Python's signal handlers (a Ctrl-C raises `KeyboardInterrupt` there) and to report a grid
//! run's progress; either raising cancels the call (the core stops handing out chunks and
//! rounds, abandons the chunks it waits for to their devices, and returns), and the
//! exception is raised once the work has stopped. A panic anywhere in the work becomes an `AmariGpuError`, never a
//! `PanicException`. Core errors are mapped onto the package's exceptions.

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
    let interrupt = Interrupt::new();
    let mut raised: Option<PyErr> = None;
    let outcome = std::thread::scope(|scope| {
        let ended = Arc::new(Ended::default());
        let worker_ended = Arc::clone(&ended);
        let worker_interrupt = Arc::clone(&interrupt);
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
