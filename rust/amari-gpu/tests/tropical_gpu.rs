//! Tropical kernels on real adapters (lavapipe and llvmpipe where there is no GPU) against a
//! float32 host reference: bit-equal, infinities included.

mod common;

use amari_gpu::sample::splitmix64;
use amari_gpu::tropical::product::Variant;
use amari_gpu::tropical::{shortest_paths, BatchShape, Product, Semiring};
use amari_gpu::{ContextOptions, Error, MultiGpuContext, Strategy};
use common::{matmul_host, matvec_host, validate};

/// Deterministic values: small integers and halves, with ±inf sprinkled in (SplitMix64).
fn values(n: usize, seed: u64, inf_every: u64) -> Vec<f32> {
    splitmix64(seed)
        .take(n)
        .map(|z| match z % inf_every.max(2) {
            0 => f32::NEG_INFINITY,
            1 => f32::INFINITY,
            _ => ((z >> 40) % 2001) as f32 * 0.37 - 370.0,
        })
        .collect()
}

/// The float32 product on the host, in the same semantics (zero absorbing).
fn reference(s: Semiring, a: &[f32], b: &[f32], shape: BatchShape) -> Vec<f32> {
    let BatchShape { batch, m, k, n } = shape;
    let mut out = vec![s.zero(); batch * m * n];
    for p in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = s.zero();
                for q in 0..k {
                    acc = s.add(acc, s.mul(a[(p * m + i) * k + q], b[(p * k + q) * n + j]));
                }
                out[(p * m + i) * n + j] = acc;
            }
        }
    }
    out
}

fn same_bits(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits() || (*g == 0.0 && *w == 0.0))
}

fn context(options: ContextOptions) -> MultiGpuContext {
    MultiGpuContext::new(options).expect("context opens")
}

fn adapter(index: usize) -> ContextOptions {
    ContextOptions {
        adapters: Some(vec![index]),
        ..Default::default()
    }
}

#[test]
fn products_match_the_float32_reference_on_every_adapter() {
    let shapes = [
        (1, 1, 1, 1),
        (1, 3, 1, 5),
        (1, 70, 33, 65),
        (3, 5, 17, 9),
        (2, 64, 16, 64),
    ];
    for info in amari_gpu::adapters().into_iter().filter(|i| !i.is_host()) {
        let ctx = context(adapter(info.index));
        for (i, &(batch, m, k, n)) in shapes.iter().enumerate() {
            let shape = BatchShape { batch, m, k, n };
            let a = values(batch * m * k, 10 + i as u64, 7);
            let b = values(batch * k * n, 20 + i as u64, 5);
            for s in Semiring::ALL {
                let want = reference(s, &a, &b, shape);
                for variant in [Variant::Tiled, Variant::Naive] {
                    let mut out = vec![f32::NAN; want.len()];
                    let product = Product {
                        semiring: s,
                        shape,
                        a: &a,
                        b: &b,
                    };
                    matmul_host(&ctx, variant, product, &mut out, None).expect("product runs");
                    assert!(
                        same_bits(&out, &want),
                        "{variant:?} {s:?} {shape:?} on {} ({})",
                        info.name,
                        info.backend
                    );
                }
            }
        }
    }
}

#[test]
fn inner_dimension_zero_gives_the_tropical_zero() {
    let ctx = context(adapter(0));
    let shape = BatchShape {
        batch: 2,
        m: 3,
        k: 0,
        n: 4,
    };
    for s in Semiring::ALL {
        let mut out = vec![0.0; 24];
        let product = Product {
            semiring: s,
            shape,
            a: &[],
            b: &[],
        };
        matmul_host(&ctx, Variant::Tiled, product, &mut out, None).expect("runs");
        assert!(out.iter().all(|v| *v == s.zero()));
    }
}

#[test]
fn matvec_matches_the_reference() {
    let ctx = context(adapter(0));
    for (batch, m, k) in [(1, 1, 1), (1, 130, 200), (3, 7, 65)] {
        let shape = BatchShape { batch, m, k, n: 1 };
        let a = values(batch * m * k, 3, 6);
        let x = values(batch * k, 4, 9);
        for s in Semiring::ALL {
            let want = reference(s, &a, &x, shape);
            let mut out = vec![f32::NAN; batch * m];
            let product = Product {
                semiring: s,
                shape,
                a: &a,
                b: &x,
            };
            matvec_host(&ctx, product, &mut out, None).expect("runs");
            assert!(same_bits(&out, &want), "{s:?} {shape:?}");
        }
    }
}

#[test]
fn results_do_not_depend_on_devices_chunks_or_strategy() {
    // 3 batches of 3 row blocks (the last one ragged), 2 blocks per chunk.
    let shape = BatchShape {
        batch: 3,
        m: 150,
        k: 40,
        n: 70,
    };
    let a = values(shape.batch * shape.m * shape.k, 5, 11);
    let b = values(shape.batch * shape.k * shape.n, 6, 13);
    let want = reference(Semiring::MinPlus, &a, &b, shape);
    let ctx = context(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter: 3,
        chunk_items: Some(2),
        ..Default::default()
    });
    for strategy in Strategy::ALL {
        let mut out = vec![f32::NAN; want.len()];
        let product = Product {
            semiring: Semiring::MinPlus,
            shape,
            a: &a,
            b: &b,
        };
        let plan =
            matmul_host(&ctx, Variant::Tiled, product, &mut out, Some(strategy)).expect("runs");
        assert!(plan.n_chunks > 3);
        assert!(same_bits(&out, &want), "{strategy:?}");
    }
}

#[test]
fn nan_and_shape_errors_name_the_argument() {
    let ctx = context(adapter(0));
    let shape = BatchShape {
        batch: 1,
        m: 2,
        k: 2,
        n: 2,
    };
    let mut out = vec![0.0; 4];
    let mut refused = |a: &[f32], b: &[f32]| {
        let product = Product {
            semiring: Semiring::MaxPlus,
            shape,
            a,
            b,
        };
        matmul_host(&ctx, Variant::Tiled, product, &mut out, None).unwrap_err()
    };
    let err = refused(&[0.0, 1.0, f32::NAN, 2.0], &[0.0; 4]);
    assert!(
        matches!(&err, Error::InvalidArgument { argument, .. } if argument == "a"),
        "{err}"
    );
    let err = refused(&[0.0; 4], &[0.0; 3]);
    assert!(
        matches!(&err, Error::Shape { argument, .. } if argument == "b"),
        "{err}"
    );
}

#[test]
fn shortest_paths_on_a_small_graph_and_a_negative_cycle() {
    let ctx = context(adapter(0));
    let inf = f32::INFINITY;
    // 0 → 1 (4), 0 → 2 (1), 2 → 1 (-2), 1 → 3 (5), 3 → 0 (3); vertex 4 unreachable.
    let mut w = vec![inf; 25];
    for (i, j, x) in [
        (0, 1, 4.0),
        (0, 2, 1.0),
        (2, 1, -2.0),
        (1, 3, 5.0),
        (3, 0, 3.0),
    ] {
        w[i * 5 + j] = x;
    }
    w[3 * 5 + 3] = 2.0; // a positive self-loop does not shorten anything
    let mut d = vec![0.0; 25];
    shortest_paths(&ctx, &w, 5, &mut d, None).expect("runs");
    assert_eq!(&d[0..5], &[0.0, -1.0, 1.0, 4.0, inf]);
    assert_eq!(&d[15..20], &[3.0, 2.0, 4.0, 0.0, inf]);
    assert_eq!(&d[20..25], &[inf, inf, inf, inf, 0.0]);
    w[3 * 5] = -4.0; // cycle 0 → 2 → 1 → 3 → 0 of weight 1 - 2 + 5 - 4 = 0: still fine
    shortest_paths(&ctx, &w, 5, &mut d, None).expect("a zero-weight cycle is fine");
    w[3 * 5] = -4.5;
    let err = shortest_paths(&ctx, &w, 5, &mut d, None).unwrap_err();
    assert!(err.to_string().contains("negative cycle"), "{err}");
}

#[test]
fn the_shader_validates_with_naga() {
    let module = validate("tropical.wgsl", amari_gpu::tropical::kernels::SOURCE);
    let entries: Vec<&str> = module
        .entry_points
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(
        entries,
        [
            "matmul_tiled",
            "matmul_rows",
            "matmul_naive",
            "matvec",
            "row_stats",
            "row_stats64"
        ]
    );
}
