//! Blocked host rounds (`domain::host_blocked`) against stepping one step at a time, byte
//! for byte: heat and Life, every boundary, bands of one row, widths and band heights that
//! are not multiples of anything, passes split unevenly, several chunks, every SIMD level.

use std::ops::Range;

use super::bands::{Band, Geometry};
use super::host_blocked::{run, set_paces, single, Pass, Rows, Stencil};
use super::host_grid::{HeatStep, LifeStep};
use crate::host::simd::{force_level, Level};
use crate::kernel::FmaMode;

/// `n` pseudo-random values from `seed` (xorshift), mapped by `f`.
fn noise<T>(n: usize, seed: u64, f: impl Fn(u64) -> T) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f(x)
        })
        .collect()
}

/// Steps `1..=steps` of a band from `start`: one at a time (a whole step over the rows,
/// then the next) and blocked in passes of `depth` steps, each from the same two buffers
/// (the other one holding `junk`), also with the last pass into a place of its own and
/// with the first pass reading `start` where it is (checked against blocked); the rows the
/// last step computes, as bits, one at a time and blocked.
fn both<S: Stencil>(
    s: &S,
    rows: &(dyn Fn(usize) -> Range<usize> + Sync),
    (steps, depth): (usize, usize),
    start: &[S::Cell],
    junk: &[S::Cell],
) -> (Vec<u32>, Vec<u32>)
where
    S::Cell: bytemuck::Pod,
{
    let rl = s.row_len();
    let last = rows(steps);
    let bits = |b: &[S::Cell]| -> Vec<u32> {
        bytemuck::cast_slice(&b[last.start * rl..last.end * rl]).to_vec()
    };
    let mut one = [start.to_vec(), junk.to_vec()];
    for k in 1..=steps {
        let [x, y] = &mut one;
        let (src, dst) = if k % 2 == 1 { (&*x, y) } else { (&*y, x) };
        single(s, rows(k), src, dst);
    }
    // Blocked; blocked with the last pass writing the last step's rows into a place of
    // their own (both buffers then left as the pass before it left them); and blocked with
    // the first pass reading `start` where it is, from buffers that hold only junk.
    let mut blocked = [start.to_vec(), junk.to_vec()];
    let mut placed = [start.to_vec(), junk.to_vec()];
    let mut lent = [junk.to_vec(), junk.iter().rev().copied().collect()];
    let mut place = junk[..last.len() * rl].to_vec();
    let read = |r: usize| &start[r * rl..(r + 1) * rl];
    let mut k = 1;
    while k <= steps {
        let end = (k + depth).min(steps + 1);
        let pass = Pass {
            steps: k..end,
            rows,
            stop: &|| false,
        };
        let first: Option<&Rows<'_, S::Cell>> = (k == 1).then_some(&read);
        for (buffers, into, first) in [
            (&mut blocked, false, None),
            (&mut placed, end == steps + 1, None),
            (&mut lent, false, first),
        ] {
            let [x, y] = buffers;
            let (src, other) = if k % 2 == 1 { (x, y) } else { (y, x) };
            let into = into.then(|| (last.clone(), &mut place[..]));
            run(s, &pass, src, other, into, first);
        }
        k = end;
    }
    let placed: Vec<u32> = bytemuck::cast_slice(&place).to_vec();
    let blocked = bits(&blocked[steps % 2]);
    assert_eq!(
        placed, blocked,
        "the last step's rows written into their place"
    );
    assert_eq!(
        bits(&lent[steps % 2]),
        blocked,
        "the first pass reading the rows where they are"
    );
    (bits(&one[steps % 2]), blocked)
}

/// The float32 heat step the tests run on `band` of `g`, rows of `width` cells, α 0.23.
fn heat_step(band: &Band, g: Geometry, width: usize, fma: FmaMode) -> HeatStep {
    HeatStep {
        width,
        height: g.height,
        row0: if g.periodic { 0 } else { band.first_row() },
        rows: band.step_rows(1, g),
        periodic: g.periodic,
        alpha: 0.23,
        fma,
    }
}

/// Bands of a grid of `height` rows: the whole grid, a one-row band at each end and in
/// the middle, and an uneven band inside.
fn bands(height: usize) -> Vec<Range<usize>> {
    let mut all = vec![
        0..height,
        0..1,
        height - 1..height,
        height / 2..height / 2 + 1,
    ];
    if height > 6 {
        all.push(2..height - 3);
    }
    all
}

/// Heat and Life rounds blocked over their steps give the bytes of stepping them one at
/// a time: widths around the vec4 and word padding, bands of one row and whole grids,
/// both boundaries, both fma modes, depths that split a round unevenly, and tall bands
/// cut into several chunks (four threads) with in-place (even) and apart (odd) passes;
/// cells near f32::MAX make sums overflow to inf and NaN. Every SIMD level the CPU has
/// (AVX-512F, AVX2 forced, portable forced) gives the same bits.
#[test]
fn blocked_rounds_give_the_bytes_of_single_steps_at_every_simd_level() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .expect("pool");
    let mut levels: Vec<Option<Level>> = vec![None, Some(Level::Portable)];
    if Level::detect() == Level::Avx512 {
        levels.push(Some(Level::Avx2));
    }
    let mut per_level: Vec<Vec<Vec<u32>>> = Vec::new();
    for level in levels {
        force_level(level);
        let mut results = Vec::new();
        for (height, halo) in [(1, 3), (3, 2), (5, 4), (40, 5), (300, 16)] {
            for periodic in [false, true] {
                let g = Geometry {
                    height,
                    halo,
                    periodic,
                };
                for owned in bands(height) {
                    let band = Band::new(0, owned.clone(), g);
                    let rows = |k: usize| band.step_rows(k, g);
                    for width in [1usize, 2, 3, 5, 8, 67] {
                        if height == 300 && width < 67 {
                            continue;
                        }
                        let rc = width.div_ceil(4) * 4;
                        let n = band.buffer_rows() * rc;
                        let seed = (height * 1000 + width) as u64;
                        let huge = owned.len() == 1;
                        let start = noise(n, seed, |x| {
                            let v = (x >> 40) as f32 / (1u64 << 24) as f32;
                            if huge {
                                v * 3.0e38
                            } else {
                                v
                            }
                        });
                        let junk = noise(n, seed + 1, |x| (x >> 40) as f32);
                        for fma in [FmaMode::Fused, FmaMode::Separate] {
                            let step = heat_step(&band, g, width, fma);
                            for (steps, depth) in [(halo, 16), (halo, 2), (halo, 3), (1, 1)] {
                                let (one, blocked) = pool
                                    .install(|| both(&step, &rows, (steps, depth), &start, &junk));
                                assert_eq!(
                                    one, blocked,
                                    "heat {height}x{width} band {owned:?} halo {halo} \
                                     periodic {periodic} {fma:?} steps {steps} depth {depth}"
                                );
                                results.push(blocked);
                            }
                        }
                        if !periodic {
                            continue;
                        }
                        let words = width.div_ceil(4);
                        let cells = noise(band.buffer_rows() * words, seed, |x| {
                            (x as u32) & 0x0101_0101
                        });
                        let junk = noise(cells.len(), seed + 2, |x| x as u32);
                        let step = LifeStep {
                            width,
                            rows: rows(1),
                        };
                        for (steps, depth) in [(halo, 16), (halo, 2), (halo, 3)] {
                            let (one, blocked) =
                                pool.install(|| both(&step, &rows, (steps, depth), &cells, &junk));
                            assert_eq!(
                                one, blocked,
                                "life {height}x{width} band {owned:?} halo {halo} \
                                 steps {steps} depth {depth}"
                            );
                        }
                    }
                }
            }
        }
        per_level.push(results);
    }
    force_level(None);
    assert!(per_level.windows(2).all(|w| w[0] == w[1]), "levels differ");
    assert!(
        per_level[0]
            .iter()
            .flatten()
            .any(|&b| f32::from_bits(b).is_nan()),
        "the huge cells reached NaN somewhere"
    );
}

/// Passes with a chunk for every thread, cut by the threads' paces: heat rounds of a tall
/// band on two threads, with the paces set unevenly either way before the first pass (and
/// measured after it), give the bytes of single steps, in place (even passes) and apart
/// (odd), wrapped or not, fused or not.
#[test]
fn passes_cut_by_the_threads_paces_give_the_bytes_of_single_steps() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    let (height, width) = (300, 67usize);
    for periodic in [false, true] {
        let g = Geometry {
            height,
            halo: 16,
            periodic,
        };
        let band = Band::new(0, 0..height, g);
        let rows = |k: usize| band.step_rows(k, g);
        let rc = width.div_ceil(4) * 4;
        let n = band.buffer_rows() * rc;
        let start = noise(n, 7, |x| (x >> 40) as f32 / (1u64 << 24) as f32);
        let junk = noise(n, 8, |x| (x >> 40) as f32);
        for fma in [FmaMode::Fused, FmaMode::Separate] {
            let step = heat_step(&band, g, width, fma);
            for paces in [vec![1.0, 9.0], vec![9.0, 1.0], vec![1.0, 1.0]] {
                for (steps, depth) in [(16, 16), (15, 15), (16, 5)] {
                    let (one, blocked) = pool.install(|| {
                        set_paces(paces.clone());
                        both(&step, &rows, (steps, depth), &start, &junk)
                    });
                    assert_eq!(
                        one, blocked,
                        "periodic {periodic} {fma:?} paces {paces:?} steps {steps} depth {depth}"
                    );
                }
            }
        }
    }
}
