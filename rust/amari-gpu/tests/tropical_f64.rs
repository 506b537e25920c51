//! Tropical products and shortest paths in float64: exactly the float64 evaluation of the
//! shader's rule (max-plus terms k in order, the tropical zero absorbing, ties keeping the
//! earlier value), the same bits on the host device, lavapipe, both together and two
//! logical lavapipe devices, for every strategy; inner dimensions walked past lavapipe's
//! 65,535 loop trips per invocation; a context without float64 (llvmpipe GL) refusing.

mod common;

use amari_gpu::tropical::{self, HostOperands, Semiring};
use amari_gpu::{ContextOptions, MultiGpuContext, Strategy};

fn context(backends: &[&str], devices_per_adapter: usize) -> MultiGpuContext {
    common::logging();
    MultiGpuContext::new(ContextOptions {
        backends: Some(backends.iter().map(|b| b.to_string()).collect()),
        devices_per_adapter,
        chunk_items: Some(1),
        ..Default::default()
    })
    .expect("the software adapters open")
}

/// Every context kind of the bit-identity claim, by name.
fn contexts() -> Vec<(&'static str, MultiGpuContext)> {
    vec![
        ("host", context(&["host"], 1)),
        ("lavapipe", context(&["vulkan"], 1)),
        ("lavapipe+host", context(&["vulkan", "host"], 1)),
        ("2 lavapipe+host", context(&["vulkan", "host"], 2)),
    ]
}

/// Values with every edge: ±inf, ±0, values float32 cannot hold, and huge ones whose sums
/// are still finite in float64.
fn values(n: usize, seed: usize, with_inf: bool) -> Vec<f64> {
    let pool = [
        0.1,
        -0.0,
        0.0,
        1.0 + f64::EPSILON,
        -3.25,
        1e300,
        -1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let len = if with_inf { pool.len() } else { pool.len() - 2 };
    (0..n)
        .map(|i| pool[(i.wrapping_mul(2_654_435_761) ^ seed).wrapping_mul(40_503) % len])
        .collect()
}

/// The shader's rule in float64: `sign · max_k (sign·a + sign·b)`, −inf to start, a term
/// taken only when greater (so a NaN term, −inf + inf, never is).
fn reference(
    s: Semiring,
    a: &[f64],
    b: &[f64],
    (batch, m, k, n): (usize, usize, usize, usize),
) -> Vec<f64> {
    let sg = |x: f64| if s == Semiring::MinPlus { -x } else { x };
    let mut out = vec![0.0; batch * m * n];
    for p in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = f64::NEG_INFINITY;
                for l in 0..k {
                    let t = sg(a[(p * m + i) * k + l]) + sg(b[(p * k + l) * n + j]);
                    if t > acc {
                        acc = t;
                    }
                }
                out[(p * m + i) * n + j] = sg(acc);
            }
        }
    }
    out
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn products_are_the_float64_rule_on_every_context_and_strategy() {
    for (name, ctx) in contexts() {
        for s in Semiring::ALL {
            for (batch, m, k, n) in [(1, 130, 37, 70), (3, 5, 17, 9), (1, 64, 0, 3)] {
                let a = values(batch * m * k, 1, true);
                let b = values(batch * k * n, 2, true);
                let want = reference(s, &a, &b, (batch, m, k, n));
                for strategy in Strategy::ALL {
                    let operands = HostOperands {
                        semiring: s,
                        a: &a,
                        a_shape: &[batch, m, k],
                        b: &b,
                        b_shape: &[batch, k, n],
                    };
                    let mut out = vec![f64::NAN; want.len()];
                    tropical::tropical_matmul_f64(&ctx, operands, &mut out, Some(strategy))
                        .unwrap_or_else(|e| panic!("{name} {s:?} {strategy:?}: {e}"));
                    assert_eq!(
                        bits(&out),
                        bits(&want),
                        "{name} {s:?} {strategy:?} {m}x{k}x{n}"
                    );
                }
                // The matrix-vector product: x is b's first column of each batch.
                let x: Vec<f64> = (0..batch * k).map(|t| b[t * n]).collect();
                let want: Vec<f64> = reference(s, &a, &x, (batch, m, k, 1));
                let operands = HostOperands {
                    semiring: s,
                    a: &a,
                    a_shape: &[batch, m, k],
                    b: &x,
                    b_shape: &[batch, k],
                };
                let mut out = vec![f64::NAN; batch * m];
                tropical::tropical_matvec_f64(&ctx, operands, &mut out, None)
                    .unwrap_or_else(|e| panic!("{name} matvec {s:?}: {e}"));
                assert_eq!(bits(&out), bits(&want), "{name} matvec {s:?} {m}x{k}");
            }
        }
    }
}

#[test]
fn long_inner_dimensions_pass_lavapipes_loop_limit_in_float64() {
    // k = 70,000: the tiled kernel walks it in 5 passes, none over 65,535 loop trips; a
    // single walk would stop silently and miss the largest term, placed last.
    let ctx = context(&["vulkan"], 1);
    let (m, k, n) = (64, 70_000, 2);
    let mut a: Vec<f64> = (0..m * k).map(|t| -((t % 1000) as f64) * 0.5).collect();
    for i in 0..m {
        a[i * k + k - 1] = 1e10 + i as f64;
    }
    let b: Vec<f64> = (0..k * n).map(|t| (t % 7) as f64 * 0.25).collect();
    let want = reference(Semiring::MaxPlus, &a, &b, (1, m, k, n));
    let mut out = vec![0.0; m * n];
    let operands = HostOperands {
        semiring: Semiring::MaxPlus,
        a: &a,
        a_shape: &[m, k],
        b: &b,
        b_shape: &[k, n],
    };
    tropical::tropical_matmul_f64(&ctx, operands, &mut out, None).unwrap();
    assert_eq!(bits(&out), bits(&want));
    assert!(out[0] >= 1e10, "the last term was reached");
}

/// Floyd–Warshall in float64, the textbook loop (scipy's "FW").
fn floyd_warshall(w: &[f64], n: usize) -> Vec<f64> {
    let mut d = w.to_vec();
    for i in 0..n {
        d[i * n + i] = d[i * n + i].min(0.0);
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                let via = d[i * n + k] + d[k * n + j];
                if via < d[i * n + j] {
                    d[i * n + j] = via;
                }
            }
        }
    }
    d
}

#[test]
fn shortest_paths_are_floyd_warshalls_in_float64_on_every_context() {
    // Weights multiples of 2^-20 below 2^20: every path sum is exact in float64, so the
    // lengths are exact whatever order a path is summed in; float32 would round them.
    let n = 150;
    let w: Vec<f64> = (0..n * n)
        .map(|t: usize| {
            let h = t.wrapping_mul(2_654_435_761) % 1000;
            if h < 700 {
                f64::INFINITY
            } else {
                (h as f64) + (t % 17) as f64 * 2f64.powi(-20)
            }
        })
        .collect();
    let want = floyd_warshall(&w, n);
    assert!(
        want.iter().any(|v| (*v as f32) as f64 != *v),
        "needs float64"
    );
    for (name, ctx) in contexts() {
        for strategy in [Strategy::Balanced, Strategy::Auto] {
            let mut out = vec![f64::NAN; n * n];
            tropical::shortest_paths(&ctx, &w, n, &mut out, Some(strategy)).unwrap();
            assert_eq!(bits(&out), bits(&want), "{name} {strategy:?}");
        }
    }
    let mut host = vec![f64::NAN; n * n];
    tropical::host_paths::shortest_paths_host(&w, n, &mut host).unwrap();
    assert_eq!(bits(&host), bits(&want), "the host device's own paths");
}

#[test]
fn float64_paths_report_overflow_and_negative_cycles_in_float64_terms() {
    let ctx = context(&["host"], 1);
    let inf = f64::INFINITY;
    // 1e308 + 1e308 is beyond float64: scaled for the computation, the error names it.
    let w = [0.0, 1e308, inf, inf, 0.0, 1e308, inf, inf, 0.0];
    let mut out = [0.0; 9];
    let err = tropical::shortest_paths(&ctx, &w, 3, &mut out, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("path lengths overflow float64"), "{err}");
    assert!(err.contains("from vertex 0 to vertex 2"), "{err}");
    // Large but representable lengths come back exact.
    let w = [0.0, 8e307, inf, inf, 0.0, 8e307, inf, inf, 0.0];
    tropical::shortest_paths(&ctx, &w, 3, &mut out, None).unwrap();
    assert_eq!(out[2], 1.6e308);
    let w = [0.0, 1.0, -1.5, 0.0];
    let err = tropical::shortest_paths(&ctx, &w, 2, &mut out[..4], None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("negative cycle"), "{err}");
}

#[test]
fn a_float64_term_beyond_float64_is_an_error_not_an_inf() {
    let ctx = context(&["host"], 1);
    let (a, b) = ([1e308, 0.0], [1e308, 0.0]);
    let operands = HostOperands {
        semiring: Semiring::MaxPlus,
        a: &a,
        a_shape: &[1, 2],
        b: &b,
        b_shape: &[2, 1],
    };
    let mut out = [0.0];
    let err = tropical::tropical_matmul_f64(&ctx, operands, &mut out, None).unwrap_err();
    assert!(
        err.to_string()
            .contains("tropical products overflow float64: out[0, 0, 0] = 2 × 1e308"),
        "{err}"
    );
}

#[test]
fn a_gl_only_context_refuses_float64_tropical_work() {
    let ctx = context(&["gl"], 1);
    let w = [0.0f64, 1.0, 2.0, 0.0];
    let mut out = [7.0f64; 4];
    let err = tropical::shortest_paths(&ctx, &w, 2, &mut out, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("dtype: no device of this context computes in float64"),
        "{err}"
    );
    let operands = HostOperands {
        semiring: Semiring::MaxPlus,
        a: &w,
        a_shape: &[2, 2],
        b: &w,
        b_shape: &[2, 2],
    };
    let err = tropical::tropical_matmul_f64(&ctx, operands, &mut out, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("dtype: no device of this context computes in float64"),
        "{err}"
    );
    assert_eq!(out, [7.0; 4], "nothing written");
}

#[test]
fn the_float64_source_is_the_float32_one_with_its_element_type_changed() {
    use amari_gpu::dtype::Dtype;
    use amari_gpu::tropical::kernels::{source, SOURCE};
    let f64_source = source(Dtype::F64);
    assert_eq!(source(Dtype::F32), SOURCE, "float32 keeps its source");
    let changed: Vec<(&str, &str)> = SOURCE
        .lines()
        .zip(f64_source.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed, [("alias Real = f32;", "alias Real = f64;")]);
    common::validate_with(
        "tropical.wgsl (f64)",
        &f64_source,
        naga::valid::Capabilities::FLOAT64,
    );
}
