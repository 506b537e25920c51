//! Criterion benchmark of every kernel family on every adapter, each adapter alone: the
//! Cl(3,0) product, a tiled max-plus product, the tiled Fisher matrix, and heat / Life steps
//! of the domain decomposition. Each benchmark id names the adapter, its backend and driver,
//! so a saved baseline says what it ran on. Sizes are modest so that a software adapter
//! finishes the whole suite in a few minutes.
//!
//!     cargo bench -p amari-gpu --bench families

use std::hint::black_box;
use std::time::Duration;

use amari_gpu::domain::{self, Boundary, Options};
use amari_gpu::fisher::fisher_information;
use amari_gpu::ga::geometric_product_cl3;
use amari_gpu::sample::uniform_f32;
use amari_gpu::tropical::{tropical_matmul, Operands, Semiring};
use amari_gpu::{adapters, ContextOptions, Destination, MultiGpuContext, ResidentOperand};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench_families(c: &mut Criterion) {
    for info in adapters().into_iter().filter(|i| !i.is_host()) {
        let ctx = MultiGpuContext::new(ContextOptions {
            adapters: Some(vec![info.index]),
            ..Default::default()
        })
        .expect("adapter opens");
        ctx.calibrate(false).expect("calibration runs");
        // The GL backend reports its driver in `driver_info` only; name both.
        let driver = format!("{} {}", info.driver, info.driver_info);
        let name = format!(
            "[{}] {} ({}, {})",
            info.index,
            info.name,
            info.backend,
            driver.trim()
        );
        let mut group = c.benchmark_group(name);
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));

        let n = 262_144;
        let (a, b) = (uniform_f32(8 * n, 1), uniform_f32(8 * n, 2));
        let mut out = vec![0.0f32; 8 * n];
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function("geometric_algebra/cl3_product_262144", |bench| {
            bench.iter(|| geometric_product_cl3(&ctx, &a, &b, &mut out, None).expect("runs"))
        });

        let m = 256;
        let (ta, tb) = (uniform_f32(m * m, 3), uniform_f32(m * m, 4));
        let mut tout = vec![0.0f32; m * m];
        group.throughput(Throughput::Elements((m * m * m) as u64));
        group.bench_function("tropical/max_plus_256", |bench| {
            bench.iter(|| {
                let operands = Operands {
                    semiring: Semiring::MaxPlus,
                    a: ResidentOperand::Host(&ta),
                    a_shape: &[m, m],
                    b: &tb,
                    b_shape: &[m, m],
                };
                let ready = tropical_matmul(&ctx, operands).expect("checks");
                ready
                    .run(&ctx, Destination::Host(&mut tout), None)
                    .expect("runs")
            })
        });

        let (rows, p) = (16_384, 64);
        let scores = uniform_f32(rows * p, 5);
        group.throughput(Throughput::Elements(rows as u64));
        group.bench_function("information_geometry/fisher_16384x64", |bench| {
            bench
                .iter(|| black_box(fisher_information(&ctx, &scores, p, None, None).expect("runs")))
        });

        let side = 1024;
        let grid: Vec<f32> = uniform_f32(side * side, 6)
            .iter()
            .map(|v| v.abs())
            .collect();
        let cells: Vec<u8> = grid.iter().map(|&v| u8::from(v < 0.3)).collect();
        let opts = Options {
            steps: 8,
            halo: 4,
            rebalance: false,
            split: None,
        };
        group.throughput(Throughput::Elements((side * side * 8) as u64));
        group.bench_function("domain/heat_1024_8_steps", |bench| {
            bench.iter(|| {
                black_box(
                    domain::heat(&ctx, &grid, side, side, 0.2, Boundary::Periodic, &opts)
                        .expect("runs"),
                )
            })
        });
        group.bench_function("domain/life_1024_8_steps", |bench| {
            bench.iter(|| black_box(domain::life(&ctx, &cells, side, side, &opts).expect("runs")))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_families);
criterion_main!(benches);
