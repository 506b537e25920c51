//! The distribution engine on real devices: identical results for any device count and
//! strategy, recovery from a device failing mid-call, health and counters.

use amari_gpu::ga::geometric_product_cl3;
use amari_gpu::sample::uniform_f32;
use amari_gpu::{ContextOptions, Error, MultiGpuContext, Strategy};

fn context(devices_per_adapter: usize) -> MultiGpuContext {
    MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter,
        chunk_items: Some(4096),
        ..Default::default()
    })
    .expect("context opens")
}

fn product(ctx: &MultiGpuContext, a: &[f32], b: &[f32], strategy: Strategy) -> Vec<f32> {
    let mut out = vec![f32::NAN; a.len()];
    geometric_product_cl3(ctx, a, b, &mut out, Some(strategy)).expect("product runs");
    out
}

#[test]
fn results_are_bit_identical_for_every_device_count_and_strategy() {
    let n = 50_001;
    let (a, b) = (uniform_f32(8 * n, 3), uniform_f32(8 * n, 4));
    let reference = product(&context(1), &a, &b, Strategy::Balanced);
    for devices in [2, 3, 5, 8] {
        let ctx = context(devices);
        for strategy in Strategy::ALL {
            let out = product(&ctx, &a, &b, strategy);
            assert!(
                out.iter()
                    .zip(&reference)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{devices} devices, {strategy}: result differs"
            );
        }
    }
}

fn check_recovery(strategy: Strategy, n: usize, after_chunks: u64) {
    let (a, b) = (uniform_f32(8 * n, 5), uniform_f32(8 * n, 6));
    let want = product(&context(1), &a, &b, Strategy::Balanced);
    let ctx = context(4);
    ctx.inject_fault(2, after_chunks).unwrap();
    let got = product(&ctx, &a, &b, strategy);
    assert_eq!(got, want, "{strategy}");
    let health = ctx.health();
    assert!(
        !health[2].1,
        "{strategy}: device 2 should be unhealthy after its injected fault"
    );
    assert!(health[2].2.as_deref().unwrap_or("").contains("injected"));
    assert!(health.iter().filter(|h| h.0 != 2).all(|h| h.1));
    let stats = ctx.stats();
    assert_eq!(
        stats[2].counters.chunks, after_chunks,
        "{strategy}: chunks completed before the fault"
    );
    assert!(stats[2].counters.failed_chunks >= 1);
    assert_eq!(
        stats.iter().map(|s| s.counters.items).sum::<u64>(),
        n as u64
    );
    // A later call leaves the failed device out.
    let workload = amari_gpu::ga::geometric_cl3_kernel().workload(n);
    let plan = ctx.distribute_workload(&workload, Some(strategy)).unwrap();
    assert!(plan.assignments.iter().all(|a| a.device != 2));
}

#[test]
fn an_injected_failure_mid_call_is_recovered_on_the_other_devices() {
    // 25 chunks of 4096 over 4 identical devices: static plans give device 2 six or seven.
    check_recovery(Strategy::Balanced, 100_000, 1);
    check_recovery(Strategy::Capability, 100_000, 3);
}

#[test]
fn an_adaptive_puller_that_fails_at_its_first_chunk_hands_it_on() {
    // Devices pull at run time; with 245 chunks every device pulls at least one.
    check_recovery(Strategy::Adaptive, 1_000_000, 0);
}

#[test]
fn when_every_device_fails_the_call_says_so_and_reset_restores_them() {
    let n = 20_000;
    let (a, b) = (uniform_f32(8 * n, 7), uniform_f32(8 * n, 8));
    let ctx = context(2);
    ctx.inject_fault(0, 0).unwrap();
    ctx.inject_fault(1, 2).unwrap();
    let mut out = vec![0.0; 8 * n];
    match geometric_product_cl3(&ctx, &a, &b, &mut out, None) {
        Err(Error::NoHealthyDevice(reason)) => {
            assert!(reason.contains("no healthy device"), "{reason}")
        }
        other => panic!("expected NoHealthyDevice, got {other:?}"),
    }
    ctx.reset_health(None).unwrap();
    assert!(ctx.health().iter().all(|h| h.1));
    assert_eq!(
        product(&ctx, &a, &b, Strategy::Auto),
        product(&context(1), &a, &b, Strategy::Auto)
    );
}
