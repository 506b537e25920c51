//! Benchmark of the empirical Fisher matrix (tiled SYRK) on every adapter, one device each:
//! the fraction of the device's measured arithmetic peak the engine path reaches, the ratio
//! of the engine path to the same WGSL run once with plain wgpu (`raw::run_once`), and the
//! speedup of the tiled kernel over the one-thread-per-output kernel of the same operation.
//! Every figure is measured in this run and printed with the adapter it ran on.
//!
//! Flops are counted as 2 per multiply-add of the upper triangle that is computed:
//! N P (P + 1) in all.

mod common;

use amari_gpu::fisher::{self, reference, SyrkShape};
use amari_gpu::raw;
use common::{adapter_context, describe, median, timed};

/// The problem: N rows of P scores.
const N: usize = 65_536;
const P: usize = 256;
/// Timed repetitions per figure (the median is kept), after one warm-up.
const REPEATS: usize = 5;

fn random(n: usize, seed: u64) -> Vec<f32> {
    amari_gpu::sample::uniform_f32(n, seed)
}

/// Largest |got - want| relative to max |want|: every timed kernel must also be right.
fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / scale)
        .fold(0.0, f64::max)
}

fn bench_adapter(index: usize, scores: &[f32], want: &[f64]) {
    let ctx = adapter_context(index);
    let dev = &ctx.devices()[0];
    println!("{}", describe(&dev.adapter));
    // Measured afresh: a cached calibration may predate the peak or this family's figures.
    let caps = ctx.calibrate(true).expect("calibration").remove(0);
    let peak_gflops = caps.peak_gflops.expect("measured peak");
    let ones = vec![1.0f32; N];
    let inputs: [&[f32]; 2] = [scores, &ones];
    let flops = (N * P * (P + 1)) as f64;

    // Engine and raw runs alternate, so that load from other processes hits both alike.
    let tiled = fisher::tiled_kernel(P);
    let mut engine_result = None;
    let (mut engine_samples, mut raw_samples) = (Vec::new(), Vec::new());
    for round in 0..=REPEATS {
        let (result, engine_s) =
            timed(|| fisher::fisher_information(&ctx, scores, P, None, None).expect("engine run"));
        engine_result = Some(result);
        let raw_s = raw::run_once(dev, &tiled, &inputs, N).expect("raw run").1;
        if round > 0 {
            engine_samples.push(engine_s);
            raw_samples.push(raw_s);
        }
    }
    let engine = engine_result.expect("ran");
    let (engine_s, raw_s) = (median(engine_samples), median(raw_samples));
    // The naive and 8 x 8-block kernels are slower: each is checked (the naive one) or
    // warmed up on a slice of the rows, which also compiles its pipeline, then timed once on
    // the whole problem.
    let rows = 4096;
    let slice: [&[f32]; 2] = [&scores[..rows * P], &ones[..rows]];
    let naive_check =
        fisher::fisher_information_by(&ctx, fisher::SyrkVariant::Naive, slice[0], P, None, None)
            .expect("naive engine run");
    let naive_want = reference::fisher_information(slice[0], P, None);
    let naive = fisher::naive_kernel(P);
    let naive_s = raw::run_once(dev, &naive, &inputs, N)
        .expect("raw naive run")
        .1;
    // The 8 x 8-block kernel the API uses for P <= 64, on the same problem, for comparison.
    let blocks = fisher::shaped_kernel(SyrkShape::with_tile(P, fisher::BLOCK));
    raw::run_once(dev, &blocks, &slice, rows).expect("raw blocks warm-up");
    let blocks_s = raw::run_once(dev, &blocks, &inputs, N)
        .expect("raw blocks run")
        .1;
    let (err, naive_err) = (
        relative_error(&engine.matrix, want),
        relative_error(&naive_check.matrix, &naive_want),
    );
    assert!(
        err < 1e-4 && naive_err < 1e-4,
        "wrong result: {err:e}, {naive_err:e}"
    );

    let gflops = |s: f64| flops / s / 1e9;
    println!(
        "    measured peak {peak_gflops:.1} GFLOP/s (FMA chains); plan: {} over {} chunks of {} rows",
        engine.plan.strategy, engine.plan.n_chunks, engine.plan.chunk_items
    );
    println!(
        "    engine fisher_information  {:8.1} ms  {:7.2} GFLOP/s  {:5.1}% of peak  (max rel. error {err:.1e})",
        engine_s * 1e3,
        gflops(engine_s),
        100.0 * gflops(engine_s) / peak_gflops
    );
    println!(
        "    raw wgpu, same WGSL        {:8.1} ms  {:7.2} GFLOP/s  {:5.1}% of peak  engine/raw time = {:.2}",
        raw_s * 1e3,
        gflops(raw_s),
        100.0 * gflops(raw_s) / peak_gflops,
        engine_s / raw_s
    );
    println!(
        "    raw wgpu, naive kernel     {:8.1} ms  {:7.2} GFLOP/s  {:5.1}% of peak  tiled speedup = {:.1}x",
        naive_s * 1e3,
        gflops(naive_s),
        100.0 * gflops(naive_s) / peak_gflops,
        naive_s / raw_s
    );
    println!(
        "    raw wgpu, 8x8-block kernel {:8.1} ms  {:7.2} GFLOP/s  {:5.1}% of peak  (the API's kernel for P <= 64)",
        blocks_s * 1e3,
        gflops(blocks_s),
        100.0 * gflops(blocks_s) / peak_gflops
    );
}

fn main() {
    // `cargo bench` passes harness flags such as `--bench`; there is nothing to configure.
    let scores = random(N * P, 42);
    let want = reference::fisher_information(&scores, P, None);
    println!(
        "fisher: empirical Fisher matrix, N = {N} rows, P = {P} columns, float32, \
         {:.2} GFLOP per call (2 per multiply-add, upper triangle); medians of {REPEATS} \
         after a warm-up, engine and raw runs alternating (naive and 8x8-block kernels: one run)",
        (N * P * (P + 1)) as f64 / 1e9
    );
    for info in amari_gpu::adapters().into_iter().filter(|i| !i.is_host()) {
        bench_adapter(info.index, &scores, &want);
    }
}
