//! Benchmark of the partitioners: `plan` for 16 heterogeneous devices and 10^9 items, one
//! benchmark per strategy. These are host CPU timings of the planner alone: no GPU is
//! involved, the device models are made up.

use std::hint::black_box;
use std::time::Instant;

use amari_gpu::partition::plan;
use amari_gpu::{DeviceModel, Family, Strategy, Workload};
use criterion::{criterion_group, criterion_main, Criterion};

/// The grid of the benchmark: 2^18 items per chunk, so 10^9 items make 3815 chunks.
const CHUNK_ITEMS: u64 = 262_144;

/// Calls timed per strategy for the printed means.
const CALLS: u32 = 10_000;

/// 16 devices spanning about 100x in speed, with a few sharing one adapter, uneven launch
/// costs and a mix of limited and unlimited memory budgets.
fn devices() -> Vec<DeviceModel> {
    (0..16)
        .map(|i| {
            let f = i as f64 / 15.0;
            DeviceModel {
                device: i,
                // Devices 12..16 are logical devices of two adapters.
                group: if i < 12 { i } else { 12 + (i - 12) / 2 },
                launch_latency_s: 1e-5 * 100f64.powf((i * 7 % 16) as f64 / 15.0),
                h2d_bytes_per_s: 1e8 * 500f64.powf(f),
                d2h_bytes_per_s: 2e8 * 250f64.powf(f),
                flops_per_s: 1e10 * 100f64.powf(1.0 - f),
                correction: 1.0,
                uncertainty: 0.05,
                memory_budget_bytes: (i % 3 != 0).then(|| (1u64 << 30) * (1 + i as u64)),
                max_binding_bytes: 128 << 20,
                group_speedup: 1.0,
                group_members: 1,
            }
        })
        .collect()
}

fn workload() -> Workload {
    Workload {
        kernel: "geometric_product".into(),
        family: Some(Family::GeometricAlgebra),
        items: 1_000_000_000,
        bytes_in_per_item: 64.0,
        bytes_out_per_item: 32.0,
        flops_per_item: 256.0,
        dtype: amari_gpu::Dtype::F32,
    }
}

/// Prints the mean time of one planning decision per strategy, measured over many calls
/// with a plain clock, next to what the plan decided.
fn print_decision_times(w: &Workload, models: &[DeviceModel]) {
    println!(
        "partition: mean planner decision time, host CPU only (no GPU involved); \
         16 devices, 10^9 items, {CHUNK_ITEMS} items per chunk, {CALLS} calls each"
    );
    for strategy in Strategy::ALL {
        let decided = plan(w, CHUNK_ITEMS, models, strategy).expect("benchmark plan");
        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(plan(black_box(w), CHUNK_ITEMS, black_box(models), strategy).ok());
        }
        let mean_us = start.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS);
        println!(
            "partition: {:<10} {mean_us:8.2} us per plan (chose {}, {} devices, efficiency {:.3})",
            strategy.name(),
            decided.strategy,
            decided.assignments.len(),
            decided.efficiency,
        );
    }
}

fn bench_plan(c: &mut Criterion) {
    let (w, models) = (workload(), devices());
    print_decision_times(&w, &models);
    let mut group = c.benchmark_group("plan_16_devices_1e9_items");
    for strategy in Strategy::ALL {
        group.bench_function(strategy.name(), |b| {
            b.iter(|| plan(black_box(&w), CHUNK_ITEMS, black_box(&models), strategy))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_plan);
criterion_main!(benches);
