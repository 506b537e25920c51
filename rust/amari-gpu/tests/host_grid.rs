//! Host heat and Life band steps against `domain::heat` / `domain::life` on every wgpu
//! adapter present: whole runs on odd grids, both boundaries, evolved on the host as
//! several bands with ghost rows exchanged every step, bit for bit; and a float64 heat
//! reference on the host alone.

mod common;

use amari_gpu::domain::{self, Boundary, Options};
use amari_gpu::host::grid::{heat_step, life_step, HeatStep, LifeStep};
use amari_gpu::host::{FmaMode, HostPool};
use common::{contexts, fma_mode, heat_reference, random, same_bits};

/// Band `b` of `bands` over `h` rows.
fn band(h: usize, bands: usize, b: usize) -> std::ops::Range<usize> {
    (b * h / bands)..((b + 1) * h / bands)
}

/// `steps` heat steps of an (h, w) grid on the host, cut into `bands` bands that each hold
/// one ghost row per side (none past a Dirichlet frame), refilled every step.
fn heat_host(
    pool: &HostPool,
    grid: &[f32],
    (h, w): (usize, usize),
    (alpha, periodic): (f32, bool),
    (steps, bands): (usize, usize),
    fma: FmaMode,
) -> Vec<f32> {
    let rc = w.div_ceil(4) * 4;
    let mut g = vec![0.0f32; h * rc];
    for (to, from) in g.chunks_mut(rc).zip(grid.chunks(w)) {
        to[..w].copy_from_slice(from);
    }
    for _ in 0..steps {
        let mut next = g.clone();
        for b in 0..bands {
            let rows = band(h, bands, b);
            if rows.is_empty() {
                continue;
            }
            let above = usize::from(periodic || rows.start > 0);
            let below = usize::from(periodic || rows.end < h);
            let first = (rows.start + h - above) % h;
            let n = above + rows.len() + below;
            let src: Vec<f32> = (0..n)
                .flat_map(|i| g[((first + i) % h) * rc..][..rc].to_vec())
                .collect();
            let mut dst = src.clone();
            let step = HeatStep {
                width: w,
                height: h,
                row0: if periodic { 0 } else { rows.start - above },
                rows: above..above + rows.len(),
                periodic,
                alpha,
                fma,
            };
            pool.run_with(|| heat_step(&src, &mut dst, &step));
            next[rows.start * rc..rows.end * rc]
                .copy_from_slice(&dst[above * rc..(above + rows.len()) * rc]);
        }
        g = next;
    }
    g.chunks(rc).flat_map(|r| r[..w].to_vec()).collect()
}

fn life_host(
    pool: &HostPool,
    grid: &[u8],
    (h, w): (usize, usize),
    steps: usize,
    bands: usize,
) -> Vec<u8> {
    let words = w.div_ceil(4);
    let mut g = vec![0u32; h * words];
    for (r, row) in grid.chunks(w).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            g[r * words + c / 4] |= u32::from(v) << ((c % 4) * 8);
        }
    }
    for _ in 0..steps {
        let mut next = g.clone();
        for b in 0..bands {
            let rows = band(h, bands, b);
            let n = rows.len() + 2;
            let first = (rows.start + h - 1) % h;
            let src: Vec<u32> = (0..n)
                .flat_map(|i| g[((first + i) % h) * words..][..words].to_vec())
                .collect();
            let mut dst = src.clone();
            let step = LifeStep {
                width: w,
                rows: 1..1 + rows.len(),
            };
            pool.run_with(|| life_step(&src, &mut dst, &step));
            next[rows.start * words..rows.end * words]
                .copy_from_slice(&dst[words..(1 + rows.len()) * words]);
        }
        g = next;
    }
    (0..h * w)
        .map(|i| ((g[(i / w) * words + (i % w) / 4] >> (((i % w) % 4) * 8)) & 1) as u8)
        .collect()
}

fn options(steps: u64) -> Options {
    Options {
        steps,
        halo: 2,
        rebalance: false,
        split: None,
    }
}

#[test]
fn heat_matches_the_devices_bit_for_bit() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(None);
    for (h, w) in [(37, 53), (5, 1), (9, 2), (64, 67)] {
        let grid = random(h * w, (h * w) as u64);
        for boundary in [Boundary::Dirichlet, Boundary::Periodic] {
            let periodic = boundary == Boundary::Periodic;
            for (name, ctx) in &ctxs {
                let host = heat_host(
                    &pool,
                    &grid,
                    (h, w),
                    (0.23, periodic),
                    (9, 3),
                    fma_mode(ctx),
                );
                let (dev, _) = domain::heat(ctx, &grid, h, w, 0.23, boundary, &options(9))
                    .expect("device runs");
                same_bits(&format!("heat {h}x{w} {boundary:?} on {name}"), &dev, &host);
            }
        }
    }
}

#[test]
fn life_matches_the_devices_bit_for_bit() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(None);
    for (h, w) in [(31, 45), (7, 1), (8, 6), (50, 64)] {
        let grid: Vec<u8> = random(h * w, 3)
            .iter()
            .map(|&v| u8::from(v > 0.3))
            .collect();
        let host = life_host(&pool, &grid, (h, w), 11, 3);
        for (name, ctx) in &ctxs {
            let (dev, _) = domain::life(ctx, &grid, h, w, &options(11)).expect("device runs");
            assert_eq!(dev, host, "life {h}x{w} on {name}");
        }
    }
}

#[test]
fn host_heat_follows_a_float64_reference() {
    let pool = HostPool::new(2).unwrap();
    let (h, w, steps) = (33, 41, 20);
    let grid = random(h * w, 4);
    let host = heat_host(
        &pool,
        &grid,
        (h, w),
        (0.2, false),
        (steps, 2),
        FmaMode::Fused,
    );
    let u = heat_reference(&grid, h, w, steps as u64, 0.2);
    for (i, (&got, &want)) in host.iter().zip(&u).enumerate() {
        assert!(
            (f64::from(got) - want).abs() < 1e-5,
            "cell {i}: {got} vs {want}"
        );
    }
}
