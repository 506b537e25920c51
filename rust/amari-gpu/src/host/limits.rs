//! Measured compute limits of the host device, for the benches that report a kernel's
//! fraction of its limit: the add/max issue rate, the most (add, max) pairs per second the
//! CPU issues on its packed registers at the host kernels' SIMD level over all of the
//! device's threads. Each thread runs independent chains `acc = max(acc, acc + d)` (one add
//! and one max per lane and step, the work of one tropical term), enough chains that the
//! latency of each is hidden and only the issue rate is left. Each thread times itself on
//! its own CPU clock where the platform has one (Unix), so other work on a busy machine
//! does not pass for a lower limit; the rate is the sum of the threads' best rates.

use std::time::Instant;

use super::device::HostPool;
use super::simd::{Level, Task};
use crate::error::Result;

/// Steps of each chain per thread and repetition.
const STEPS: usize = 1 << 19;
/// Repetitions per thread; the fastest is taken (the others met interrupts or cache misses).
const REPEATS: usize = 5;

/// The add/max issue rate of the host: pairs per second over `threads` threads at `level`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AddMaxLimit {
    /// Add-and-max pairs (one per lane) per second, all threads together.
    pub pairs_per_second: f64,
    /// The SIMD level measured.
    pub level: Level,
    /// Threads measured.
    pub threads: usize,
}

/// Measures the add/max issue rate at the detected SIMD level on `threads` threads.
pub fn add_max_limit(threads: usize) -> Result<AddMaxLimit> {
    add_max_limit_at(Level::detect(), threads)
}

/// Measures the add/max issue rate at `level` (one the CPU has) on `threads` threads.
pub fn add_max_limit_at(level: Level, threads: usize) -> Result<AddMaxLimit> {
    let pool = HostPool::new(threads)?;
    let threads = pool.threads();
    let rates: Vec<f64> = pool.run_with(|| {
        rayon::broadcast(|_| {
            (0..REPEATS)
                .map(|_| {
                    let start = thread_seconds();
                    let pairs = chains(level);
                    pairs as f64 / (thread_seconds() - start).max(1e-9)
                })
                .fold(0.0, f64::max)
        })
    });
    Ok(AddMaxLimit {
        pairs_per_second: rates.iter().sum(),
        level,
        threads,
    })
}

/// Seconds of this thread's CPU time (Unix), else of wall time.
fn thread_seconds() -> f64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock_gettime` writes one `timespec` through a valid pointer to a local.
        #[allow(unsafe_code)]
        let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        if status == 0 {
            return t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9;
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// One thread's chains at `level`: returns the pairs issued.
fn chains(level: Level) -> usize {
    let (start, step) = (std::hint::black_box(1.0f32), std::hint::black_box(-1.0f32));
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Level::Avx512` is only built by `Level::detect` (or lowered from it)
        // after `is_x86_feature_detected!` found AVX-512F, AVX2 and FMA; the function
        // touches registers only.
        #[allow(unsafe_code)]
        Level::Avx512 => unsafe { x86::chains512(start, step) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, `Level::Avx2` or wider means AVX2 and FMA were detected.
        #[allow(unsafe_code)]
        Level::Avx2 => unsafe { x86::chains256(start, step) },
        _ => Portable(start, step).run(),
    }
}

/// Chains in plain arrays the compiler vectorises (SSE2 or NEON).
struct Portable(f32, f32);

impl Task for Portable {
    type Output = usize;
    #[inline(always)]
    fn run(self) -> usize {
        const CHAINS: usize = 8;
        const LANES: usize = 4;
        let mut acc = [[self.0; LANES]; CHAINS];
        for _ in 0..STEPS {
            for chain in &mut acc {
                for v in chain.iter_mut() {
                    let s = *v + self.1;
                    *v = if s > *v { s } else { *v };
                }
            }
        }
        std::hint::black_box(acc);
        STEPS * CHAINS * LANES
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::STEPS;

    /// Chains of `$lanes`-lane vectors, `$chains` of them (of the 32 or 16 registers, the
    /// rest free for the sums and the step).
    macro_rules! chains {
        ($name:ident, $features:literal, $chains:literal, $lanes:literal, $set1:ident,
         $add:ident, $max:ident) => {
            #[target_feature(enable = $features)]
            pub(super) fn $name(start: f32, step: f32) -> usize {
                let d = $set1(step);
                let mut acc = [$set1(start); $chains];
                for _ in 0..STEPS {
                    for v in &mut acc {
                        *v = $max($add(*v, d), *v);
                    }
                }
                std::hint::black_box(acc);
                STEPS * $chains * $lanes
            }
        };
    }

    chains!(
        chains512,
        "avx512f,avx2,fma",
        16,
        16,
        _mm512_set1_ps,
        _mm512_add_ps,
        _mm512_max_ps
    );
    chains!(
        chains256,
        "avx2,fma",
        14,
        8,
        _mm256_set1_ps,
        _mm256_add_ps,
        _mm256_max_ps
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_measures_a_positive_finite_rate() {
        for level in Level::available() {
            let limit = add_max_limit_at(level, 1).unwrap();
            assert!(limit.pairs_per_second.is_finite() && limit.pairs_per_second > 0.0);
            assert_eq!((limit.level, limit.threads), (level, 1));
        }
    }
}
