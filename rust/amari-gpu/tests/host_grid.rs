//! Host heat and Life band steps against `domain::heat` / `domain::life` on every wgpu
//! adapter present: whole runs on odd grids, both boundaries, evolved on the host as
//! several bands with ghost rows exchanged every step, bit for bit; and a float64 heat
//! reference on the host alone. Then the domain decomposition with bands on the host
//! device: alone (the host kernels' bits, fused fma), beside lavapipe or llvmpipe (their
//! bits, for any halo, split and rebalancing, thin bands and rounds straddled), and a fault
//! on the host device mid-run.

mod common;

use amari_gpu::domain::host_grid::{heat_step, life_step, HeatStep, LifeStep};
use amari_gpu::domain::{self, Boundary, Options};
use amari_gpu::host::HostPool;
use amari_gpu::kernel::FmaMode;
use amari_gpu::{ContextOptions, MultiGpuContext};
use common::{contexts, fma_mode, heat_reference, logging, random, same_bits};

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
    // Widths around the host kernel's whole-word fast path (words with both neighbours
    // inside the row): none at 8, one at 9 and 12, two at 13.
    for (h, w) in [
        (31, 45),
        (7, 1),
        (8, 6),
        (50, 64),
        (4, 8),
        (9, 12),
        (6, 13),
        (5, 9),
    ] {
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

/// A context on `backends`, `per_adapter` devices per wgpu adapter.
fn open(backends: &[&str], per_adapter: usize) -> MultiGpuContext {
    logging();
    MultiGpuContext::new(ContextOptions {
        backends: Some(backends.iter().map(|b| b.to_string()).collect()),
        devices_per_adapter: per_adapter,
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{backends:?} opens: {e}"))
}

fn host_id(ctx: &MultiGpuContext) -> usize {
    let dev = ctx.devices().last().expect("devices");
    assert_eq!(dev.adapter.backend, "host");
    dev.id
}

/// Rows the host device owned in the report's last round.
fn host_rows(ctx: &MultiGpuContext, report: &domain::Report) -> usize {
    let host = host_id(ctx);
    let last = report.rounds.last().expect("rounds");
    last.devices
        .iter()
        .filter(|d| d.device == host)
        .map(|d| d.rows)
        .sum()
}

fn run_options(steps: u64, halo: usize, rebalance: bool, split: Option<Vec<usize>>) -> Options {
    Options {
        steps,
        halo,
        rebalance,
        split,
    }
}

fn life_grid(h: usize, w: usize, seed: u64) -> Vec<u8> {
    random(h * w, seed)
        .iter()
        .map(|&v| u8::from(v > 0.2))
        .collect()
}

/// Grids (h, w, halo, steps): odd sizes, bands thinner than a halo (three devices on seven
/// rows with halo 3, five rows with halo 4: periodic ghosts wrap past the whole grid), a
/// single row, and step counts that end in a partial round.
const CASES: [(usize, usize, usize, u64); 5] = [
    (37, 53, 2, 7),
    (7, 9, 3, 8),
    (5, 11, 4, 9),
    (1, 5, 2, 3),
    (64, 67, 4, 9),
];

#[test]
fn grids_on_the_host_alone_give_the_host_kernels_bits() {
    let ctx = open(&["host"], 1);
    assert_eq!(
        ctx.devices()[0].as_host().expect("host").fma,
        FmaMode::Fused
    );
    let pool = HostPool::new(2).unwrap();
    for (h, w, halo, steps) in CASES {
        let grid = random(h * w, (h + w) as u64);
        for boundary in [Boundary::Dirichlet, Boundary::Periodic] {
            let periodic = boundary == Boundary::Periodic;
            let want = heat_host(
                &pool,
                &grid,
                (h, w),
                (0.21, periodic),
                (steps as usize, 2),
                FmaMode::Fused,
            );
            let opts = run_options(steps, halo, true, None);
            let (got, report) =
                domain::heat(&ctx, &grid, h, w, 0.21, boundary, &opts).expect("heat runs");
            same_bits(&format!("host heat {h}x{w} {boundary:?}"), &got, &want);
            assert_eq!(host_rows(&ctx, &report), h);
        }
        let cells = life_grid(h, w, 5);
        let (got, _) = domain::life(&ctx, &cells, h, w, &run_options(steps, halo, true, None))
            .expect("life runs");
        assert_eq!(got, life_host(&pool, &cells, (h, w), steps as usize, 2));
    }
}

#[test]
fn host_bands_beside_wgpu_bands_give_the_wgpu_bits() {
    let alone = contexts(None);
    for (backend, per_adapter) in [("vulkan", 2), ("gl", 1)] {
        let Some((name, reference)) = alone.iter().find(|(n, _)| n.starts_with(backend)) else {
            panic!("no {backend} adapter: install Mesa's lavapipe/llvmpipe");
        };
        let mixed = open(&[backend, "host"], per_adapter);
        let host = host_id(&mixed);
        let devices = mixed.devices().len();
        for (h, w, halo, steps) in CASES {
            // The host given rows explicitly (the measured split may leave it none on a
            // thin grid), and by measured bandwidth with rebalancing.
            let mut split = vec![0; devices];
            split[host] = h.div_ceil(2);
            split[0] = h - split[host];
            let layouts = [
                run_options(steps, halo, false, Some(split)),
                run_options(steps, halo, true, None),
            ];
            let grid = random(h * w, (h * w) as u64 + 1);
            let cells = life_grid(h, w, 6);
            for boundary in [Boundary::Dirichlet, Boundary::Periodic] {
                let base = run_options(steps, 1, false, None);
                let (want, _) = domain::heat(reference, &grid, h, w, 0.24, boundary, &base)
                    .expect("reference runs");
                for opts in &layouts {
                    let (got, report) = domain::heat(&mixed, &grid, h, w, 0.24, boundary, opts)
                        .expect("mixed runs");
                    let what = format!("heat {h}x{w} {boundary:?} {name}+host {opts:?}");
                    same_bits(&what, &got, &want);
                    if opts.split.is_some() {
                        assert_eq!(host_rows(&mixed, &report), h.div_ceil(2), "{what}");
                    }
                }
            }
            let (want, _) =
                domain::life(reference, &cells, h, w, &run_options(steps, 1, false, None))
                    .expect("reference runs");
            for opts in &layouts {
                let (got, _) = domain::life(&mixed, &cells, h, w, opts).expect("mixed runs");
                assert_eq!(got, want, "life {h}x{w} {name}+host {opts:?}");
            }
        }
    }
}

#[test]
fn a_fault_on_the_host_mid_run_moves_its_band_and_keeps_the_bits() {
    let (h, w) = (45, 31);
    let grid = random(h * w, 21);
    let reference = open(&["vulkan"], 1);
    let opts = run_options(12, 2, false, None);
    let (want, _) =
        domain::heat(&reference, &grid, h, w, 0.2, Boundary::Periodic, &opts).expect("runs");
    let ctx = open(&["vulkan", "host"], 1);
    let host = host_id(&ctx);
    let split = Some(vec![20, 25]);
    // Fails when it starts its fourth round.
    ctx.inject_fault(host, 3).unwrap();
    let opts = run_options(12, 2, false, split);
    let (got, report) =
        domain::heat(&ctx, &grid, h, w, 0.2, Boundary::Periodic, &opts).expect("runs");
    same_bits("heat after a host fault", &got, &want);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].0, host);
    assert!(
        report.failures[0].1.contains("injected"),
        "{:?}",
        report.failures
    );
    assert_eq!(report.layouts.last().unwrap().split, [(0, h)]);
    let health = ctx.health();
    assert!(!health[host].1);
    // The host alone with the same fault: no device is left.
    let alone = open(&["host"], 1);
    alone.inject_fault(0, 1).unwrap();
    let opts = run_options(12, 2, false, None);
    let err = domain::heat(&alone, &grid, h, w, 0.2, Boundary::Periodic, &opts).unwrap_err();
    assert!(err.to_string().contains("no healthy device"), "{err}");
}
