//! Domain decomposition on real devices: heat steps against a float64 reference written
//! here, Life against a direct count, and the same bits for any device count and halo.

mod common;

use amari_gpu::domain::{self, Boundary, Options};
use amari_gpu::sample::uniform_f32;
use amari_gpu::{ContextOptions, MultiGpuContext};
use common::heat_reference;

fn context(devices_per_adapter: usize) -> MultiGpuContext {
    MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter,
        ..Default::default()
    })
    .expect("context opens")
}

fn options(steps: u64, halo: usize) -> Options {
    Options {
        steps,
        halo,
        rebalance: true,
        split: None,
    }
}

fn life_reference(grid: &[u8], h: usize, w: usize, steps: u64) -> Vec<u8> {
    let mut g = grid.to_vec();
    for _ in 0..steps {
        let mut next = g.clone();
        for r in 0..h {
            for c in 0..w {
                let mut n = 0;
                for dr in [h - 1, 0, 1] {
                    for dc in [w - 1, 0, 1] {
                        if (dr, dc) != (0, 0) {
                            n += g[((r + dr) % h) * w + (c + dc) % w];
                        }
                    }
                }
                let alive = g[r * w + c] == 1;
                next[r * w + c] = u8::from(n == 3 || (n == 2 && alive));
            }
        }
        g = next;
    }
    g
}

#[test]
fn heat_matches_float64_and_gives_the_same_bits_for_any_devices_and_halo() {
    let (h, w) = (45, 33);
    let grid = uniform_f32(h * w, 1);
    let want = heat_reference(&grid, h, w, 10, 0.25);
    let mut first: Option<Vec<f32>> = None;
    for devices in [1, 3] {
        let ctx = context(devices);
        for halo in [1, 4] {
            let (got, report) = domain::heat(
                &ctx,
                &grid,
                h,
                w,
                0.25,
                Boundary::Dirichlet,
                &options(10, halo),
            )
            .expect("heat runs");
            assert_eq!(report.rounds.iter().map(|r| r.steps).sum::<usize>(), 10);
            for (g, r) in got.iter().zip(&want) {
                assert!((f64::from(*g) - r).abs() < 1e-5, "{g} vs {r}");
            }
            let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
            match &first {
                Some(f) => assert_eq!(&bits, &f.iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
                None => first = Some(got),
            }
        }
    }
}

#[test]
fn life_matches_a_direct_count_on_the_torus() {
    let (h, w) = (23, 17);
    let grid: Vec<u8> = uniform_f32(h * w, 2)
        .iter()
        .map(|&v| u8::from(v < -0.2)) // 40% alive
        .collect();
    let ctx = context(2);
    let (got, _) = domain::life(&ctx, &grid, h, w, &options(9, 2)).expect("life runs");
    assert_eq!(got, life_reference(&grid, h, w, 9));
}

#[test]
fn unstable_alpha_and_bad_shapes_are_refused() {
    let ctx = context(1);
    let err = domain::heat(
        &ctx,
        &[0.0; 4],
        2,
        2,
        0.3,
        Boundary::Periodic,
        &options(1, 1),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("alpha: expected 0 <= alpha <= 0.25"),
        "{err}"
    );
    let err = domain::life(&ctx, &[0; 5], 2, 2, &options(1, 1)).unwrap_err();
    assert!(err.to_string().contains("(2, 2) holding 5 cells"), "{err}");
    assert!(Boundary::parse("neumann").is_err());
}
