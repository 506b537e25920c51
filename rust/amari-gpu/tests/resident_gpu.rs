//! Resident arrays through the core API: a row kernel without a host implementation on an
//! array with a shard on the host device runs that shard's rows on a wgpu device instead,
//! and every result equals the engine's numpy-style path bit for bit; held bytes return to
//! zero when the handles go.

mod common;

use amari_gpu::ga::{kernel, Algebra, Broadcast, Operation};
use amari_gpu::{ContextOptions, MultiGpuContext, ResidentOperand as Operand, Strategy};
use common::{logging, random, same_bits};

fn mixed() -> MultiGpuContext {
    logging();
    MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into(), "host".into()]),
        devices_per_adapter: 2,
        chunk_items: Some(64),
        ..Default::default()
    })
    .expect("lavapipe and the host device open")
}

#[test]
fn rows_on_a_device_that_cannot_run_the_kernel_move_to_one_that_can() {
    let ctx = mixed();
    let host = ctx
        .devices()
        .iter()
        .position(|d| d.as_host().is_some())
        .expect("a host device");
    let n = 1000;
    let (a, b) = (random(n * 8, 1), random(n * 8, 2));
    let algebra = Algebra::new(3, 0, 0).unwrap();
    let with_host = kernel(
        &algebra,
        Operation::Geometric,
        Broadcast::None,
        amari_gpu::Dtype::F32,
    );
    // The same WGSL under another id, without a host twin: the host device cannot run it.
    let gpu_only = amari_gpu::kernel::Kernel {
        id: format!("{}_gpu_only", with_host.id),
        host: None,
        ..with_host.clone()
    };
    let mut want = vec![0.0; n * 8];
    ctx.run_map(&with_host, &[&a, &b], &mut want, n, None)
        .unwrap();

    let ra = ctx.upload(&a, 8, Some(Strategy::Balanced)).unwrap();
    let rb = ctx.upload(&b, 8, Some(Strategy::Capability)).unwrap();
    let layout = ra.sharding("a").unwrap();
    assert!(layout.iter().any(|s| s.0 == host), "{layout:?}");
    for k in [&with_host, &gpu_only] {
        let out = ctx
            .run_resident(
                k,
                &[("a", Operand::Resident(&ra)), ("b", Operand::Resident(&rb))],
            )
            .unwrap();
        let sharding = out.sharding("out").unwrap();
        if k.host.is_none() {
            assert!(sharding.iter().all(|s| s.0 != host), "{sharding:?}");
        } else {
            assert_eq!(sharding, layout);
        }
        let mut got = vec![0.0; n * 8];
        ctx.gather(&out, &mut got).unwrap();
        same_bits(&k.id, &got, &want);
        // Mixed: the numpy-side operand is uploaded to match.
        let mixed = ctx
            .run_resident(
                k,
                &[("a", Operand::Resident(&ra)), ("b", Operand::Host(&b))],
            )
            .unwrap();
        ctx.gather(&mixed, &mut got).unwrap();
        same_bits(&k.id, &got, &want);
    }
    drop((ra, rb));
    assert!(ctx.resident_bytes().iter().all(|&b| b == 0));
}

#[test]
fn the_fisher_matrix_of_resident_scores_is_the_numpy_paths() {
    let ctx = mixed();
    // P = 10 (padded to 12 on the devices) and a column of huge scores (scaled): the
    // prepared copy runs; 1000 rows in 64-row chunks, some cut by shard boundaries.
    let (n, p) = (1000, 10);
    let mut scores = random(n * p, 3);
    for row in scores.chunks_exact_mut(p) {
        row[7] *= 1e30;
    }
    let weights = random(n, 4).into_iter().map(f32::abs).collect::<Vec<_>>();
    let want = amari_gpu::fisher::fisher_information(&ctx, &scores, p, Some(&weights), None)
        .unwrap()
        .matrix;
    for strategy in [Strategy::Balanced, Strategy::Capability] {
        let resident = ctx.upload(&scores, p, Some(strategy)).unwrap();
        let got = amari_gpu::fisher::fisher_information_resident(&ctx, &resident, Some(&weights))
            .unwrap();
        let (got_bits, want_bits): (Vec<u64>, Vec<u64>) = (
            got.iter().map(|v| v.to_bits()).collect(),
            want.iter().map(|v| v.to_bits()).collect(),
        );
        assert_eq!(got_bits, want_bits, "{strategy:?}");
    }
    assert!(ctx.resident_bytes().iter().all(|&b| b == 0));
}
