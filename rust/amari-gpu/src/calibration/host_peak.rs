//! The host device's arithmetic limits: the host twin of `shaders/peak.wgsl`. Eight
//! independent chains of one operation (a fused multiply-add, an add, or the max-plus step,
//! an add then a max) on a block of lanes each, run on every thread of the device's pool at
//! once and compiled for the widest SIMD level the CPU has (`host::simd::dispatch`). A block
//! is one vector register of the level (16 lanes with AVX-512, 8 with AVX2, 4 otherwise), so
//! the eight chains and the two operands fit the register file and the loop holds nothing
//! but the eight vector operations (checked in the disassembly: twelve named chains made the
//! compiler spill the 8-lane chains at AVX2). The loop is issue-bound, not latency-bound: on
//! the AMD EPYC here it issues one 16-lane add or max per cycle and core (29 G max-plus
//! steps per second and thread), the rate of the max-plus kernel's own register tile
//! (`tropical::host_kernel`) on operands in L1, and four chains reach the same rate.
//!
//! What it measures is what the CPU issues, not what a kernel reaches. Each thread times its
//! own loop; a run whose threads all ran at once (each thread's interval nearly all inside
//! the one all of them share) counts the sum of the threads' own rates, any other run only
//! its work over the span from the first start to the last end. The limit is the best of
//! [`RUNS`] runs of a few milliseconds: a busy machine (other processes on its cores, a
//! thread woken late) only ever makes a run slower, and short runs are often undisturbed.

use std::hint::black_box;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::host::device::HostDevice;
use crate::host::simd::{dispatch, Level, Task};

/// Independent chains per thread.
const CHAINS: usize = 8;
/// Steps of the first timed run; runs grow fourfold until one takes [`TARGET_S`]. Large
/// enough that a run is milliseconds of work at any SIMD level, not a thread hand-off.
const FIRST_STEPS: usize = 1 << 16;
/// Timed runs at the size found; the fastest is kept.
const RUNS: usize = 15;
/// Seconds a timed run is sized to take.
const TARGET_S: f64 = 0.005;
/// The share of each thread's interval that must lie inside the interval all threads share
/// for a run to count the threads' own rates.
const TOGETHER: f64 = 0.9;
/// The most steps a run grows to (a limit for a machine too slow to reach the target).
const MAX_STEPS: usize = 1 << 24;

/// The operation a loop repeats: `OP` of [`Chains`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `x * m + s`, one rounding: two flops a step.
    Fma,
    /// `x + m`: one operation a step.
    Add,
    /// `max(x + m, s)`: two operations a step (the max-plus step).
    Max,
}

impl Op {
    /// Operations one step counts.
    pub fn ops_per_step(self) -> f64 {
        match self {
            Op::Fma | Op::Max => 2.0,
            Op::Add => 1.0,
        }
    }
}

const FMA: u8 = 0;
const ADD: u8 = 1;
const MAX: u8 = 2;

/// Lanes of one chain at `level`: one vector register of f32.
fn lanes(level: Level) -> usize {
    match level {
        Level::Avx512 => 16,
        Level::Avx2 => 8,
        Level::Portable | Level::Neon => 4,
    }
}

/// One step of operation `OP` on a block of lanes.
#[inline(always)]
fn step<const OP: u8, const L: usize>(x: [f32; L], m: [f32; L], s: [f32; L]) -> [f32; L] {
    let mut y = [0.0f32; L];
    for l in 0..L {
        y[l] = match OP {
            FMA => x[l].mul_add(m[l], s[l]),
            ADD => x[l] + m[l],
            // `max` as the comparison the vector max instruction makes (no NaN arises
            // here), so it compiles to that one instruction.
            _ => {
                let t = x[l] + m[l];
                if t > s[l] {
                    t
                } else {
                    s[l]
                }
            }
        };
    }
    y
}

/// One thread's chains: `steps` steps of operation `OP` on each of `L` lanes of each chain.
/// The operation and the width are constants of the type, so the compiled loop holds
/// nothing but the chains' vector operations, each chain a named value kept in a register.
struct Chains<const OP: u8, const L: usize> {
    steps: usize,
    seed: f32,
}

impl<const OP: u8, const L: usize> Task for Chains<OP, L> {
    type Output = f32;

    #[inline(always)]
    fn run(self) -> f32 {
        // Lane constants made opaque, so no step is folded at compile time.
        let m: [f32; L] = black_box(std::array::from_fn(|l| 0.999 - 0.001 * l as f32));
        let s: [f32; L] = black_box(std::array::from_fn(|l| self.seed + l as f32));
        // Named chains, not an array indexed in the loop: each stays in its own register.
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h]: [[f32; L]; CHAINS] =
            std::array::from_fn(|c| std::array::from_fn(|l| s[l] + c as f32));
        for _ in 0..self.steps {
            a = step::<OP, L>(a, m, s);
            b = step::<OP, L>(b, m, s);
            c = step::<OP, L>(c, m, s);
            d = step::<OP, L>(d, m, s);
            e = step::<OP, L>(e, m, s);
            f = step::<OP, L>(f, m, s);
            g = step::<OP, L>(g, m, s);
            h = step::<OP, L>(h, m, s);
        }
        [a, b, c, d, e, f, g, h].iter().flatten().sum()
    }
}

/// One thread's run of `steps` steps of `op` at the width of `level`.
fn chains(op: Op, level: Level, steps: usize, seed: f32) -> f32 {
    macro_rules! at_width {
        ($lanes:literal) => {
            match op {
                Op::Fma => dispatch(Chains::<FMA, $lanes> { steps, seed }),
                Op::Add => dispatch(Chains::<ADD, $lanes> { steps, seed }),
                Op::Max => dispatch(Chains::<MAX, $lanes> { steps, seed }),
            }
        };
    }
    match lanes(level) {
        16 => at_width!(16),
        8 => at_width!(8),
        _ => at_width!(4),
    }
}

/// When each thread of one run started and ended its loop.
type Intervals = Vec<(Instant, Instant)>;

/// Every thread of the pool running `steps` steps of `op` at once, each timing its own loop.
fn run(host: &HostDevice, op: Op, steps: usize) -> Intervals {
    host.pool.run_with(|| {
        rayon::broadcast(|b| {
            let start = Instant::now();
            black_box(chains(op, host.simd, steps, b.index() as f32));
            (start, Instant::now())
        })
    })
}

/// Work units per second of one run in which each thread did `work` units: the sum of the
/// threads' own rates when they ran together (each thread's interval at least [`TOGETHER`]
/// inside the one they all share), else all the work over the span from the first start to
/// the last end (never more than the threads did at once).
fn run_rate(intervals: &[(Instant, Instant)], work: f64) -> f64 {
    let seconds =
        |(start, end): (Instant, Instant)| end.saturating_duration_since(start).as_secs_f64();
    let (Some(first), Some(last)) = (
        intervals.iter().map(|i| i.0).min(),
        intervals.iter().map(|i| i.1).max(),
    ) else {
        return 0.0;
    };
    let shared_from = intervals.iter().map(|i| i.0).max().unwrap_or(first);
    let shared_to = intervals.iter().map(|i| i.1).min().unwrap_or(last);
    let shared = seconds((shared_from, shared_to));
    let together = intervals.iter().all(|&i| shared >= TOGETHER * seconds(i));
    if together {
        intervals.iter().map(|&i| work / seconds(i).max(1e-9)).sum()
    } else {
        intervals.len() as f64 * work / seconds((first, last)).max(1e-9)
    }
}

/// Operations per second of `op` on all the host device's threads: runs grown until one
/// takes about [`TARGET_S`], then the fastest of [`RUNS`] (see the module's note).
pub fn ops_per_s(host: &HostDevice, op: Op) -> Result<f64> {
    let span = |intervals: &Intervals| {
        let first = intervals.iter().map(|i| i.0).min();
        let last = intervals.iter().map(|i| i.1).max();
        first
            .zip(last)
            .map_or(0.0, |(a, b)| b.saturating_duration_since(a).as_secs_f64())
    };
    let mut steps = FIRST_STEPS;
    while span(&run(host, op, steps)) < TARGET_S / 2.0 && steps < MAX_STEPS {
        steps *= 4;
    }
    let work = (steps * CHAINS * lanes(host.simd)) as f64 * op.ops_per_step();
    let rate = (0..RUNS)
        .map(|_| run_rate(&run(host, op, steps), work))
        .fold(0.0, f64::max);
    if rate.is_finite() && rate > 0.0 {
        Ok(rate)
    } else {
        Err(Error::Internal(format!(
            "host {op:?} loop measured {rate} op/s"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::FmaMode;

    #[test]
    fn every_loop_gives_a_positive_finite_rate() {
        let host = HostDevice::new(2, FmaMode::Fused).expect("pool");
        for op in [Op::Fma, Op::Add, Op::Max] {
            let rate = ops_per_s(&host, op).expect("measured");
            assert!(rate.is_finite() && rate > 0.0, "{op:?}: {rate}");
        }
    }

    #[test]
    fn a_run_counts_the_threads_own_rates_only_when_they_ran_together() {
        let t0 = Instant::now();
        let ms = |x: u64| t0 + std::time::Duration::from_millis(x);
        // Two threads of 10 ms, one woken 0.5 ms late: together, 2 × 100 units / 10 ms
        // (the span from first start to last end would say 200 / 10.5 ms).
        let late = [
            (ms(0), ms(10)),
            (
                t0 + std::time::Duration::from_micros(500),
                ms(10) + std::time::Duration::from_micros(500),
            ),
        ];
        let rate = run_rate(&late, 100.0);
        assert!((rate - 20_000.0).abs() < 1e-6, "{rate}");
        // One after the other (a single core's worth): the span, 200 units / 20 ms.
        let apart = [(ms(0), ms(10)), (ms(10), ms(20))];
        assert!((run_rate(&apart, 100.0) - 10_000.0).abs() < 1e-6);
        // A thread preempted halfway (20 ms against 10): not together, so the span.
        let preempted = [(ms(0), ms(10)), (ms(0), ms(20))];
        assert!((run_rate(&preempted, 100.0) - 10_000.0).abs() < 1e-6);
        assert_eq!(run_rate(&[], 100.0), 0.0);
    }

    // The dispatched loops compute the chains they count, step by step, lane by lane, at
    // every width.
    #[test]
    fn loops_compute_their_chains() {
        fn expected(op: Op, lanes: usize, steps: usize, seed: f32) -> f32 {
            let mut sum = 0.0f32;
            for c in 0..CHAINS {
                for l in 0..lanes {
                    let (m, s) = (0.999 - 0.001 * l as f32, seed + l as f32);
                    let mut x = s + c as f32;
                    for _ in 0..steps {
                        x = match op {
                            Op::Fma => x.mul_add(m, s),
                            Op::Add => x + m,
                            Op::Max => (x + m).max(s),
                        };
                    }
                    sum += x;
                }
            }
            sum
        }
        let (steps, seed) = (37, 1.5);
        for level in [Level::Avx512, Level::Avx2, Level::Portable] {
            for op in [Op::Fma, Op::Add, Op::Max] {
                // `chains` dispatches to the CPU's own level; `level` only sets the width.
                let got = chains(op, level, steps, seed);
                assert_eq!(
                    got,
                    expected(op, lanes(level), steps, seed),
                    "{op:?} {level:?}"
                );
            }
        }
    }
}
