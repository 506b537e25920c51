//! Host information-geometry kernels against `shaders/fisher.wgsl` on every wgpu adapter
//! present: the SYRK's per-chunk partials word for word (narrow 8 × 8 blocks and 64 × 64
//! tiles, padded widths, with and without weights, chunks of odd length), the categorical
//! and Gaussian maps; the host's float64 softmax measured against the drivers' `exp`, and the
//! logits path the same bits on every device mix; and float64 references
//! on the host alone.

mod common;

use amari_gpu::context::Target;
use amari_gpu::fisher::host_maps::FisherMap;
use amari_gpu::fisher::host_syrk::FisherSyrk;
use amari_gpu::fisher::{
    categorical_outer_kernel, fisher_categorical_logits, fisher_gaussian_diag, softmax_kernel,
    tiled_kernel, SyrkShape,
};
use amari_gpu::host::HostPool;
use amari_gpu::kernel::{FmaMode, HostImpl};
use amari_gpu::Dtype;
use common::{contexts, fma_mode, random, same_bits};

const CHUNK: usize = 300;

/// Every chunk's partial, in chunk order, computed on the host.
fn host_partials(
    pool: &HostPool,
    kernel: &dyn HostImpl,
    inputs: &[&[f32]],
    n: usize,
    words: usize,
) -> Vec<f32> {
    let mut out = vec![f32::NAN; n.div_ceil(CHUNK) * words];
    for (c, partial) in out.chunks_mut(words).enumerate() {
        pool.run(kernel, inputs, c * CHUNK..((c + 1) * CHUNK).min(n), partial);
    }
    out
}

#[test]
fn syrk_partials_match_the_devices_bit_for_bit() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(Some(CHUNK));
    let n = 1001;
    for p in [3, 13, 64, 65, 130] {
        let shape = SyrkShape::new(p);
        let scores = random(n * p, p as u64);
        let rows = shape
            .padded(&scores, false)
            .expect("padded scores fit in memory");
        for weighted in [false, true] {
            let w: Vec<f32> = if weighted {
                random(n, 99).iter().map(|v| (v + 1.0) * 2.0).collect()
            } else {
                vec![1.0; n]
            };
            for (name, ctx) in &ctxs {
                let kernel = FisherSyrk {
                    shape,
                    fma: fma_mode(ctx),
                };
                let host = host_partials(&pool, &kernel, &[&rows, &w], n, shape.partial_words());
                let ran = ctx
                    .run(&tiled_kernel(p), &[&rows, &w], Target::Chunks, n, None)
                    .expect("device runs");
                same_bits(
                    &format!("P = {p}, weighted {weighted} on {name}"),
                    &ran.partials,
                    &host,
                );
            }
            // float64 reference of the summed upper triangle.
            let kernel = FisherSyrk {
                shape,
                fma: FmaMode::Fused,
            };
            let host = host_partials(&pool, &kernel, &[&rows, &w], n, shape.partial_words());
            let e = shape.tile;
            let mut sum = vec![0.0f64; shape.pairs * e * e];
            for block in host.chunks(shape.pairs * e * e) {
                sum.iter_mut()
                    .zip(block)
                    .for_each(|(s, &v)| *s += f64::from(v));
            }
            let mut pair = 0;
            for ti in 0..shape.tiles {
                for tj in ti..shape.tiles {
                    for r in 0..e {
                        for c in 0..e {
                            let (i, j) = (ti * e + r, tj * e + c);
                            if i >= p || j >= p {
                                continue;
                            }
                            let got = sum[pair * e * e + r * e + c];
                            if e == 64 && i > j {
                                // Below a diagonal tile's diagonal: mirrored, written as 0.
                                assert_eq!(got.to_bits(), 0, "P = {p} ({i}, {j})");
                                continue;
                            }
                            let (want, bound) = (0..n).fold((0.0, 0.0), |(s, b), row| {
                                let t = f64::from(w[row])
                                    * f64::from(scores[row * p + i])
                                    * f64::from(scores[row * p + j]);
                                (s + t, b + t.abs())
                            });
                            assert!((got - want).abs() <= 1e-5 * bound, "P = {p} ({i}, {j})");
                        }
                    }
                    pair += 1;
                }
            }
        }
    }
}

fn probabilities(n: usize, k: usize, seed: u64) -> Vec<f32> {
    let x = random(n * k, seed);
    let mut out = Vec::with_capacity(n * k);
    for row in x.chunks(k) {
        let e: Vec<f64> = row.iter().map(|&v| (3.0 * f64::from(v)).exp()).collect();
        let t: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| (v / t) as f32));
    }
    out
}

#[test]
fn categorical_and_gaussian_maps_match_the_devices_bit_for_bit() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(Some(64));
    let n = 203;
    for k in [1, 3, 10] {
        let probs = probabilities(n, k, k as u64);
        for (name, ctx) in &ctxs {
            let kernel = FisherMap::CategoricalOuter {
                k,
                fma: fma_mode(ctx),
                dtype: Dtype::F32,
            };
            let mut host = vec![f32::NAN; n * k * k];
            pool.run(&kernel, &[&probs], 0..n, &mut host);
            let mut dev = vec![f32::NAN; n * k * k];
            ctx.run_map(&categorical_outer_kernel(k), &[&probs], &mut dev, n, None)
                .expect("device runs");
            same_bits(&format!("categorical K = {k} on {name}"), &dev, &host);
        }
    }
    for d in [1, 5] {
        let mean = random(n * d, 1);
        let var: Vec<f32> = random(n * d, 2)
            .iter()
            .enumerate()
            .map(|(i, v)| (v + 1.5) * 2f32.powi((i % 40) as i32 - 20))
            .collect();
        let kernel = FisherMap::GaussianDiag {
            d,
            dtype: Dtype::F32,
        };
        let mut host = vec![f32::NAN; n * 4 * d * d];
        pool.run(&kernel, &[&var], 0..n, &mut host);
        for (name, ctx) in &ctxs {
            let mut dev = vec![f32::NAN; n * 4 * d * d];
            fisher_gaussian_diag(ctx, &mean, &var, d, &mut dev, None).expect("device runs");
            same_bits(&format!("gaussian D = {d} on {name}"), &dev, &host);
        }
        for (i, &v) in var.iter().enumerate() {
            let (row, r) = (i / d, i % d);
            let m = &host[row * 4 * d * d..];
            assert_eq!(m[r * 2 * d + r], 1.0 / v);
            let want = 0.5 / (f64::from(v) * f64::from(v));
            let got = f64::from(m[(d + r) * 2 * d + d + r]);
            assert!(
                (got - want).abs() <= 2.5e-7 * want,
                "var {v}: {got} for {want}"
            );
        }
    }
}

#[test]
fn softmax_is_float64_rounded_once_and_the_logits_path_is_the_same_on_every_device() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(Some(64));
    let (n, k) = (500, 7);
    let logits: Vec<f32> = random(n * k, 5).iter().map(|v| v * 8.0).collect();
    let mut host = vec![f32::NAN; n * k];
    pool.run(
        &FisherMap::Softmax {
            k,
            dtype: Dtype::F32,
        },
        &[&logits],
        0..n,
        &mut host,
    );
    for (row, p) in host.chunks(k).enumerate() {
        let x = &logits[row * k..][..k];
        let top = x
            .iter()
            .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
        let e: Vec<f64> = x.iter().map(|&v| (f64::from(v) - top).exp()).collect();
        let t: f64 = e.iter().sum();
        for (c, &v) in p.iter().enumerate() {
            assert!(
                (f64::from(v) - e[c] / t).abs() <= 4e-7 * (e[c] / t),
                "row {row}"
            );
        }
    }
    for (name, ctx) in &ctxs {
        let mut dev = vec![f32::NAN; n * k];
        ctx.run_map(&softmax_kernel(k), &[&logits], &mut dev, n, None)
            .expect("device runs");
        let same = dev
            .iter()
            .zip(&host)
            .filter(|(a, b)| a.to_bits() == b.to_bits())
            .count();
        let ulps = dev
            .iter()
            .zip(&host)
            .map(|(a, b)| (a.to_bits() as i64 - b.to_bits() as i64).abs())
            .max()
            .unwrap_or(0);
        println!(
            "softmax on {name}: {same} of {} words bit-identical, at most {ulps} ULP apart",
            dev.len()
        );
        // WGSL bounds exp's error by 3 + 2|x| ULP (|x| <= 16 here): the drivers' own
        // approximation decides the last bits, so this is a bound, not bit identity.
        assert!(
            ulps <= 64,
            "softmax on {name}: {ulps} ULP from the correctly rounded exp"
        );
    }
    // The logits path end to end: the softmax is taken once on the host (float64), so every
    // device and every mix (of one fma rounding: Mesa's drivers round `fma` twice, which the
    // host reproduces beside them) gives the same bits.
    let (first, ctx0) = &ctxs[0];
    let mut want = vec![f32::NAN; n * k * k];
    fisher_categorical_logits(ctx0, &logits, k, &mut want, None).expect("device runs");
    assert!(want.iter().all(|v| v.is_finite()), "{first}");
    let mixed = amari_gpu::MultiGpuContext::new(amari_gpu::ContextOptions {
        backends: Some(vec!["vulkan".into(), "gl".into(), "host".into()]),
        chunk_items: Some(64),
        ..Default::default()
    })
    .expect("mixed opens");
    for (name, ctx) in ctxs.iter().chain([("mixed".to_string(), mixed)].iter()) {
        let mut out = vec![f32::NAN; n * k * k];
        fisher_categorical_logits(ctx, &logits, k, &mut out, None).expect("device runs");
        same_bits(&format!("categorical from logits on {name}"), &out, &want);
    }
}
