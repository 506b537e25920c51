//! Tropical benchmark: on each adapter, the tiled max-plus product's achieved fraction of the
//! device's measured arithmetic peak, the engine path against the same WGSL run once with
//! plain wgpu (`raw::run_once`), and the tiled kernel against the one-thread-per-output
//! kernel; then all-pairs shortest paths through the engine.
//!
//! Every figure is measured in this run and printed with the adapter, backend and driver it
//! ran on. Times are medians of interleaved rounds (the machine may be busy). Environment:
//! `TROPICAL_BENCH_SIDE` (default 1024) sets m = k = n; `TROPICAL_BENCH_ROUNDS` (default 3);
//! `TROPICAL_BENCH_APSP` (default "1024,2048") lists the graph sizes timed on the default
//! context (e.g. "4096" for the large run, which takes minutes on a software adapter).

mod common;

use amari_gpu::raw::run_once;
use amari_gpu::tropical::kernels::{self, ProductShape, BLOCK_ROWS};
use amari_gpu::tropical::{shortest_paths, tropical_matmul, Operands, Semiring};
use amari_gpu::{ContextOptions, Destination, MultiGpuContext, ResidentOperand};
use common::{adapter_context, describe, median, timed};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Deterministic values in [-50, 50) with a few tropical zeros (no NaN).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|i| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            if i % 997 == 0 {
                f32::NEG_INFINITY
            } else {
                ((state >> 40) % 10_000) as f32 * 0.01 - 50.0
            }
        })
        .collect()
}

fn bench_adapter(index: usize, side: usize, rounds: usize) {
    let ctx = adapter_context(index);
    let dev = &ctx.devices()[0];
    println!("\n{}", describe(&dev.adapter));
    let caps = ctx.calibrate(false).expect("calibration runs");
    let peak = caps[0].peak_gflops.expect("calibration measures the peak");

    let a = values(side * side, 1);
    let b = values(side * side, 2);
    let shape = ProductShape {
        k: side,
        cols: side,
        b_words: side * side,
        batches: 1,
        accumulate: false,
        dtype: amari_gpu::dtype::Dtype::F32,
    };
    let blocks = side / BLOCK_ROWS;
    let item_batch = kernels::item_batches(1, blocks);
    let inputs: [&[f32]; 4] = [&a, &item_batch, &b, &[0.0]];
    let tiled = kernels::tiled(Semiring::MaxPlus, &shape);
    let naive = kernels::naive(Semiring::MaxPlus, &shape);
    let mut engine_out = vec![0.0f32; side * side];
    let engine = |out: &mut [f32]| {
        let operands = Operands {
            semiring: Semiring::MaxPlus,
            a: ResidentOperand::Host(&a),
            a_shape: &[side, side],
            b: &b,
            b_shape: &[side, side],
        };
        let ran =
            tropical_matmul(&ctx, operands).and_then(|r| r.run(&ctx, Destination::Host(out), None));
        ran.expect("engine runs")
            .plan
            .expect("a run over host operands has a plan")
    };
    // Warm-up: pipelines, buffer pools, the engine's first plan.
    run_once(dev, &tiled, &inputs, 1).expect("tiled compiles");
    run_once(dev, &naive, &inputs, 1).expect("naive compiles");
    let mut plan = engine(&mut engine_out);

    let (mut raw_s, mut engine_s, mut naive_s) = (Vec::new(), Vec::new(), Vec::new());
    let mut raw_out = Vec::new();
    for round in 0..rounds {
        let ((out, seconds), _) = timed(|| run_once(dev, &tiled, &inputs, blocks).expect("raw"));
        raw_s.push(seconds);
        raw_out = out;
        let (last, seconds) = timed(|| engine(&mut engine_out));
        engine_s.push(seconds);
        plan = last;
        // The naive kernel is slow; two rounds give its median well enough.
        if round < 2 {
            let ((out, seconds), _) =
                timed(|| run_once(dev, &naive, &inputs, blocks).expect("naive"));
            assert!(out == raw_out, "naive and tiled kernels disagree");
            naive_s.push(seconds);
        }
    }
    assert!(engine_out == raw_out, "engine and raw runs disagree");
    let (raw, eng, nai) = (
        median(raw_s),
        median(engine_s),
        naive_s.iter().copied().fold(f64::MAX, f64::min),
    );
    let ops = 2.0 * (side * side * side) as f64;
    println!("  measured arithmetic peak (FMA chain): {peak:.1} GFLOP/s");
    println!(
        "  tiled max-plus {side}^3 (raw wgpu, upload to readback): {:.3} s = {:.2} Gop/s \
         (add + max per step) = {:.1}% of peak",
        raw,
        ops / raw / 1e9,
        100.0 * ops / raw / 1e9 / peak
    );
    println!(
        "  engine path: {:.3} s, {:.2}x the raw run ({} plan, {} chunks of {} rows)",
        eng,
        eng / raw,
        plan.strategy.name(),
        plan.n_chunks,
        plan.chunk_items as usize * BLOCK_ROWS
    );
    println!(
        "  one thread per output (raw): {:.3} s; tiled is {:.1}x faster",
        nai,
        nai / raw
    );
}

fn bench_paths(sizes: &[usize]) {
    let ctx = MultiGpuContext::new(ContextOptions::default()).expect("context opens");
    let names: Vec<String> = ctx
        .devices()
        .iter()
        .map(|d| format!("{} ({})", d.adapter.name, d.adapter.backend))
        .collect();
    println!(
        "\nall-pairs shortest paths (blocked Floyd-Warshall) on {}",
        names.join(", ")
    );
    for &n in sizes {
        // A random digraph: about 1% of the pairs are edges, weights in [0, 100).
        let w: Vec<f32> = values(n * n, 7 + n as u64)
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if i % 101 == 0 {
                    v.abs() * 2.0
                } else {
                    f32::INFINITY
                }
            })
            .collect();
        let mut d = vec![0.0f32; n * n];
        let (plan, seconds) = timed(|| shortest_paths(&ctx, &w, n, &mut d, None).expect("runs"));
        let reachable = d.iter().filter(|v| v.is_finite()).count();
        println!(
            "  n = {n:>5}: {seconds:.2} s ({:.2} G steps/s of n^3; {:.1}% of pairs reachable; last plan {} over {} chunks)",
            (n as f64).powi(3) / seconds / 1e9,
            100.0 * reachable as f64 / (n * n) as f64,
            plan.strategy.name(),
            plan.n_chunks
        );
    }
}

fn main() {
    let side: usize = env_or("TROPICAL_BENCH_SIDE", 1024);
    assert!(
        side.is_multiple_of(BLOCK_ROWS),
        "TROPICAL_BENCH_SIDE must be a multiple of {BLOCK_ROWS}"
    );
    let rounds: usize = env_or("TROPICAL_BENCH_ROUNDS", 3).max(1);
    let sizes: Vec<usize> = std::env::var("TROPICAL_BENCH_APSP")
        .unwrap_or_else(|_| "1024,2048".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!(
        "amari-gpu {} tropical benchmark; every figure below was measured in this run",
        amari_gpu::VERSION
    );
    for info in amari_gpu::adapters().into_iter().filter(|i| !i.is_host()) {
        bench_adapter(info.index, side, rounds);
    }
    bench_paths(&sizes);
}
