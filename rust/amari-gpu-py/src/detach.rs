//! The one way core work is run from Python: on a call thread (`amari_gpu::call_threads`,
//! parked between calls) with the GIL released, while the calling thread watches it. Every
//! `POLL` the caller takes the GIL briefly to run Python's signal handlers (a Ctrl-C raises
//! `KeyboardInterrupt` there) and to report a grid run's progress; either raising cancels
//! the call (the core stops handing out chunks and rounds, abandons the chunks it waits for
//! to their devices, and returns), and the exception is raised once the work has stopped. A
//! panic anywhere in the work becomes an `AmariGpuError`, never a `PanicException`. Core
//! errors are mapped onto the package's exceptions.
//!
//! A call site that names its size class ([`Sized`]) runs on the calling thread instead
//! (still without the GIL, which a worker thread's log record may need) when its last
//! call of that class ended within [`SHORT`]: work that short needs no watching (a Ctrl-C
//! during it is raised when it returns, no later than the watcher's next poll would have
//! raised it), and the two thread hops of a watched call cost more than the small ones
//! (about 0.1 ms of a 2 ms call on the 2-vCPU Xeon VM of `docs/benchmarks.md`).

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
/// The longest a call of a size class may have taken for the next one of that class to run
/// unwatched on the calling thread: one poll of the watcher.
const SHORT: Duration = POLL;

/// Runs `work` without the GIL and maps its outcome.
pub fn run_detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> amari_gpu::Result<T> + Send,
{
    run_in(py, None, &Interrupt::new(), work)
}

/// Per context: whether the last call of a call site and size class ended within
/// [`SHORT`] (true) or took longer (false).
#[derive(Debug, Default)]
pub struct ShortCalls(Mutex<HashMap<(&'static str, u32), bool>>);

/// A call site's size class, for [`run_sized`]: the context's [`ShortCalls`] and the
/// class (bits of the call's size, rounded up to a power of two: the elements of its
/// result, or a grid's cells times its steps).
pub struct Sized<'a> {
    pub(crate) calls: &'a ShortCalls,
    pub(crate) size: usize,
}

/// [`run_detached`], or on the calling thread (the GIL released all the same) when the
/// last call of this call site (`F`'s type) and size class ended within [`SHORT`].
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
    let began = Instant::now();
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
    // Judged by the time the work took, however it ended (a call interrupted while
    // watched took at least one poll, and is watched again next time).
    let ended_soon = began.elapsed() <= SHORT;
    if short(sized.calls) != Some(ended_soon) {
        let mut calls = sized.calls.0.lock().unwrap_or_else(PoisonError::into_inner);
        calls.insert(key, ended_soon);
    }
    outcome
}

/// A grid run: given `progress`, [`run_detached`] calling `progress(steps_done,
/// steps_total)` between its rounds (at most every 0.1 s; an exception it raises cancels the
/// run and is raised); without, [`run_sized`] in `sized`'s class (a grid's cells times its
/// steps, so that a long run of a grid is never taken for a short one).
pub fn run_watched<T, F>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    sized: Sized<'_>,
    work: F,
) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> amari_gpu::Result<T> + Send,
{
    match progress {
        Some(_) => run_in(py, progress, &Interrupt::new(), work),
        None => run_sized(py, Some(sized), work),
    }
}

/// The work with `interrupt` as the call's, on a call thread (`amari_gpu::call_threads`,
/// parked between calls), this thread watching it and calling `progress` when given.
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
    let ended = Arc::new(Ended::default());
    let outcome: Arc<Mutex<Option<std::thread::Result<amari_gpu::Result<T>>>>> =
        Arc::new(Mutex::new(None));
    let job: Box<dyn FnOnce() + Send + '_> = {
        let (ended, outcome, interrupt) = (
            Arc::clone(&ended),
            Arc::clone(&outcome),
            Arc::clone(interrupt),
        );
        Box::new(move || {
            // Tells the caller when the work ends, however it ends: after the outcome is
            // in its slot and `work` (with every borrow of the caller's) is gone.
            let _signal = EndSignal(ended);
            let done = catch_unwind(AssertUnwindSafe(|| Interrupt::scope(&interrupt, work)));
            *outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(done);
        })
    };
    // SAFETY: the job borrows what `work` borrows from this call's callers. This function
    // neither returns nor unwinds before the job has ended: `Watch` waits for its end when
    // dropped, on every way out of this scope, and the job signals the end (`EndSignal`,
    // dropped last) only once `work` has been consumed and its outcome stored. The outcome
    // and the signal are shared through `Arc`s, so nothing the job touches after the
    // signal is the caller's.
    #[allow(unsafe_code)]
    let job: amari_gpu::call_threads::Job = unsafe {
        std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Box<dyn FnOnce() + Send + 'static>>(
            job,
        )
    };
    let watch = Watch(&ended, py);
    if let Err(job) = amari_gpu::call_threads::start(job) {
        // No thread could be started: the work runs here, not watched.
        py.detach(job);
    }
    let mut raised: Option<PyErr> = None;
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
    drop(watch);
    if let Some(e) = raised {
        return Err(e);
    }
    py.check_signals()?;
    let taken = outcome
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let outcome = match taken {
        Some(Ok(outcome)) => outcome,
        Some(Err(panic)) => Err(amari_gpu::Error::from_panic("the call", panic.as_ref())),
        None => Err(amari_gpu::Error::Internal(
            "a call ended without an outcome".into(),
        )),
    };
    // The last progress of a run that ended between two polls.
    if let (Some(callback), Ok(_)) = (progress, &outcome) {
        if let Some(steps) = interrupt.take_progress() {
            callback.call1(steps)?;
        }
    }
    outcome.map_err(|e| to_pyerr(py, e))
}

/// Waits for the work's end when dropped (the GIL released, which the work's log records
/// may take): the caller's frame, which the work borrows, outlives it however the
/// watching ends.
struct Watch<'e, 'py>(&'e Ended, Python<'py>);

impl Drop for Watch<'_, '_> {
    fn drop(&mut self) {
        let ended = self.0;
        self.1.detach(|| while !ended.wait(POLL) {});
    }
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
