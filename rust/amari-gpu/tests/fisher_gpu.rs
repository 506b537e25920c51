//! The information-geometry kernels on real adapters (Mesa's lavapipe and llvmpipe where
//! there is no GPU), against the float64 references of `amari_gpu::fisher::reference`.

use amari_gpu::fisher::{self, reference};
use amari_gpu::sample::uniform_f32;
use amari_gpu::{ContextOptions, Error, MultiGpuContext, Strategy};

/// Largest |got - want| relative to max |want|.
fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / scale)
        .fold(0.0, f64::max)
}

fn context(devices_per_adapter: usize, chunk_items: Option<usize>) -> MultiGpuContext {
    MultiGpuContext::new(ContextOptions {
        adapters: Some(vec![0]),
        devices_per_adapter,
        chunk_items,
        ..Default::default()
    })
    .expect("context opens")
}

#[test]
fn tiled_and_naive_match_the_reference_across_tile_edges() {
    // Small chunks on three devices: several chunks each, ragged last chunk.
    let ctx = context(3, Some(97));
    for (p, n) in [
        (1, 50),
        (5, 1000),
        (63, 700),
        (64, 64),
        (65, 1001),
        (130, 333),
    ] {
        let scores = uniform_f32(n * p, p as u64);
        let weights: Vec<f32> = uniform_f32(n, 7).iter().map(|v| v.abs() * 3.0).collect();
        for w in [None, Some(weights.as_slice())] {
            let want = reference::fisher_information(&scores, p, w);
            let tiled = fisher::fisher_information(&ctx, &scores, p, w, None).expect("tiled");
            let naive = fisher::fisher_information_by(
                &ctx,
                fisher::SyrkVariant::Naive,
                &scores,
                p,
                w,
                None,
            )
            .expect("naive");
            assert_eq!(tiled.plan.n_chunks as usize, n.div_ceil(97));
            for (name, got) in [("tiled", &tiled.matrix), ("naive", &naive.matrix)] {
                let err = relative_error(got, &want);
                assert!(
                    err < 1e-5,
                    "{name} p={p} n={n} weighted={}: {err:e}",
                    w.is_some()
                );
                for i in 0..p {
                    for j in 0..p {
                        assert_eq!(got[i * p + j], got[j * p + i], "{name} not symmetric");
                    }
                }
            }
        }
    }
}

#[test]
fn every_adapter_with_default_chunks() {
    for info in amari_gpu::adapters().into_iter().filter(|i| !i.is_host()) {
        let ctx = MultiGpuContext::new(ContextOptions {
            adapters: Some(vec![info.index]),
            ..Default::default()
        })
        .expect("context opens");
        // Both kernels: 8 x 8 blocks (P <= 64) and 64 x 64 tiles.
        for (p, n) in [(40, 9_000), (200, 5_000)] {
            let scores = uniform_f32(n * p, 11);
            let got = fisher::fisher_information(&ctx, &scores, p, None, None).expect("runs");
            let want = reference::fisher_information(&scores, p, None);
            let err = relative_error(&got.matrix, &want);
            assert!(err < 1e-5, "adapter {} p={p}: {err:e}", info.index);
        }
    }
}

#[test]
fn same_bits_for_every_device_count_and_strategy() {
    let (p, n) = (70, 5_000);
    let scores = uniform_f32(n * p, 3);
    let weights: Vec<f32> = uniform_f32(n, 4).iter().map(|v| v.abs()).collect();
    let want = fisher::fisher_information(&context(1, Some(256)), &scores, p, Some(&weights), None)
        .expect("one device")
        .matrix;
    for devices in [2, 5] {
        let ctx = context(devices, Some(256));
        for strategy in [Strategy::Balanced, Strategy::Adaptive, Strategy::Auto] {
            let got = fisher::fisher_information(&ctx, &scores, p, Some(&weights), Some(strategy))
                .expect("runs");
            assert!(
                got.matrix
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{devices} devices, {strategy:?}: not bit-identical"
            );
        }
    }
}

#[test]
fn categorical_and_gaussian_match_the_reference() {
    let ctx = context(2, Some(64));
    let (n, k) = (300, 7);
    let logits: Vec<f32> = uniform_f32(n * k, 5).iter().map(|v| v * 30.0).collect();
    let mut from_logits = vec![f32::NAN; n * k * k];
    fisher::fisher_categorical_logits(&ctx, &logits, k, &mut from_logits, None).expect("logits");
    let probs: Vec<f32> = logits
        .chunks(k)
        .flat_map(|row| reference::softmax(row).into_iter().map(|v| v as f32))
        .collect();
    let mut from_probs = vec![f32::NAN; n * k * k];
    fisher::fisher_categorical_probs(&ctx, &probs, k, &mut from_probs, None).expect("probs");
    for i in 0..n {
        let want = reference::categorical(&reference::softmax(&logits[i * k..(i + 1) * k]));
        for out in [&from_logits, &from_probs] {
            for (e, w) in want.iter().enumerate() {
                let got = f64::from(out[i * k * k + e]);
                assert!((got - w).abs() < 1e-6, "row {i} entry {e}: {got} vs {w}");
            }
        }
    }
    let d = 3;
    let var: Vec<f32> = uniform_f32(n * d, 6)
        .iter()
        .map(|v| v.abs() + 0.01)
        .collect();
    let mean = uniform_f32(n * d, 8);
    let mut out = vec![f32::NAN; n * 4 * d * d];
    fisher::fisher_gaussian_diag(&ctx, &mean, &var, d, &mut out, None).expect("gaussian");
    for i in 0..n {
        let want = reference::gaussian_diag(&var[i * d..(i + 1) * d]);
        for (e, w) in want.iter().enumerate() {
            let got = f64::from(out[i * 4 * d * d + e]);
            assert!(
                (got - w).abs() <= 1e-6 * w.abs(),
                "row {i} entry {e}: {got} vs {w}"
            );
        }
    }
}

#[test]
fn bad_arguments_are_named() {
    let ctx = context(1, None);
    let named = |r: Result<fisher::FisherMatrix, Error>| match r {
        Err(Error::Shape { argument, .. } | Error::InvalidArgument { argument, .. }) => argument,
        other => panic!("expected an argument error, got {other:?}"),
    };
    let scores = vec![1.0f32; 12];
    assert_eq!(
        named(fisher::fisher_information(&ctx, &[], 3, None, None)),
        "scores"
    );
    assert_eq!(
        named(fisher::fisher_information(&ctx, &scores, 5, None, None)),
        "scores"
    );
    let mut nan = scores.clone();
    nan[7] = f32::NAN;
    assert_eq!(
        named(fisher::fisher_information(&ctx, &nan, 3, None, None)),
        "scores"
    );
    for bad in [
        vec![1.0, -1.0, 1.0, 1.0],
        vec![0.0; 4],
        vec![1.0; 3],
        vec![f32::NAN; 4],
    ] {
        let r = fisher::fisher_information(&ctx, &scores, 3, Some(&bad), None);
        assert_eq!(named(r), "weights");
    }
    // Products beyond float32 are scaled by an exact power of two, not refused.
    let huge = vec![1e30f32; 12];
    let f = fisher::fisher_information(&ctx, &huge, 3, None, None).unwrap();
    let want = f64::from(1e30f32).powi(2);
    assert!(
        f.matrix.iter().all(|&v| (v / want - 1.0).abs() < 1e-6),
        "{:?}",
        f.matrix
    );
}
