//! The fixed cost of one tiny chunk on each wgpu adapter, step by step: the wgpu calls a
//! chunk makes, each timed on its own (`raw::chunk_steps`), then the engine's own chunk path
//! (`raw::engine_chunk`) and a whole 1-row Cl(3,0) product through the context, medians of
//! many rounds. The steps show which part of a small call is ours (buffers, writes, bind
//! groups, encoding, threads) and which is the driver's (submit, wait, map).
//!
//! Every figure is measured in this run on the adapter printed above it; nothing is
//! simulated. `cargo bench -p amari-gpu --features bench-support --bench wgpucall`.

mod common;

use amari_gpu::ga::{kernel, Algebra, Broadcast, Operation};
use amari_gpu::raw;
use common::{adapter_context, describe, median, timed};

/// Timed rounds per figure (medians are printed).
const ROUNDS: usize = 400;

fn main() {
    let k = kernel(
        &Algebra::new(3, 0, 0).expect("valid algebra"),
        Operation::Geometric,
        Broadcast::None,
        amari_gpu::Dtype::F32,
    );
    let a: Vec<f32> = (0..8).map(|w| w as f32 * 0.25 - 0.5).collect();
    let b: Vec<f32> = (0..8).map(|w| 0.75 - w as f32 * 0.125).collect();
    let inputs: [&[f32]; 2] = [&a, &b];
    println!("one 1-row Cl(3,0) geometric product chunk; medians of {ROUNDS} rounds, µs");
    for info in amari_gpu::adapters().into_iter().filter(|i| !i.is_host()) {
        println!("\n{}", describe(&info));
        let ctx = adapter_context(info.index);
        let dev = &ctx.devices()[0];
        let mut steps: Vec<Vec<f64>> = vec![Vec::new(); raw::CHUNK_STEPS.len()];
        for round in 0..3 * ROUNDS + 20 {
            let (inline, spin) = (round % 3 != 1, round % 3 == 2);
            let t = raw::chunk_steps(dev, &k, &inputs, 1, inline, spin).expect("steps run");
            if round >= 20 {
                for (s, v) in steps.iter_mut().zip(t) {
                    if v > 0.0 {
                        s.push(v);
                    }
                }
            }
        }
        for (name, s) in raw::CHUNK_STEPS.iter().zip(steps) {
            println!("  {name:<34} {:>8.1}", 1e6 * median(s));
        }
        let mut out = vec![0.0f32; 8];
        let mut chunk = Vec::new();
        let mut call = Vec::new();
        for round in 0..ROUNDS + 20 {
            let (_, c) = timed(|| raw::engine_chunk(dev, &k, &inputs, 1, &mut out).expect("chunk"));
            let (_, whole) = timed(|| ctx.run_map(&k, &inputs, &mut out, 1, None).expect("call"));
            if round >= 20 {
                chunk.push(c);
                call.push(whole);
            }
        }
        println!(
            "  {:<34} {:>8.1}",
            "engine chunk (executor)",
            1e6 * median(chunk)
        );
        println!(
            "  {:<34} {:>8.1}",
            "whole call (ctx.run_map)",
            1e6 * median(call)
        );
        let (groups, hits) = dev.pool.bind_groups();
        println!(
            "  pooled buffers: {} live, {} idle; bind groups kept: {groups} ({hits} reused)",
            dev.pool.live_buffers(),
            dev.pool.idle_buffers()
        );
    }
}
