//! The blocked host SYRK against the unblocked one it replaced, word for word: the previous
//! kernel's arithmetic written as plain loops (every entry one chain over the slice's rows
//! from 0; for 8 × 8 blocks, 64 thread chains added in thread order), on every SIMD level
//! this CPU has (forced through `FisherSyrk::run_at`), both `fma` roundings, and sizes that
//! hit every edge: one row, row counts around the packed block and the 64-thread round,
//! P not a multiple of 4, 8, 16 or 64 (partial vector lanes), signed zeros, subnormals and
//! products that overflow. The one change from the previous kernel: entries below the
//! diagonal of a diagonal 64 × 64 tile (mirrored ones the reduction never reads) are 0.

use super::host_syrk::FisherSyrk;
use super::shape::SyrkShape;
use crate::host::arith::madd;
use crate::host::simd::Level;
use crate::host::HostPool;
use crate::kernel::FmaMode;

/// Deterministic values with every edge a chain can meet: mostly ordinary magnitudes,
/// some zeros of both signs, subnormals, and values whose products overflow to ±inf.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 40) as f32 / (1u64 << 24) as f32;
            match state % 97 {
                0 => 0.0,
                1 => -0.0,
                2 => 1e-39 * (u - 0.5),
                3 => 3e38 * (u - 0.5),
                _ => 4.0 * (u - 0.5),
            }
        })
        .collect()
}

/// The previous kernel's partial of `n` padded rows, as plain loops.
fn reference<const F: bool>(s: SyrkShape, rows: &[f32], w: &[f32], n: usize) -> Vec<f32> {
    let e = s.tile;
    let at = |r: usize, c: usize| if c < s.width { rows[r * s.width + c] } else { 0.0 };
    let mut out = Vec::with_capacity(s.partial_words());
    for slice in 0..s.slices {
        let (base, extra) = (n / s.slices, n % s.slices);
        let start = slice * base + slice.min(extra);
        let slice_rows = start..start + base + usize::from(slice < extra);
        for ti in 0..s.tiles {
            for tj in ti..s.tiles {
                for r in 0..e {
                    for c in 0..e {
                        let (i, j) = (ti * e + r, tj * e + c);
                        let chain = |rows: &mut dyn Iterator<Item = usize>| {
                            rows.fold(0.0f32, |acc, k| madd::<F>(at(k, i) * w[k], at(k, j), acc))
                        };
                        out.push(if e == 64 && ti == tj && c < r {
                            // Below the diagonal of a diagonal tile: never read, written as 0.
                            0.0
                        } else if e == 64 {
                            chain(&mut slice_rows.clone())
                        } else {
                            (0..64).fold(0.0f32, |total, t| {
                                total + chain(&mut slice_rows.clone().skip(t).step_by(64))
                            })
                        });
                    }
                }
            }
        }
    }
    out
}

fn same(what: &str, want: &[f32], got: &[f32]) {
    assert_eq!(want.len(), got.len(), "{what}: length");
    for (k, (a, b)) in want.iter().zip(got).enumerate() {
        // Overflowing chains meet inf − inf: any NaN is that NaN (the sign or payload of
        // an invalid operation's NaN is not something the devices agree on either).
        let both_nan = a.is_nan() && b.is_nan();
        assert!(
            both_nan || a.to_bits() == b.to_bits(),
            "{what}: word {k}: want {a:e}, got {b:e}"
        );
    }
}

#[test]
fn blocked_kernels_give_the_unblocked_bits_at_every_simd_level() {
    let pool = HostPool::new(2).unwrap();
    let levels = [Level::Portable, Level::Avx2, Level::Avx512];
    let mut nan_seen = false;
    for p in [1, 3, 8, 13, 30, 36, 44, 63, 64, 65, 100, 130, 200] {
        for n in [1, 2, 63, 64, 65, 127, 256, 257, 300, 1031] {
            let shape = SyrkShape::new(p);
            let rows = values(n * shape.width, (p * 1000 + n) as u64);
            let w: Vec<f32> = values(n, n as u64).iter().map(|v| v.abs()).collect();
            for fma in [FmaMode::Fused, FmaMode::Separate] {
                let want = match fma {
                    FmaMode::Fused => reference::<true>(shape, &rows, &w, n),
                    FmaMode::Separate => reference::<false>(shape, &rows, &w, n),
                };
                nan_seen |= want.iter().any(|v| v.is_nan());
                let kernel = FisherSyrk { shape, fma };
                for level in levels {
                    let mut got = vec![f32::NAN; shape.partial_words()];
                    pool.run_with(|| kernel.run_at(level, &[&rows, &w], 0..n, &mut got));
                    let what = format!("P = {p}, n = {n}, {fma:?}, {:?}", level.at_most_detected());
                    same(&what, &want, &got);
                }
            }
        }
    }
    assert!(nan_seen, "the inputs reach inf − inf somewhere");
}

#[test]
fn a_chunk_in_the_middle_of_the_rows_reads_its_own_rows() {
    // The range's rows and weights, not the first ones: a second chunk of 300 rows.
    let pool = HostPool::new(2).unwrap();
    for p in [30, 130] {
        let shape = SyrkShape::new(p);
        let rows = values(700 * shape.width, p as u64);
        let w: Vec<f32> = (0..700).map(|k| 1.0 + (k % 5) as f32).collect();
        let want = reference::<true>(
            shape,
            &rows[300 * shape.width..600 * shape.width],
            &w[300..600],
            300,
        );
        let kernel = FisherSyrk {
            shape,
            fma: FmaMode::Fused,
        };
        let mut got = vec![f32::NAN; shape.partial_words()];
        pool.run_with(|| kernel.run_at(Level::detect(), &[&rows, &w], 300..600, &mut got));
        same(&format!("P = {p}"), &want, &got);
    }
}

#[test]
fn levels_are_only_used_where_the_cpu_has_them() {
    let cpu = Level::detect();
    assert_eq!(Level::Portable.at_most_detected(), Level::Portable);
    assert_eq!(Level::Neon.at_most_detected(), Level::Portable);
    assert_eq!(Level::Avx512.at_most_detected() == Level::Avx512, cpu == Level::Avx512);
    assert_eq!(Level::Avx2.at_most_detected() == Level::Avx2, cpu.has_avx2());
}

#[test]
fn gathered_thread_rows_keep_the_bits_on_pools_of_one_to_three_threads() {
    // The 8 × 8 blocks gather each shader thread's rows once per run of rows of blocks, and
    // a pool of k threads cuts the rows of blocks into k runs: P = 1, 7, 17, 63 and 64 (one
    // to eight rows of blocks, partial registers of every width), row counts that are not
    // multiples of the 64-thread round, and the tiles' P = 65 beside them.
    for threads in [1, 2, 3] {
        let pool = HostPool::new(threads).unwrap();
        for (p, n) in [(1, 4100), (7, 1000), (17, 4100), (63, 700), (64, 4100), (65, 300)] {
            let shape = SyrkShape::new(p);
            let rows = values(n * shape.width, (p * 7 + n) as u64);
            let w: Vec<f32> = values(n, p as u64).iter().map(|v| v.abs()).collect();
            same_at_every_level(&pool, shape, &rows, &w, n, threads);
        }
    }
}

/// The kernel's partial for `rows` and `w` on `pool` is the reference's at every level.
fn same_at_every_level(
    pool: &HostPool,
    shape: SyrkShape,
    rows: &[f32],
    w: &[f32],
    n: usize,
    threads: usize,
) {
    let want = reference::<true>(shape, rows, w, n);
    let kernel = FisherSyrk {
        shape,
        fma: FmaMode::Fused,
    };
    for level in [Level::Portable, Level::Avx2, Level::Avx512] {
        let mut got = vec![f32::NAN; shape.partial_words()];
        pool.run_with(|| kernel.run_at(level, &[rows, w], 0..n, &mut got));
        let p = shape.p;
        let what = format!("P = {p}, n = {n}, {threads} threads, {level:?}");
        same(&what, &want, &got);
    }
}

#[test]
fn unit_weights_share_one_panel_and_keep_the_bits() {
    // Rows of weight 1 are their own left rows, so a sweep whose weights are all 1 packs
    // only the left panel: every weight 1, and 1 but for one row (its sweep packs both
    // panels, the others one), across several sweeps of 512 rows, pools of 1 to 3 threads.
    // The 8 × 8 blocks (P ≤ 64) likewise: a shader thread whose rows all weigh 1 reads its
    // scores as their left values, the one with row 700 (thread 700 mod 64) its own `s · w`.
    for threads in [1, 2, 3] {
        let pool = HostPool::new(threads).unwrap();
        for (p, n) in [(13, 900), (64, 1500), (65, 1500), (130, 1100), (256, 1100)] {
            let shape = SyrkShape::new(p);
            let rows = values(n * shape.width, (p * 11 + n) as u64);
            let ones = vec![1.0f32; n];
            let mut one_off = ones.clone();
            one_off[700] = 0.75;
            for w in [ones, one_off] {
                same_at_every_level(&pool, shape, &rows, &w, n, threads);
            }
        }
    }
}
