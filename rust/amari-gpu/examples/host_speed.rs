//! Quick timings of the host kernels (no criterion): the CPU, its SIMD level, and the
//! median of a few runs of each issue-15 workload. Run with
//! `cargo run --release -p amari-gpu --example host_speed [threads]`.

use std::time::Instant;

use amari_gpu::domain::host_grid::{heat_step, HeatStep};
use amari_gpu::fisher::host_syrk::FisherSyrk;
use amari_gpu::fisher::SyrkShape;
use amari_gpu::ga::host::GaKernel;
use amari_gpu::ga::{Algebra, Broadcast, Operation};
use amari_gpu::host::{HostPool, Level};
use amari_gpu::kernel::FmaMode;
use amari_gpu::sample::uniform_f32;
use amari_gpu::tropical::host::product_rows;
use amari_gpu::tropical::host_paths::shortest_paths_host;
use amari_gpu::tropical::Semiring;

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// Median seconds of `runs` runs of `f` (after one warm-up).
fn median(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

fn main() {
    let threads = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let pool = HostPool::new(threads).expect("pool");
    println!(
        "{} | SIMD {} | {} threads",
        cpu_model(),
        Level::detect().name(),
        pool.threads()
    );

    let n = 1 << 20;
    let (a, b) = (uniform_f32(8 * n, 1), uniform_f32(8 * n, 2));
    let mut out = vec![0.0f32; 8 * n];
    for fma in [FmaMode::Fused, FmaMode::Separate] {
        let ga = GaKernel::new(Algebra::CL3, Operation::Geometric, Broadcast::None, fma);
        let t = median(7, || pool.run(&ga, &[&a, &b], 0..n, &mut out));
        println!(
            "Cl(3,0) geometric product, 2^20 pairs ({}): {:.2} ms, {:.1} GB/s moved",
            fma.name(),
            t * 1e3,
            (3 * 32 * n) as f64 / t / 1e9
        );
    }

    let side = 1024;
    let (ta, tb) = (uniform_f32(side * side, 3), uniform_f32(side * side, 4));
    let mut tc = vec![0.0f32; side * side];
    let t = median(3, || {
        pool.run_with(|| product_rows(Semiring::MaxPlus, &ta, &tb, None, side, side, &mut tc))
    });
    println!("max-plus 1024 x 1024: {:.1} ms", t * 1e3);

    let w = uniform_f32(512 * 512, 5)
        .into_iter()
        .map(|v| (v + 1.0) * 10.0)
        .collect::<Vec<_>>();
    let mut d = vec![0.0f32; 512 * 512];
    let t = median(3, || {
        pool.run_with(|| shortest_paths_host(&w, 512, &mut d))
            .expect("paths")
    });
    println!("shortest paths n = 512: {:.1} ms", t * 1e3);

    let (rows, p) = (65_536, 256);
    let scores = uniform_f32(rows * p, 6);
    let weights = vec![1.0f32; rows];
    let shape = SyrkShape::new(p);
    let kernel = amari_gpu::fisher::tiled_kernel(p);
    let chunk = kernel.chunk_items(rows);
    let syrk = FisherSyrk {
        shape,
        fma: FmaMode::Fused,
    };
    let words = shape.partial_words();
    let mut partials = vec![0.0f32; rows.div_ceil(chunk) * words];
    let t = median(3, || {
        for (c, part) in partials.chunks_mut(words).enumerate() {
            let range = c * chunk..((c + 1) * chunk).min(rows);
            pool.run(&syrk, &[&scores, &weights], range, part);
        }
        let mut total = vec![0.0f64; words / shape.slices];
        for block in partials.chunks(total.len()) {
            total
                .iter_mut()
                .zip(block)
                .for_each(|(s, &v)| *s += f64::from(v));
        }
        std::hint::black_box(total);
    });
    println!(
        "Fisher 65536 x 256 ({chunk}-row chunks, partials summed in f64): {:.1} ms",
        t * 1e3
    );

    let (h, wd) = (1024, 1024);
    let grid = uniform_f32(h * wd, 7);
    let t = median(3, || {
        // One periodic band with a ghost row per side, refilled every step.
        let mut src = vec![0.0f32; (h + 2) * wd];
        src[wd..(h + 1) * wd].copy_from_slice(&grid);
        let mut dst = src.clone();
        let step = HeatStep {
            width: wd,
            height: h,
            row0: 0,
            rows: 1..h + 1,
            periodic: true,
            alpha: 0.2,
            fma: FmaMode::Fused,
        };
        for _ in 0..16 {
            let (top, bottom) = (h * wd, wd);
            src.copy_within(top..top + wd, 0);
            src.copy_within(bottom..bottom + wd, (h + 1) * wd);
            pool.run_with(|| heat_step(&src, &mut dst, &step));
            std::mem::swap(&mut src, &mut dst);
        }
        std::hint::black_box(&src);
    });
    println!("heat 1024 x 1024, 16 steps: {:.1} ms", t * 1e3);
}
