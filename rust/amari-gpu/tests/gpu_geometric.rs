//! The Cl(3,0) geometric product on real adapters (Mesa's lavapipe and llvmpipe where there
//! is no GPU), against the float64 reference.

use amari_gpu::ga::{geometric_product_cl3, geometric_product_cl3_reference};
use amari_gpu::sample::uniform_f32;
use amari_gpu::{ContextOptions, Error, MultiGpuContext};

fn check_against_reference(a: &[f32], b: &[f32], out: &[f32]) {
    for i in 0..a.len() / 8 {
        let x: [f64; 8] = std::array::from_fn(|k| f64::from(a[8 * i + k]));
        let y: [f64; 8] = std::array::from_fn(|k| f64::from(b[8 * i + k]));
        let want = geometric_product_cl3_reference(&x, &y);
        let scale = want.iter().map(|v| v.abs()).fold(1e-3, f64::max);
        for k in 0..8 {
            let err = (f64::from(out[8 * i + k]) - want[k]).abs() / scale;
            assert!(
                err < 1e-5,
                "item {i} blade {k}: got {} want {} (rel {err:e})",
                out[8 * i + k],
                want[k]
            );
        }
    }
}

fn run(options: ContextOptions, n: usize) {
    let ctx = MultiGpuContext::new(options).expect("context opens");
    let a = uniform_f32(8 * n, 1);
    let b = uniform_f32(8 * n, 2);
    let mut out = vec![f32::NAN; 8 * n];
    geometric_product_cl3(&ctx, &a, &b, &mut out, None).expect("product runs");
    check_against_reference(&a, &b, &out);
}

#[test]
fn every_adapter_alone() {
    // The static Cl(3,0) kernel has no host twin: the wgpu adapters only.
    let adapters: Vec<_> = amari_gpu::adapters()
        .into_iter()
        .filter(|i| !i.is_host())
        .collect();
    assert!(
        !adapters.is_empty(),
        "no adapter: install mesa-vulkan-drivers"
    );
    for info in adapters {
        run(
            ContextOptions {
                adapters: Some(vec![info.index]),
                ..Default::default()
            },
            70_001,
        );
    }
}

#[test]
fn three_logical_devices_with_small_chunks() {
    // Small chunks so every device gets several, with a ragged last chunk.
    run(
        ContextOptions {
            backends: Some(vec!["vulkan".into()]),
            devices_per_adapter: 3,
            chunk_items: Some(4096),
            ..Default::default()
        },
        50_003,
    );
}

#[test]
fn chunks_too_large_for_the_device_are_refused() {
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        chunk_items: Some(1 << 30),
        ..Default::default()
    })
    .expect("context opens");
    let a = vec![0.0f32; 64];
    let mut out = vec![0.0f32; 64];
    match geometric_product_cl3(&ctx, &a, &a, &mut out, None) {
        Err(Error::InvalidArgument { argument, .. }) => assert_eq!(argument, "chunk_items"),
        other => panic!("expected InvalidArgument(chunk_items), got {other:?}"),
    }
}

#[test]
fn mismatched_batches_are_shape_errors() {
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        ..Default::default()
    })
    .expect("context opens");
    let a = vec![0.0f32; 16];
    let b = vec![0.0f32; 24];
    let mut out = vec![0.0f32; 16];
    match geometric_product_cl3(&ctx, &a, &b, &mut out, None) {
        Err(Error::Shape { argument, .. }) => assert_eq!(argument, "b"),
        other => panic!("expected Shape(b), got {other:?}"),
    }
}
