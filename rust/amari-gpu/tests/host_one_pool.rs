//! Where the host device's work runs. A call on a context with the host device runs its
//! parallel checks on the host device's threads, not on rayon's global pool: the global
//! pool's threads spin a while after a pass, and the host device's threads woken beside them
//! for the kernels shared one CPU of two. This binary owns rayon's global pool (built here,
//! its threads named) so that it can read their CPU time before and after the calls. And a
//! pool bound while the machine is quiet binds and frees its threads, with the same bits.

#![cfg(target_os = "linux")]

mod common;

use amari_gpu::fisher::{fisher_categorical_probs, fisher_gaussian_diag, fisher_information};
use amari_gpu::host::affinity::{allowed_cpus, Placement};
use amari_gpu::host::HostPool;
use amari_gpu::tropical::host::TropicalProduct;
use amari_gpu::tropical::kernels::{item_batches, ProductShape, BLOCK_ROWS};
use amari_gpu::tropical::product::Variant;
use amari_gpu::tropical::{BatchShape, Product, Semiring};
use amari_gpu::{ContextOptions, MultiGpuContext};
use common::{logging, matmul_host, one_at_a_time, random};

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

/// Large max-plus operands, Fisher scores, probabilities and variances (whose checks are
/// parallel scans) on a host-only context with two threads: the global pool's threads do
/// not run.
#[test]
fn a_host_call_checks_its_operands_on_the_host_devices_threads() {
    // Alone: the other test binds a pool's threads to every CPU. Beside it a CI rehearsal
    // counted 72 ms on the global pool, and an oversubscribed run traced 25 ms of that kind
    // to the Gaussian call taking the fast path: its kernel then runs on the calling thread,
    // whose parallel pieces go to the global pool. That path is chosen when the timed
    // hand-off to the host pool is slow, as it is beside the other test. (Open: a fast-path
    // host kernel should not split onto the global pool at all.)
    let _alone = one_at_a_time();
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
    // Let the threads the build started go to sleep: until they run less than 0.1 ms in
    // 20 ms (at most 2 s; a fixed 100 ms could end while a starved thread still spun).
    let mut before = global_pool_ns();
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = global_pool_ns();
        let quiet = now - before < 100_000;
        before = now;
        if quiet {
            break;
        }
    }
    let mut out = vec![0.0f32; m * n];
    matmul_host(&ctx, Variant::Tiled, product, &mut out, None).expect("max-plus runs");
    fisher_information(&ctx, &scores, p, None, None).expect("Fisher runs");
    // Probabilities and variances past their checks' parallel size (2^20 values).
    let (rows, k) = (300_000, 4);
    let probs = vec![0.25f32; rows * k];
    let mut outer = vec![0.0f32; rows * k * k];
    fisher_categorical_probs(&ctx, &probs, k, &mut outer, None).expect("categorical runs");
    let (rows, d) = (600_000, 2);
    let (mean, var) = (random(rows * d, 6), vec![0.5f32; rows * d]);
    let mut blocks = vec![0.0f32; rows * 4 * d * d];
    fisher_gaussian_diag(&ctx, &mean, &var, d, &mut blocks, None).expect("Gaussian runs");
    let ran = global_pool_ns() - before;
    assert!(
        ran < 200_000,
        "rayon's global pool ran {ran} ns during host calls (their checks belong on the host \
         device's threads)"
    );
}

/// A pool with one thread per CPU, bound while the machine is quiet: bound, each thread runs
/// on its own CPU; freed, on all of them again; the product's bits are the same each way.
#[test]
fn a_pool_bound_while_quiet_binds_and_frees_its_threads() {
    let _alone = one_at_a_time();
    let cpus = allowed_cpus();
    let pool = HostPool::placed(cpus.len(), Placement::WhileQuiet).expect("pool");
    if cpus.len() < 2 {
        // One CPU: such a pool has nothing to bind (the CI machine has 2).
        pool.rebind(Some(true));
        assert_eq!(pool.allowed_cpus(), vec![cpus.clone()]);
        return;
    }
    let (k, n, items) = (96, 80, 6);
    let rows = items * BLOCK_ROWS;
    let a = random(rows * k, 4);
    let b = random(k * n, 5);
    let kernel = TropicalProduct::new(
        Semiring::MaxPlus,
        ProductShape {
            k,
            cols: n,
            b_words: b.len(),
            batches: 1,
            accumulate: false,
            dtype: amari_gpu::dtype::Dtype::F32,
        },
    );
    let batches = item_batches(1, items);
    let inputs: [&[f32]; 4] = [&a, &batches, &b, &[Semiring::MaxPlus.zero()]];
    let product = |pool: &HostPool| {
        let mut out = vec![f32::NAN; rows * n];
        pool.run(&kernel, &inputs, 0..items, &mut out);
        out
    };
    let free = product(&pool);
    pool.rebind(Some(true));
    let mut bound = pool.allowed_cpus();
    bound.sort();
    assert_eq!(bound, cpus.iter().map(|&c| vec![c]).collect::<Vec<_>>());
    assert_eq!(product(&pool), free);
    pool.rebind(Some(false));
    assert!(pool.allowed_cpus().iter().all(|c| *c == cpus));
    assert_eq!(product(&pool), free);
}
