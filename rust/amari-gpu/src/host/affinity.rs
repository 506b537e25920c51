//! The host pool's threads, one to a CPU, when the user asks (`AMARI_GPU_HOST_PIN=1`). A
//! fork-join kernel waits for its slowest thread, and on the 2-vCPU Xeon VM of
//! `docs/benchmarks.md` a call made after an idle spell often ran with the pool's two
//! threads on one CPU: a 1024² max-plus product timed 50-60 ms after the last call took
//! 26-27 ms (its CPU time, 27 ms, as if on one core), and 16-17 ms with the threads pinned
//! (15 ms back to back either way). Pinning is not the default because a pinned thread
//! cannot leave a CPU another program keeps busy: with one busy loop beside it, the same
//! product took 36 against 28 ms, a 2²⁰-row Cl(3,0) product 34 against 8 ms and a Fisher
//! call 129 against 43 ms. So it is for a machine the computation has to itself, as
//! OpenMP's `OMP_PROC_BIND` is. Moving the threads to their CPUs at the start of each call
//! and letting them free again did not help: every wake-up places a thread anew.

/// Environment variable that pins a pool with one thread per CPU when it is `1`.
pub const PIN_ENV: &str = "AMARI_GPU_HOST_PIN";

/// The CPUs to pin a pool of `threads` threads to, thread `i` to the `i`-th: when
/// [`PIN_ENV`] is `1`, those this process may run on, if there are exactly `threads` of them
/// (a smaller pool, one of several sharing the machine, or a larger one stays free).
pub fn cpus_for(threads: usize) -> Option<Vec<usize>> {
    let asked = std::env::var(PIN_ENV).is_ok_and(|v| v.trim() == "1");
    asked.then(|| pinned_cpus(threads)).flatten()
}

/// The CPUs a pool of `threads` threads is pinned to when pinning is asked for.
fn pinned_cpus(threads: usize) -> Option<Vec<usize>> {
    let cpus = allowed_cpus();
    (cpus.len() > 1 && cpus.len() == threads).then_some(cpus)
}

/// The CPUs this process may run on, in increasing order (empty where that is unknown).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain bit set the call fills; pid 0 is the calling thread.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if got != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// The CPUs this process may run on: unknown off Linux.
#[cfg(not(target_os = "linux"))]
pub fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// Keeps the calling thread on `cpu`. A refusal (a CPU taken away since) leaves the thread
/// where the system puts it: pinning is a placement hint, never a failure.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn pin_current(cpu: usize) {
    // SAFETY: as in `allowed_cpus`; the set names one CPU below CPU_SETSIZE (it came from
    // `allowed_cpus`).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
            log::debug!("host pool thread not pinned to CPU {cpu}");
        }
    }
}

/// Keeps the calling thread on `cpu`: nothing off Linux.
#[cfg(not(target_os = "linux"))]
pub fn pin_current(_cpu: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a pool with one thread per allowed CPU is pinned, only when asked, and a pinned
    /// thread runs on its CPU alone.
    #[test]
    fn a_pool_of_one_thread_per_cpu_is_pinned_one_to_a_cpu_when_asked() {
        let cpus = allowed_cpus();
        if cfg!(target_os = "linux") {
            assert!(!cpus.is_empty());
        }
        assert_eq!(pinned_cpus(cpus.len() + 1), None);
        assert_eq!(pinned_cpus(1), None);
        if std::env::var(PIN_ENV).is_err() {
            assert_eq!(cpus_for(cpus.len()), None);
        }
        if cpus.len() > 1 {
            assert_eq!(pinned_cpus(cpus.len()).as_deref(), Some(&cpus[..]));
            let last = *cpus.last().expect("a CPU");
            let on = std::thread::spawn(move || {
                pin_current(last);
                allowed_cpus()
            })
            .join()
            .expect("thread");
            assert_eq!(on, vec![last]);
        }
    }
}
