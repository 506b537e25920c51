//! Geometric-algebra kernels per adapter: throughput on resident data as a fraction of the
//! device's own measured copy bandwidth (for the bytes each kernel moves: per-item inputs
//! plus output), and the time of the engine path (plan, chunks, pipelined upload, dispatch
//! and readback) over `raw::run_once`, plain wgpu running the same WGSL on one device.
//!
//! For scale, the list starts with the identity map of Cl(3,0) and Cl(4,1) (the projection
//! onto every grade: a generated kernel that only copies its rows), the most any kernel of
//! this memory layout can reach through the device's shader memory path, and each kernel's
//! GFLOP/s is printed next to the device's measured FMA peak.
//!
//! Every figure is measured in this run on the adapter printed above it (calibration
//! included); nothing is simulated. `cargo bench -p amari-gpu --bench ga`.

mod common;

use std::time::Instant;

use amari_gpu::ga::{kernel, Algebra, Broadcast, Operation};
use amari_gpu::kernel::Kernel;
use amari_gpu::{raw, GpuDevice, MultiGpuContext};
use common::{adapter_context, describe, median, timed};

/// Bytes moved per problem (per-item inputs plus output): big enough that a dispatch takes
/// well over a millisecond, small enough to stay within every device's binding limit.
const PROBLEM_BYTES: f64 = 48e6;
/// Timed repetitions per figure (medians are printed).
const REPEATS: usize = 5;

/// The kernels measured: the common cases of each operation kind, small to large algebras.
fn cases() -> Vec<(Algebra, Operation, Broadcast)> {
    let a = |p, q, r| Algebra::new(p, q, r).expect("valid algebra");
    vec![
        (
            a(3, 0, 0),
            Operation::GradeProjection(0b1111),
            Broadcast::None,
        ),
        (
            a(4, 1, 0),
            Operation::GradeProjection(0b11_1111),
            Broadcast::None,
        ),
        (a(3, 0, 0), Operation::Geometric, Broadcast::None),
        (a(3, 0, 1), Operation::Geometric, Broadcast::None),
        (a(3, 0, 1), Operation::Sandwich, Broadcast::Left),
        (a(4, 1, 0), Operation::Geometric, Broadcast::None),
        (a(4, 1, 0), Operation::Outer, Broadcast::None),
        (a(6, 0, 0), Operation::Geometric, Broadcast::None),
        (a(3, 0, 1), Operation::Normalize, Broadcast::None),
        (a(4, 1, 0), Operation::Reverse, Broadcast::None),
    ]
}

/// Seconds of one dispatch over `items` items whose buffers already live on the device.
fn resident_seconds(dev: &GpuDevice, k: &Kernel, items: usize) -> f64 {
    let pipeline = dev.pipeline(k).expect("kernel compiles");
    let resident = raw::Resident::new(dev, k, &pipeline, items).expect("one dispatch");
    let run = || resident.run(dev).expect("dispatch completes");
    run();
    median((0..REPEATS).map(|_| timed(run).1).collect())
}

/// (engine seconds, raw seconds) for the same inputs, medians of `REPEATS` runs each.
fn engine_and_raw(ctx: &MultiGpuContext, k: &Kernel, items: usize) -> (f64, f64) {
    let inputs: Vec<Vec<f32>> = (0..k.inputs.len())
        .map(|i| {
            (0..k.input_len(i, items))
                .map(|w| (w % 7) as f32 * 0.25 - 0.5)
                .collect()
        })
        .collect();
    let slices: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut out = vec![0.0f32; k.output_words(items)];
    let dev = &ctx.devices()[0];
    let mut engine = Vec::new();
    let mut raw_s = Vec::new();
    for round in 0..=REPEATS {
        let (_, seconds) = timed(|| {
            ctx.run_map(k, &slices, &mut out, items, None)
                .expect("engine run")
        });
        let (raw_out, raw_seconds) = raw::run_once(dev, k, &slices, items).expect("raw run");
        assert_eq!(raw_out, out, "engine and raw wgpu disagree on {}", k.id);
        if round > 0 {
            // Round 0 warms the pools and the planner's history.
            engine.push(seconds);
            raw_s.push(raw_seconds);
        }
    }
    (median(engine), median(raw_s))
}

fn main() {
    let started = Instant::now();
    println!(
        "ga: geometric-algebra kernels; resident = one dispatch on data already on the device, \
         as a fraction of the device's measured on-device copy bandwidth for the bytes the \
         kernel moves; engine/raw = whole call through the engine over plain wgpu \
         (raw::run_once) on the same WGSL, same device, medians of {REPEATS}"
    );
    for info in amari_gpu::adapters().into_iter().filter(|i| !i.is_host()) {
        let ctx = adapter_context(info.index);
        let caps = ctx.calibrate(true).expect("calibration")[0].clone();
        let copy_gb_s = caps
            .memory_bandwidth_gb_s
            .expect("calibrated copy bandwidth");
        let peak = caps.peak_gflops.unwrap_or(f64::NAN);
        let kernel_gb_s = caps.kernel_bandwidth_gb_s.unwrap_or(f64::NAN);
        println!(
            "\nadapter {}: measured now: copy bandwidth \
             {copy_gb_s:.2} GB/s (buffer-to-buffer copy, read + write), streaming-kernel \
             bandwidth {kernel_gb_s:.2} GB/s (vec4 copy shader), FMA peak {peak:.1} GFLOP/s",
            describe(&info),
        );
        println!(
            "  {:<36} {:>8} {:>6} {:>9} {:>9} {:>7} {:>7} {:>10} {:>8} {:>7}",
            "kernel",
            "items",
            "B/item",
            "GFLOP/s",
            "res GB/s",
            "of copy",
            "of krnl",
            "engine ms",
            "raw ms",
            "ratio"
        );
        let dev = &ctx.devices()[0];
        for (algebra, op, broadcast) in cases() {
            let k = kernel(&algebra, op, broadcast, amari_gpu::Dtype::F32);
            let bytes = k.bytes_per_item() as f64;
            let items = (PROBLEM_BYTES / bytes) as usize;
            let resident = resident_seconds(dev, &k, items);
            let gb_s = items as f64 * bytes / resident / 1e9;
            let (engine, raw_s) = engine_and_raw(&ctx, &k, items);
            println!(
                "  {:<36} {:>8} {:>6} {:>9} {:>9.2} {:>6.0}% {:>6.0}% {:>10.1} {:>8.1} {:>7.2}",
                format!("{} {} {}", algebra.label(), op.name(), broadcast.name()),
                items,
                bytes,
                format!("{:.1}", items as f64 * k.flops_per_item / resident / 1e9),
                gb_s,
                100.0 * gb_s / copy_gb_s,
                100.0 * gb_s / kernel_gb_s,
                1e3 * engine,
                1e3 * raw_s,
                engine / raw_s
            );
        }
    }
    println!("\nga: done in {:.1} s", started.elapsed().as_secs_f64());
}
