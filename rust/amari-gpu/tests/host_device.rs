//! The host CPU as a device of the executor: listed like an adapter, opened alone or beside
//! wgpu devices, and — the product's promise — contexts that mix it with lavapipe or
//! llvmpipe give every family's results bit for bit as lavapipe alone does, for every
//! strategy, with several devices per adapter and odd sizes that straddle chunks. Faults:
//! an injected fault or a panicking host kernel is a device failure whose chunks the other
//! devices finish.

mod common;

use amari_gpu::fisher::{fisher_categorical_probs, fisher_gaussian_diag, fisher_information};
use amari_gpu::ga::host::GaKernel;
use amari_gpu::ga::{apply, Algebra, Operation};
use amari_gpu::kernel::{FmaMode, HostImpl};
use amari_gpu::tropical::product::Variant;
use amari_gpu::tropical::{BatchShape, Product, Semiring};
use amari_gpu::{ContextOptions, MultiGpuContext, Strategy};
use common::{logging, matmul_host, matvec_host, random, same_bits};

/// A context on `backends` (none: lavapipe alone), `per_adapter` devices per adapter.
fn open(backends: &[&str], per_adapter: usize, chunk_items: usize) -> MultiGpuContext {
    logging();
    let options = if backends.is_empty() {
        let lavapipe = amari_gpu::adapters()
            .into_iter()
            .find(|a| a.backend == "vulkan")
            .expect("lavapipe");
        ContextOptions {
            adapters: Some(vec![lavapipe.index]),
            chunk_items: Some(chunk_items),
            ..Default::default()
        }
    } else {
        ContextOptions {
            backends: Some(backends.iter().map(|b| b.to_string()).collect()),
            devices_per_adapter: per_adapter,
            chunk_items: Some(chunk_items),
            ..Default::default()
        }
    };
    MultiGpuContext::new(options).expect("context opens")
}

/// The mixed contexts every family is checked on, after the lavapipe-only reference.
fn mixed(chunk_items: usize) -> Vec<(String, MultiGpuContext)> {
    [["vulkan", "host"], ["gl", "host"]]
        .iter()
        .map(|b| (b.join("+"), open(b, 2, chunk_items)))
        .collect()
}

fn host_id(ctx: &MultiGpuContext) -> usize {
    let dev = ctx.devices().last().expect("devices");
    assert_eq!(dev.adapter.backend, "host");
    dev.id
}

fn host_chunks(ctx: &MultiGpuContext) -> u64 {
    ctx.stats()[host_id(ctx)].counters.chunks
}

/// Runs `f` on the reference and on every mixed context with every strategy, comparing bits;
/// then once more with every wgpu device failing after one chunk, so that the host computes
/// the rest whatever the plan gave it.
fn check(what: &str, chunk_items: usize, f: impl Fn(&MultiGpuContext, Strategy) -> Vec<f32>) {
    let want = f(&open(&[], 1, chunk_items), Strategy::Balanced);
    for (name, ctx) in mixed(chunk_items) {
        for strategy in Strategy::ALL {
            let got = f(&ctx, strategy);
            same_bits(&format!("{what} on {name}, {strategy:?}"), &got, &want);
        }
        let before = host_chunks(&ctx);
        let host = host_id(&ctx);
        for dev in 0..host {
            ctx.inject_fault(dev, 1).unwrap();
        }
        let got = f(&ctx, Strategy::Balanced);
        same_bits(&format!("{what} on {name}, host finishing"), &got, &want);
        assert!(host_chunks(&ctx) > before, "{what} on {name}: host idle");
        ctx.reset_health(None).unwrap();
    }
}

#[test]
fn the_host_is_listed_last_as_a_cpu_adapter() {
    let infos = amari_gpu::adapters();
    let host = infos.last().expect("adapters");
    assert_eq!(
        (host.backend.as_str(), host.device_type.as_str()),
        ("host", "cpu")
    );
    assert_eq!(host.index, infos.len() - 1);
    assert_eq!(host.driver, "amari-gpu host kernels");
    assert!(host.limit("threads") >= 1);
    // In the default selection, last; without a hardware GPU (lavapipe and llvmpipe here)
    // alone.
    let ctx = MultiGpuContext::new(ContextOptions::default()).expect("default context");
    let opened: Vec<&str> = ctx
        .devices()
        .iter()
        .map(|d| d.adapter.backend.as_str())
        .collect();
    assert_eq!(opened.last(), Some(&"host"));
    if infos.iter().all(|i| i.is_software()) {
        assert_eq!(opened, ["host"]);
    }
}

#[test]
fn the_host_alone_runs_with_fused_fma() {
    let ctx = open(&["host"], 1, 100);
    assert_eq!(ctx.devices().len(), 1);
    assert_eq!(
        ctx.devices()[0].as_host().expect("host").fma,
        FmaMode::Fused
    );
    let algebra = Algebra::new(3, 0, 0).unwrap();
    let (a, b) = (random(8 * 333, 1), random(8 * 333, 2));
    let mut out = vec![f32::NAN; 8 * 333];
    apply(
        &ctx,
        &algebra,
        Operation::Geometric,
        &[&a, &b],
        &mut out,
        None,
    )
    .expect("runs");
    let mut want = vec![f32::NAN; 8 * 333];
    let kernel = GaKernel::new(
        algebra,
        Operation::Geometric,
        amari_gpu::ga::Broadcast::None,
        FmaMode::Fused,
    );
    kernel.run(&[&a, &b], 0..333, &mut want);
    same_bits("host alone", &out, &want);
    assert_eq!(ctx.stats()[0].counters.items, 333);
}

#[test]
fn mixed_contexts_give_lavapipe_bits_for_geometric_algebra() {
    let algebra = Algebra::new(3, 0, 1).unwrap();
    let n = 1001;
    let (a, b) = (random(16 * n, 3), random(16 * n, 4));
    for op in [
        Operation::Geometric,
        Operation::Sandwich,
        Operation::Normalize,
    ] {
        let words = op.output_words(&algebra);
        check(&format!("{op:?}"), 64, |ctx, s| {
            let mut out = vec![f32::NAN; n * words];
            let operands: Vec<&[f32]> = [&a[..], &b[..]][..op.operands().len()].to_vec();
            apply(ctx, &algebra, op, &operands, &mut out, Some(s)).expect("runs");
            out
        });
    }
    // One operand broadcast.
    check("broadcast", 64, |ctx, s| {
        let mut out = vec![f32::NAN; n * 16];
        apply(
            ctx,
            &algebra,
            Operation::Geometric,
            &[&a[..16], &b],
            &mut out,
            Some(s),
        )
        .expect("runs");
        out
    });
}

#[test]
fn mixed_contexts_give_lavapipe_bits_for_tropical_products() {
    let shape = BatchShape {
        batch: 2,
        m: 131,
        k: 33,
        n: 29,
    };
    let a = random(2 * 131 * 33, 5);
    let b = random(2 * 33 * 29, 6);
    let x = random(2 * 33, 7);
    for semiring in [Semiring::MaxPlus, Semiring::MinPlus] {
        check(&format!("matmul {semiring:?}"), 1, |ctx, s| {
            let mut out = vec![f32::NAN; 2 * 131 * 29];
            let product = Product {
                semiring,
                shape,
                a: &a,
                b: &b,
            };
            matmul_host(ctx, Variant::Tiled, product, &mut out, Some(s)).expect("runs");
            out
        });
        check(&format!("matvec {semiring:?}"), 17, |ctx, s| {
            let mut out = vec![f32::NAN; 2 * 131];
            let shape = BatchShape { n: 1, ..shape };
            let product = Product {
                semiring,
                shape,
                a: &a,
                b: &x,
            };
            matvec_host(ctx, product, &mut out, Some(s)).expect("runs");
            out
        });
    }
}

#[test]
fn mixed_contexts_give_lavapipe_bits_for_fisher() {
    let (n, p) = (1003, 45);
    let scores = random(n * p, 8);
    let weights: Vec<f32> = random(n, 9).iter().map(|w| w.abs() + 0.1).collect();
    check("fisher", 100, |ctx, s| {
        let m = fisher_information(ctx, &scores, p, Some(&weights), Some(s)).expect("runs");
        // Each float64 entry as its two 32-bit halves, compared bit for bit.
        m.matrix
            .iter()
            .flat_map(|v| {
                let bits = v.to_bits();
                [
                    f32::from_bits(bits as u32),
                    f32::from_bits((bits >> 32) as u32),
                ]
            })
            .collect()
    });
    let k = 5;
    let probs: Vec<f32> = (0..n * k)
        .map(|i| if i % k == 0 { 0.6 } else { 0.1 })
        .collect();
    check("categorical", 100, |ctx, s| {
        let mut out = vec![f32::NAN; n * k * k];
        fisher_categorical_probs(ctx, &probs, k, &mut out, Some(s)).expect("runs");
        out
    });
    let d = 3;
    let mean = random(n * d, 10);
    let var: Vec<f32> = random(n * d, 11).iter().map(|v| v.abs() + 0.25).collect();
    check("gaussian", 100, |ctx, s| {
        let mut out = vec![f32::NAN; n * 4 * d * d];
        fisher_gaussian_diag(ctx, &mean, &var, d, &mut out, Some(s)).expect("runs");
        out
    });
}

fn ga_product(ctx: &MultiGpuContext, a: &[f32], b: &[f32]) -> Vec<f32> {
    let algebra = Algebra::new(3, 0, 0).unwrap();
    let mut out = vec![f32::NAN; a.len()];
    apply(
        ctx,
        &algebra,
        Operation::Geometric,
        &[a, b],
        &mut out,
        Some(Strategy::Balanced),
    )
    .expect("the other devices finish the host's chunks");
    out
}

#[test]
fn an_injected_fault_on_the_host_moves_its_chunks() {
    let (a, b) = (random(8 * 999, 12), random(8 * 999, 13));
    let want = ga_product(&open(&[], 1, 50), &a, &b);
    let ctx = open(&["vulkan", "host"], 1, 50);
    let host = host_id(&ctx);
    ctx.inject_fault(host, 1).unwrap();
    same_bits("after a host fault", &ga_product(&ctx, &a, &b), &want);
    let health = ctx.health();
    assert!(!health[host].1, "host marked failed");
    assert!(health[host].2.as_deref().unwrap_or("").contains("injected"));
    assert_eq!(ctx.stats()[host].counters.chunks, 1);
}

/// Runs the Cl(3,0) product of `n` rows (operands from `seeds`) on lavapipe and the host,
/// the host's chunks through `host` (a twin that panics somewhere), and checks that the
/// host is a failed device whose chunks lavapipe finished: the bits of lavapipe alone.
fn host_panics_are_handed_over(host: std::sync::Arc<dyn HostImpl>, n: usize, seeds: [u64; 2]) {
    let algebra = Algebra::new(3, 0, 0).unwrap();
    let mut kernel = amari_gpu::ga::kernel(
        &algebra,
        Operation::Geometric,
        amari_gpu::ga::Broadcast::None,
        amari_gpu::Dtype::F32,
    );
    kernel.host = Some(host);
    let (a, b) = (random(8 * n, seeds[0]), random(8 * n, seeds[1]));
    let want = ga_product(&open(&[], 1, 50), &a, &b);
    let ctx = open(&["vulkan", "host"], 1, 50);
    let mut out = vec![f32::NAN; 8 * n];
    ctx.run_map(&kernel, &[&a, &b], &mut out, n, Some(Strategy::Balanced))
        .expect("lavapipe finishes the host's chunks");
    same_bits("after a host panic", &out, &want);
    let (_, healthy, reason) = ctx.health()[host_id(&ctx)].clone();
    assert!(!healthy);
    assert!(reason.unwrap_or_default().contains("panicked"));
}

/// The Cl(3,0) product's host twin in `algebra`.
fn cl_product(algebra: Algebra) -> std::sync::Arc<dyn HostImpl> {
    std::sync::Arc::new(GaKernel::new(
        algebra,
        Operation::Geometric,
        amari_gpu::ga::Broadcast::None,
        FmaMode::Fused,
    ))
}

#[test]
fn a_panicking_host_kernel_is_a_device_failure() {
    // A host twin of another algebra: its output check panics on the first chunk.
    host_panics_are_handed_over(cl_product(Algebra::new(4, 0, 0).unwrap()), 777, [14, 15]);
}

/// A host kernel that panics on its `at`-th run (counting from 0) and otherwise runs
/// `inner`: a failure in the middle of a batch of chunks the host runs side by side.
#[derive(Debug)]
struct PanicsOnRun {
    inner: std::sync::Arc<dyn HostImpl>,
    at: usize,
    runs: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl HostImpl for PanicsOnRun {
    fn run(&self, inputs: &[&[f32]], range: std::ops::Range<usize>, output: &mut [f32]) {
        let run = self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert_ne!(
            run, self.at,
            "a host kernel failed on one chunk of several (test)"
        );
        self.inner.run(inputs, range, output);
    }

    fn with_fma(&self, mode: FmaMode) -> std::sync::Arc<dyn HostImpl> {
        std::sync::Arc::new(PanicsOnRun {
            inner: self.inner.with_fma(mode),
            at: self.at,
            runs: self.runs.clone(),
        })
    }
}

/// The host runs its chunks a few at a time: when one of them fails, the chunks that ran
/// beside it go back too, and the other device's results for all of them are the call's
/// (the same bits as lavapipe alone; a chunk finished twice would be an internal error).
#[test]
fn a_host_chunk_failing_beside_others_hands_them_all_over() {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let host = PanicsOnRun {
        inner: cl_product(Algebra::new(3, 0, 0).unwrap()),
        at: 1,
        runs: runs.clone(),
    };
    host_panics_are_handed_over(std::sync::Arc::new(host), 1500, [16, 17]);
    assert!(
        runs.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "the host ran chunks"
    );
}
