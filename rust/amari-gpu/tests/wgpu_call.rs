//! The fixed cost of a small call on a wgpu device, checked by what the device does rather
//! than by time: a chunk on an idle device is submitted on the calling thread, a loop of
//! tiny calls reuses the pool's buffers, bind groups and upload staging (so it allocates
//! nothing once warm, no upload creates a staging buffer, and its memory is bounded), and a
//! failed device's pool keeps nothing to hand out.
#![cfg(feature = "bench-support")]

mod common;

use amari_gpu::ga::{kernel, Algebra, Broadcast, Operation};
use amari_gpu::kernel::Kernel;
use amari_gpu::{raw, ContextOptions, MultiGpuContext, Strategy};
use common::{contexts, random, same_bits};

fn product() -> Kernel {
    kernel(
        &Algebra::new(3, 0, 0).expect("valid algebra"),
        Operation::Geometric,
        Broadcast::None,
        amari_gpu::Dtype::F32,
    )
}

#[test]
fn a_chunk_on_an_idle_device_is_submitted_on_the_calling_thread() {
    let k = product();
    let (a, b) = (random(8, 1), random(8, 2));
    for (name, ctx) in contexts(None) {
        let dev = &ctx.devices()[0];
        let mut out = vec![0.0f32; 8];
        for round in 0..3 {
            let inline = raw::engine_chunk(dev, &k, &[&a, &b], 1, &mut out).expect("chunk runs");
            assert!(
                inline,
                "{name}: round {round} handed its submit to a thread"
            );
        }
        let mut whole = vec![0.0f32; 8];
        ctx.run_map(&k, &[&a, &b], &mut whole, 1, None)
            .expect("call runs");
        same_bits(&format!("{name}: engine chunk vs call"), &out, &whole);
    }
}

#[test]
fn ten_thousand_tiny_calls_reuse_the_pool_and_keep_it_bounded() {
    let k = product();
    let rows = 1000;
    let (a, b) = (random(8 * rows, 3), random(8 * rows, 4));
    for (name, ctx) in contexts(None) {
        let mut batch = vec![0.0f32; 8 * rows];
        ctx.run_map(&k, &[&a, &b], &mut batch, rows, None)
            .expect("batch runs");
        let dev = &ctx.devices()[0];
        let mut out = vec![0.0f32; 8];
        let mut call = |i: usize| {
            let r = i % rows;
            let (ra, rb) = (&a[8 * r..8 * r + 8], &b[8 * r..8 * r + 8]);
            ctx.run_map(&k, &[ra, rb], &mut out, 1, None)
                .expect("tiny call runs");
            // A row's arithmetic does not depend on the path that ran it.
            same_bits(
                &format!("{name}: row {r} alone vs in a batch"),
                &out,
                &batch[8 * r..8 * r + 8],
            );
        };
        for i in 0..20 {
            call(i);
        }
        let (live, (_, hits)) = (dev.pool.live_buffers(), dev.pool.bind_groups());
        let (staged, reused) = dev.pool.staged();
        for i in 20..10_000 {
            call(i);
        }
        let (groups, hits_after) = dev.pool.bind_groups();
        let (staged_after, reused_after) = dev.pool.staged();
        // Each call's inputs and uniform block go up through one pooled staging buffer,
        // mapped again after its submission and reused by the next call.
        assert_eq!(
            staged_after - staged,
            9_980,
            "{name}: tiny calls did not stage their uploads once each"
        );
        assert_eq!(
            reused_after - reused,
            9_980,
            "{name}: {} of 9,980 tiny calls created an upload staging buffer",
            9_980 - (reused_after - reused)
        );
        assert_eq!(
            dev.pool.live_buffers(),
            live,
            "{name}: the pool grew over 10,000 tiny calls"
        );
        assert!(groups <= 256, "{name}: {groups} bind groups kept");
        assert!(
            hits_after - hits >= 9_980,
            "{name}: only {} of 9,980 tiny calls reused a bind group",
            hits_after - hits
        );
    }
}

#[test]
fn a_failed_device_keeps_no_buffers_or_bind_groups_to_hand_out() {
    let k = product();
    let rows = 50_000;
    let (a, b) = (random(8 * rows, 5), random(8 * rows, 6));
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter: 2,
        ..Default::default()
    })
    .expect("two lavapipe devices open");
    let mut want = vec![0.0f32; 8 * rows];
    ctx.run_map(&k, &[&a, &b], &mut want, rows, None)
        .expect("call runs");
    let dev = &ctx.devices()[0];
    assert!(dev.pool.idle_buffers() > 0 && dev.pool.bind_groups().0 > 0);
    assert!(dev.pool.staged().0 > 0, "the call staged no uploads");
    ctx.inject_fault(0, 0).expect("device 0 exists");
    let mut got = vec![0.0f32; 8 * rows];
    ctx.run_map(&k, &[&a, &b], &mut got, rows, Some(Strategy::Balanced))
        .expect("the other device takes the work");
    same_bits("after a device failed", &got, &want);
    assert!(!dev.health.is_healthy(), "the injected fault never fired");
    assert_eq!(
        dev.pool.idle_buffers(),
        0,
        "a failed device's pool kept buffers"
    );
    assert_eq!(
        dev.pool.bind_groups().0,
        0,
        "a failed device's pool kept bind groups"
    );
}
