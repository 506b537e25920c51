//! Where the host pool's threads run. A fork-join kernel waits for its slowest thread, and on
//! the 2-vCPU Xeon VM of `docs/benchmarks.md` a call often ran with the pool's two threads
//! on one CPU, the other idle: a 1024² max-plus product timed 0.3 s after the last call took
//! 22-24 ms (its CPU time, 24 ms, as if on one core; each thread preempted 30-40 times), and
//! 15-17 ms with the threads pinned one to a CPU. Linux places a woken thread on an idle CPU
//! when it sees one, and the threads, moved apart at the start of a call and free again,
//! were moved back beside each other within the call. But a pinned thread cannot leave a
//! CPU another program keeps busy: with one busy loop beside a pinned pool, the same product
//! took 36 against 28 ms, a 2²⁰-row Cl(3,0) product 34 against 8 ms and a Fisher call 129
//! against 43 ms.
//!
//! So a pool with one thread per CPU the process may use is bound one thread to a CPU while
//! the rest of the machine is quiet and free while other programs keep its CPUs busy
//! ([`Binding`], the default); `AMARI_GPU_HOST_PIN=1` binds it always (as OpenMP's
//! `OMP_PROC_BIND`, for a machine the computation has to itself), `0` never.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Environment variable that binds a pool with one thread per CPU always (`1`), never
/// (`0`), or while the machine is quiet (unset, or anything else).
pub const PIN_ENV: &str = "AMARI_GPU_HOST_PIN";

/// How a pool with one thread per CPU the process may use places its threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Where the system puts them.
    Free,
    /// Thread `i` on the `i`-th CPU, always.
    Pinned,
    /// Pinned while the rest of the machine is quiet, free while it is busy ([`Binding`]).
    WhileQuiet,
}

/// The placement [`PIN_ENV`] asks for.
pub fn placement() -> Placement {
    match std::env::var(PIN_ENV).as_deref().map(str::trim) {
        Ok("1") => Placement::Pinned,
        Ok("0") => Placement::Free,
        _ => Placement::WhileQuiet,
    }
}

/// The CPUs to pin a pool of `threads` threads to (always or while the machine is quiet,
/// as `how` says), thread `i` to the `i`-th: those this process may run on, if there are
/// exactly `threads` of them (a smaller pool, one of several sharing the machine, or a
/// larger one stays free); none when `how` is [`Placement::Free`].
pub fn cpus_for(threads: usize, how: Placement) -> Option<Vec<usize>> {
    match how {
        Placement::Free => None,
        _ => pinned_cpus(threads),
    }
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

/// Others' share of the machine's CPU time above which bound threads are freed, and below
/// which free threads are bound (between the two, they stay as they are).
const BUSY_SHARE: f64 = 0.3;
/// See [`BUSY_SHARE`].
const QUIET_SHARE: f64 = 0.15;
/// Least time between two decisions: the system's CPU counters tick every 10 ms, so a
/// share over 100 ms is good to about 10%.
const DECIDE_EVERY: Duration = Duration::from_millis(100);

/// A pool's threads bound one to a CPU while the rest of the machine is quiet. At the start
/// of a call (at most every [`DECIDE_EVERY`]) it compares the CPU time every CPU spent busy
/// since the last decision with this process's own: when other programs took more than
/// [`BUSY_SHARE`] of the machine, the threads are freed (so that none waits behind them on
/// its CPU), and when they took less than [`QUIET_SHARE`], bound again. This process's own
/// threads (another pool, a peer library) never count: they are not what a pinned thread
/// cannot escape from, as the process's own work is the caller's to order.
#[derive(Debug)]
pub struct Binding {
    cpus: Arc<[usize]>,
    state: Mutex<BindingState>,
}

#[derive(Debug, Default)]
struct BindingState {
    bound: bool,
    since: Option<Sample>,
}

/// The machine's busy CPU time and this process's, at one moment.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    busy: Duration,
    ours: Duration,
    cpus: usize,
}

impl Binding {
    /// Threads bound to `cpus` (thread `i` to the `i`-th) while the machine is quiet; free
    /// until the first decision.
    pub fn new(cpus: Vec<usize>) -> Binding {
        Binding {
            cpus: cpus.into(),
            state: Mutex::new(BindingState {
                bound: false,
                since: Sample::take(),
            }),
        }
    }

    /// The CPUs, thread `i`'s the `i`-th.
    pub fn cpus(&self) -> Arc<[usize]> {
        Arc::clone(&self.cpus)
    }

    /// Notes that the threads were bound (or freed) by other means than [`Binding::decide`].
    pub fn set(&self, bound: bool) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bound = bound;
    }

    /// At the start of a call: `Some(true)` when the threads are to be bound now,
    /// `Some(false)` when freed, None when they stay as they are.
    pub fn decide(&self) -> Option<bool> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let since = state.since?;
        if since.at.elapsed() < DECIDE_EVERY {
            return None;
        }
        let now = Sample::take()?;
        state.since = Some(now);
        let bind = next_bound(state.bound, others_share(&since, &now))?;
        state.bound = bind;
        Some(bind)
    }
}

/// Whether threads bound (`bound`) stay bound or free ones are bound, when other programs
/// took `share` of the machine: None when that does not change.
fn next_bound(bound: bool, share: f64) -> Option<bool> {
    match bound {
        true if share > BUSY_SHARE => Some(false),
        false if share < QUIET_SHARE => Some(true),
        _ => None,
    }
}

/// Other programs' share of the machine's CPU time between two samples (0 to 1).
fn others_share(from: &Sample, to: &Sample) -> f64 {
    let wall = to.at.duration_since(from.at).as_secs_f64() * to.cpus.max(1) as f64;
    let busy = to.busy.saturating_sub(from.busy).as_secs_f64();
    let ours = to.ours.saturating_sub(from.ours).as_secs_f64();
    ((busy - ours) / wall.max(1e-9)).clamp(0.0, 1.0)
}

impl Sample {
    /// Now: None where the counters cannot be read (then threads stay free).
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn take() -> Option<Sample> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let (busy_ticks, cpus) = busy_ticks(&stat)?;
        // SAFETY: sysconf has no memory effects; `ts` is written by clock_gettime.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let got = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        if hz <= 0 || got != 0 {
            return None;
        }
        Some(Sample {
            at: Instant::now(),
            busy: Duration::from_secs_f64(busy_ticks as f64 / hz as f64),
            ours: Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
            cpus,
        })
    }

    /// Now: the counters are Linux's.
    #[cfg(not(target_os = "linux"))]
    fn take() -> Option<Sample> {
        None
    }
}

/// The ticks every CPU spent busy (user, nice, system, irq, softirq: not idle, waiting for
/// I/O or stolen by a hypervisor) from `/proc/stat`'s first line, and the number of CPUs.
fn busy_ticks(stat: &str) -> Option<(u64, usize)> {
    let mut lines = stat.lines();
    let total = lines.next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = total
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let busy = [0, 1, 2, 5, 6]
        .iter()
        .map(|&i| fields.get(i).copied())
        .sum::<Option<u64>>()?;
    let cpus = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l[3..].starts_with(|c: char| c.is_ascii_digit()))
        .count();
    Some((busy, cpus))
}

/// Lets the calling thread run on every CPU of `cpus` again.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn free_current(cpus: &[usize]) {
    // SAFETY: as in `pin_current`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        cpus.iter().for_each(|&c| libc::CPU_SET(c, &mut set));
        if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
            log::debug!("host pool thread not freed");
        }
    }
}

/// Frees the calling thread: nothing off Linux.
#[cfg(not(target_os = "linux"))]
pub fn free_current(_cpus: &[usize]) {}

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
        assert_eq!(cpus_for(cpus.len(), Placement::Free), None);
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

    /// Bound threads are freed past the busy share, free ones bound below the quiet one,
    /// and between the two nothing changes.
    #[test]
    fn threads_are_bound_while_others_leave_the_machine_quiet() {
        assert_eq!(next_bound(false, 0.0), Some(true));
        assert_eq!(next_bound(false, 0.2), None);
        assert_eq!(next_bound(false, 0.9), None);
        assert_eq!(next_bound(true, 0.1), None);
        assert_eq!(next_bound(true, 0.2), None);
        assert_eq!(next_bound(true, 0.5), Some(false));
    }

    /// Others' share is the machine's busy time less this process's, over the CPUs' wall
    /// time; `/proc/stat`'s busy ticks leave out idle, I/O wait and stolen time.
    #[test]
    fn others_share_leaves_out_this_processs_own_time() {
        let at = Instant::now();
        let sample = |ms: u64, busy: u64, ours: u64| Sample {
            at: at + Duration::from_millis(ms),
            busy: Duration::from_millis(busy),
            ours: Duration::from_millis(ours),
            cpus: 2,
        };
        // 100 ms on 2 CPUs: 150 ms busy, 130 of them ours: others took 10%.
        let share = others_share(&sample(0, 1000, 500), &sample(100, 1150, 630));
        assert!((share - 0.1).abs() < 1e-9, "{share}");
        assert_eq!(others_share(&sample(0, 0, 0), &sample(100, 50, 90)), 0.0);
        let stat = "cpu  10 1 4 100 7 2 3 9 0 0\ncpu0 5 0 2 50 3 1 1 4 0 0\n\
                    cpu1 5 1 2 50 4 1 2 5 0 0\nintr 1 2 3\n";
        assert_eq!(busy_ticks(stat), Some((20, 2)));
        assert_eq!(busy_ticks("intr 1\n"), None);
        if cfg!(target_os = "linux") {
            let now = Sample::take().expect("Linux's counters");
            assert!(now.cpus >= 1 && now.busy > Duration::ZERO);
        }
    }
}
