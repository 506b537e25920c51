//! Threads that run a call's work while the thread that made the call watches it (the
//! Python bindings run every long call this way, its caller polling for Ctrl-C): parked
//! between calls and handed the next one, rather than one spawned and joined per call. On
//! the 2-vCPU VM of `docs/benchmarks.md` a spawn took 53-57 µs before the work began and the
//! join 37 µs after it ended: about a fifth of a 0.4 ms Cl(3,0) product of 65,536 rows.
//!
//! A thread takes one call at a time. A call finding no thread parked starts a new one, so
//! calls from several Python threads at once each have their own; at most [`PARKED`] wait
//! for the next call, the others end after theirs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, PoisonError};

/// A call's work.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// Threads that wait for a call at most.
const PARKED: usize = 4;

/// The parked threads, each by the sender of its own queue.
static IDLE: Mutex<Vec<Sender<Job>>> = Mutex::new(Vec::new());

/// Calls the threads have run, since the process started.
static JOBS: AtomicU64 = AtomicU64::new(0);

/// How many calls have run on a call thread in this process (not those run by their caller
/// when no thread could be started): how a caller's tests see which calls were watched.
pub fn jobs_run() -> u64 {
    JOBS.load(Ordering::Relaxed)
}

/// The parked threads.
fn idle() -> std::sync::MutexGuard<'static, Vec<Sender<Job>>> {
    IDLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `job` on a parked thread, or on a new one when none is parked; gives `job` back
/// when no thread could be started (the system's limit), for the caller to run it itself.
pub fn start(job: Job) -> Result<(), Job> {
    let parked = idle().pop();
    let job = match parked {
        // A parked thread's queue never closes while it waits on it; a send that fails
        // (the thread gone) gives the job back to try a new thread.
        Some(queue) => match queue.send(job) {
            Ok(()) => return Ok(()),
            Err(returned) => returned.0,
        },
        None => job,
    };
    let (queue, jobs) = channel::<Job>();
    // The job rides in a slot the new thread empties, so a failed spawn still has it.
    let first = std::sync::Arc::new(Mutex::new(Some(job)));
    let theirs = std::sync::Arc::clone(&first);
    let spawned = std::thread::Builder::new()
        .name("amari-gpu call".into())
        .spawn(move || {
            let mut next = theirs.lock().unwrap_or_else(PoisonError::into_inner).take();
            drop(theirs);
            while let Some(job) = next.take() {
                // Counted before it runs: the caller may read the count as soon as it ends.
                JOBS.fetch_add(1, Ordering::Relaxed);
                job();
                let mut parked = idle();
                if parked.len() >= PARKED {
                    return;
                }
                parked.push(queue.clone());
                drop(parked);
                next = jobs.recv().ok();
            }
        });
    match spawned {
        Ok(_) => Ok(()),
        Err(e) => {
            log::debug!("no thread for a call ({e}): it runs on the calling thread");
            let job = first.lock().unwrap_or_else(PoisonError::into_inner).take();
            // The thread never ran, so the job is still in its slot.
            Err(job.expect("a job no thread took"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// Calls one after another reuse one parked thread; calls at once each get their own,
    /// and every job runs exactly once.
    #[test]
    fn calls_reuse_parked_threads_and_overlapping_calls_get_their_own() {
        let (tx, rx) = channel();
        let mut ran_on = Vec::new();
        for _ in 0..3 {
            let tx = tx.clone();
            start(Box::new(move || {
                tx.send(std::thread::current().id()).expect("send");
            }))
            .unwrap_or_else(|_| panic!("a thread"));
            let id = rx.recv_timeout(Duration::from_secs(10)).expect("ran");
            // Give the thread the moment it needs to park again before the next call.
            for _ in 0..1000 {
                if !idle().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_ne!(id, std::thread::current().id());
            ran_on.push(id);
        }
        // Other tests of this binary do not start calls, so the one parked thread took
        // every call.
        assert!(ran_on.windows(2).all(|w| w[0] == w[1]), "{ran_on:?}");
        // Two jobs that each wait for the other: they can only both finish on two threads.
        let barrier = Arc::new(std::sync::Barrier::new(2));
        for _ in 0..2 {
            let (b, tx) = (Arc::clone(&barrier), tx.clone());
            start(Box::new(move || {
                b.wait();
                tx.send(std::thread::current().id()).expect("send");
            }))
            .unwrap_or_else(|_| panic!("a thread"));
        }
        let a = rx.recv_timeout(Duration::from_secs(10)).expect("first");
        let b = rx.recv_timeout(Duration::from_secs(10)).expect("second");
        assert_ne!(a, b);
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
    }
}
