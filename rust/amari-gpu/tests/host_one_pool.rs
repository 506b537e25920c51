//! A call on a context with the host device runs its parallel checks on the host device's
//! threads, not on rayon's global pool: the global pool's threads spin a while after a
//! pass, and the host device's threads woken beside them for the kernels shared one CPU of
//! two. This binary owns rayon's global pool (built here, its threads named) so that it
//! can read their CPU time before and after the calls.

#![cfg(target_os = "linux")]

mod common;

use amari_gpu::fisher::fisher_information;
use amari_gpu::tropical::product::Variant;
use amari_gpu::tropical::{BatchShape, Product, Semiring};
use amari_gpu::{ContextOptions, MultiGpuContext};
use common::{logging, matmul_host, random};

/// The name of rayon's global pool's threads in this binary.
const GLOBAL: &str = "rayon-global";

/// Nanoseconds the global pool's threads have run (from `/proc/self/task/*/schedstat`).
fn global_pool_ns() -> u64 {
    let mut total = 0;
    let mut seen = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("tasks") {
        let path = task.expect("task").path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if name.trim() == GLOBAL {
            let stat = std::fs::read_to_string(path.join("schedstat")).expect("schedstat");
            total += stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .expect("run time");
            seen += 1;
        }
    }
    assert_eq!(seen, 2, "the global pool's threads are listed");
    total
}

/// Large max-plus operands and Fisher scores (whose checks are parallel scans) on a
/// host-only context with two threads: the global pool's threads do not run.
#[test]
fn a_host_call_checks_its_operands_on_the_host_devices_threads() {
    logging();
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .thread_name(|_| GLOBAL.to_string())
        .build_global()
        .expect("the global pool is built here first");
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["host".to_string()]),
        host_threads: Some(2),
        ..Default::default()
    })
    .expect("host context");
    // Both operands past the scans' parallel size (2^18 words), the Fisher scores past
    // theirs (1024 rows of p words).
    let (m, k, n) = (640, 512, 640);
    let a = random(m * k, 1);
    let b = random(k * n, 2);
    let product = Product {
        semiring: Semiring::MaxPlus,
        shape: BatchShape { batch: 1, m, k, n },
        a: &a,
        b: &b,
    };
    let (rows, p) = (8192, 64);
    let scores = random(rows * p, 3);
    // Let the threads the build started go to sleep.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let before = global_pool_ns();
    let mut out = vec![0.0f32; m * n];
    matmul_host(&ctx, Variant::Tiled, product, &mut out, None).expect("max-plus runs");
    fisher_information(&ctx, &scores, p, None, None).expect("Fisher runs");
    let ran = global_pool_ns() - before;
    assert!(
        ran < 200_000,
        "rayon's global pool ran {ran} ns during host calls (their checks belong on the host \
         device's threads)"
    );
}
