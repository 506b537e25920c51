//! Where the host device's work runs. A call on a context with the host device runs its
//! parallel checks on the host device's threads, not on rayon's global pool: the global
//! pool's threads spin a while after a pass, and the host device's threads woken beside them
//! for the kernels shared one CPU of two. This binary owns rayon's global pool (built here,
//! its threads named) so that it can read their CPU time before and after the calls. And a
//! pool bound while the machine is quiet binds and frees its threads, with the same bits.

#![cfg(target_os = "linux")]

mod common;

use amari_gpu::dtype::Dtype;
use amari_gpu::elementwise::{self, Layout, Op};
use amari_gpu::fisher::{
    categorical_outer_kernel, fisher_categorical_probs, fisher_gaussian_diag, fisher_information,
    gaussian_diag_kernel, shaped_kernel, syrk64, SyrkShape,
};
use amari_gpu::ga::{self, geometric_cl3_kernel, Algebra, Broadcast, Operation};
use amari_gpu::host::affinity::{allowed_cpus, Placement};
use amari_gpu::host::{HostDevice, HostPool};
use amari_gpu::kernel::{FmaMode, Input, Kernel};
use amari_gpu::tropical::host::TropicalProduct;
use amari_gpu::tropical::kernels::{item_batches, ProductShape, BLOCK_ROWS};
use amari_gpu::tropical::product::Variant;
use amari_gpu::tropical::{self, BatchShape, Product, Semiring};
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

/// The global pool's run time once its threads are asleep: when they run less than 0.1 ms
/// in 20 ms (at most 2 s; a fixed 100 ms could end while a starved thread still spun).
fn quiet_global_pool() -> u64 {
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
    before
}

/// The global pool, built here (once, by whichever test comes first).
fn global_pool() {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .thread_name(|_| GLOBAL.to_string())
            .build_global()
            .expect("the global pool is built here first");
    });
}

/// Large max-plus operands, Fisher scores, probabilities and variances (whose checks are
/// parallel scans) on a host-only context with two threads: the global pool's threads do
/// not run.
#[test]
fn a_host_call_checks_its_operands_on_the_host_devices_threads() {
    // Alone: the other tests bind a pool's threads to every CPU, or call kernels on this
    // thread. (A call that takes the fast path runs its kernel on the calling thread only
    // when the kernel runs it as one piece: the last test below.)
    let _alone = one_at_a_time();
    logging();
    global_pool();
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
    let before = quiet_global_pool();
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
            dtype: Dtype::F32,
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

/// Each kernel with a host twin, run on this thread (outside every pool, as a fast-path
/// call runs it): over the most items it says it runs as one piece, rayon's global pool
/// does not run; over twice the fewest it says it splits, it does (so what it says is
/// about its real split, and a fast-path call of that size goes to the host device's pool).
#[test]
fn a_kernel_that_says_it_runs_as_one_piece_leaves_the_global_pool_asleep() {
    let _alone = one_at_a_time();
    global_pool();
    let cl4 = Algebra::new(4, 0, 0).expect("Cl(4,0)");
    let product = |dtype| ProductShape {
        k: 8,
        cols: 8,
        b_words: 64 * dtype_words(dtype),
        batches: 1,
        accumulate: false,
        dtype,
    };
    let kernels: Vec<Kernel> = vec![
        geometric_cl3_kernel(),
        ga::kernel(
            &Algebra::CL3,
            Operation::Geometric,
            Broadcast::None,
            Dtype::F16,
        ),
        ga::kernel(
            &Algebra::CL3,
            Operation::Geometric,
            Broadcast::None,
            Dtype::F64,
        ),
        ga::kernel(&cl4, Operation::Geometric, Broadcast::None, Dtype::F32),
        ga::kernel(&cl4, Operation::Geometric, Broadcast::None, Dtype::F16),
        ga::kernel(&cl4, Operation::Geometric, Broadcast::None, Dtype::F64),
        elementwise::kernel(Op::Add, (4, Dtype::F32), Layout::Rows, false),
        gaussian_diag_kernel(2),
        categorical_outer_kernel(4),
        tropical::kernels::tiled(Semiring::MaxPlus, &product(Dtype::F32)),
        tropical::kernels::rows(Semiring::MaxPlus, &product(Dtype::F32)),
        tropical::kernels::matvec(Semiring::MaxPlus, &product(Dtype::F32)),
        tropical::kernels::row_stats(8, Dtype::F32),
        shaped_kernel(SyrkShape::new(16)),
        shaped_kernel(SyrkShape::new(64)),
        syrk64::kernel(64, 64),
    ];
    let device = HostDevice::new(2, FmaMode::Fused).expect("host device");
    for kernel in &kernels {
        let host = kernel.host.as_ref().expect("a host twin");
        // The fewest items the kernel says it splits (what it says grows with the items).
        let (mut low, mut high) = (1usize, 1usize << 22);
        assert!(host.splits(high), "{}: splits at some size", kernel.id);
        while low < high {
            let mid = (low + high) / 2;
            match host.splits(mid) {
                true => high = mid,
                false => low = mid + 1,
            }
        }
        // Items of the kernel run on this thread, or (`fast`) as a fast-path call runs
        // them on the host device: the global pool's run time meanwhile.
        let run = |items: usize, fast: bool| {
            let inputs: Vec<Vec<f32>> = (kernel.inputs.iter())
                .map(|input| match *input {
                    Input::PerItem(words) => random(items * words, 7),
                    Input::Whole(words) => random(words, 8),
                })
                .collect();
            let inputs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
            let mut out = vec![0.0f32; kernel.output_words(items)];
            let before = quiet_global_pool();
            match fast {
                true => device
                    .run(0, host.as_ref(), &inputs, (0..items, &mut out), true)
                    .expect("runs"),
                false => host.run(&inputs, 0..items, &mut out),
            }
            global_pool_ns() - before
        };
        if low > 1 {
            let ran = run(low - 1, false);
            assert!(
                ran < 20_000,
                "{}: {} items in one piece, yet the global pool ran {ran} ns",
                kernel.id,
                low - 1
            );
        }
        let ran = run(2 * low, false);
        assert!(
            ran > 0,
            "{}: {} items split, yet the global pool did not run",
            kernel.id,
            2 * low
        );
        let ran = run(2 * low, true);
        assert!(
            ran < 20_000,
            "{}: {} items of a fast-path call ran {ran} ns on the global pool",
            kernel.id,
            2 * low
        );
    }
}

/// Words of one value of `dtype` (float16 values are two to a word).
fn dtype_words(dtype: Dtype) -> usize {
    dtype.bytes().div_ceil(4)
}
