//! Host tropical kernels against `shaders/tropical.wgsl` on every wgpu adapter present:
//! max-plus and min-plus products (batched, with tropical zeros, opposite infinities and
//! ties between signed zeros), matrix-vector products and shortest paths, on odd sizes cut
//! into several chunks; and against a float64 reference on the host alone.

mod common;

use amari_gpu::host::HostPool;
use amari_gpu::tropical::host::{TropicalMatvec, TropicalProduct};
use amari_gpu::tropical::host_paths::shortest_paths_host;
use amari_gpu::tropical::kernels::{item_batches, ProductShape, BLOCK_ROWS};
use amari_gpu::tropical::product::Variant;
use amari_gpu::tropical::{shortest_paths, Product};
use amari_gpu::tropical::{BatchShape, Semiring};
use common::{contexts, matmul_host, matvec_host, random, same_bits};

/// Small integers (so sums tie, often at ±0), with tropical zeros and, for products, some
/// entries of the opposite infinity.
fn values(n: usize, seed: u64, semiring: Semiring, opposite: bool) -> Vec<f32> {
    random(n, seed)
        .into_iter()
        .enumerate()
        .map(|(i, v)| match i % 13 {
            0 => semiring.zero(),
            5 if opposite => -semiring.zero(),
            7 => v,
            _ => (v * 3.0).round(),
        })
        .collect()
}

/// Rows of each batch padded to whole blocks of tropical zeros, as `tropical::blocks` does.
fn padded(x: &[f32], batch: usize, rows: usize, width: usize, zero: f32) -> Vec<f32> {
    let blocks = rows.div_ceil(BLOCK_ROWS) * BLOCK_ROWS;
    let mut out = vec![zero; batch * blocks * width];
    for p in 0..batch {
        out[p * blocks * width..][..rows * width]
            .copy_from_slice(&x[p * rows * width..][..rows * width]);
    }
    out
}

/// The host product through the chunk kernel, items cut at `cuts`.
fn host_matmul(pool: &HostPool, s: Semiring, shape: BatchShape, a: &[f32], b: &[f32]) -> Vec<f32> {
    let BatchShape { batch, m, k, n } = shape;
    let blocks = m.div_ceil(BLOCK_ROWS);
    let kernel = TropicalProduct::new(
        s,
        ProductShape {
            k,
            cols: n,
            b_words: b.len(),
            batches: batch,
            accumulate: false,
            dtype: amari_gpu::dtype::Dtype::F32,
        },
    );
    let a = padded(a, batch, m, k, s.zero());
    let ib = item_batches(batch, blocks);
    let items = batch * blocks;
    let mut out = vec![f32::NAN; items * BLOCK_ROWS * n];
    let inputs: [&[f32]; 4] = [&a, &ib, b, &[s.zero()]];
    let mut start = 0;
    for (c, chunk) in out.chunks_mut(3 * BLOCK_ROWS * n).enumerate() {
        let len = chunk.len() / (BLOCK_ROWS * n);
        pool.run(&kernel, &inputs, start..start + len, chunk);
        start += len;
        let _ = c;
    }
    let mut result = Vec::with_capacity(batch * m * n);
    for p in 0..batch {
        result.extend_from_slice(&out[p * blocks * BLOCK_ROWS * n..][..m * n]);
    }
    result
}

#[test]
fn products_match_the_devices_bit_for_bit() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(Some(2));
    for s in Semiring::ALL {
        for (batch, m, k, n) in [
            (1, 130, 37, 75),
            (3, 70, 64, 17),
            (1, 65, 1, 129),
            (2, 5, 19, 3),
        ] {
            let shape = BatchShape { batch, m, k, n };
            let a = values(batch * m * k, 1, s, true);
            let b = values(batch * k * n, 2, s, true);
            let host = host_matmul(&pool, s, shape, &a, &b);
            for (name, ctx) in &ctxs {
                let mut dev = vec![f32::NAN; batch * m * n];
                let product = Product {
                    semiring: s,
                    shape,
                    a: &a,
                    b: &b,
                };
                matmul_host(ctx, Variant::Tiled, product, &mut dev, None).expect("device runs");
                same_bits(&format!("{} {shape:?} on {name}", s.name()), &dev, &host);
            }
            // float64 reference: RN is monotonic, so the float32 max of rounded sums is the
            // rounded max of exact sums.
            for p in 0..batch {
                for i in 0..m {
                    for j in 0..n {
                        let terms = (0..k)
                            .map(|t| s.mul(a[(p * m + i) * k + t], b[(p * k + t) * n + j]) as f64);
                        let want = match s {
                            Semiring::MaxPlus => terms.fold(f64::NEG_INFINITY, f64::max),
                            Semiring::MinPlus => terms.fold(f64::INFINITY, f64::min),
                        };
                        assert_eq!(
                            host[(p * m + i) * n + j] as f64,
                            want,
                            "{shape:?} ({i}, {j})"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn matrix_vector_products_match_the_devices_bit_for_bit() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(Some(7));
    for s in Semiring::ALL {
        for (batch, m, k) in [(1, 101, 200), (3, 33, 64), (2, 9, 1)] {
            let shape = BatchShape { batch, m, k, n: 1 };
            let a = values(batch * m * k, 3, s, true);
            let x = values(batch * k, 4, s, true);
            let kernel = TropicalMatvec {
                semiring: s,
                shape: ProductShape {
                    k,
                    cols: 1,
                    b_words: x.len(),
                    batches: batch,
                    accumulate: false,
                    dtype: amari_gpu::dtype::Dtype::F32,
                },
            };
            let rb = item_batches(batch, m);
            let mut host = vec![f32::NAN; batch * m];
            let cut = batch * m / 3;
            let (lo, hi) = host.split_at_mut(cut);
            let inputs: [&[f32]; 4] = [&a, &rb, &x, &[s.zero()]];
            pool.run(&kernel, &inputs, 0..cut, lo);
            pool.run(&kernel, &inputs, cut..batch * m, hi);
            for (name, ctx) in &ctxs {
                let mut dev = vec![f32::NAN; batch * m];
                let product = Product {
                    semiring: s,
                    shape,
                    a: &a,
                    b: &x,
                };
                matvec_host(ctx, product, &mut dev, None).expect("device runs");
                same_bits(
                    &format!("{} matvec {shape:?} on {name}", s.name()),
                    &dev,
                    &host,
                );
            }
        }
    }
}

#[test]
fn shortest_paths_match_the_devices_bit_for_bit() {
    let pool = HostPool::new(2).unwrap();
    let ctxs = contexts(Some(1));
    // Scale 1e36: weights large enough that both versions scale them (path_shift > 0).
    for (n, scale) in [(1, 1.0), (37, 1.0), (100, 1.0), (37, 1e36)] {
        let w: Vec<f32> = random(n * n, 9)
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                if i % 3 == 0 {
                    f32::INFINITY
                } else {
                    (v + 1.0) * 10.0 - 2.0
                }
            })
            .map(|v| if v < 0.0 { v.abs() } else { v } * scale)
            .collect();
        let mut host = vec![0.0; n * n];
        pool.run_with(|| shortest_paths_host(&w, n, &mut host))
            .expect("host runs");
        for (name, ctx) in &ctxs {
            let mut dev = vec![0.0; n * n];
            shortest_paths(ctx, &w, n, &mut dev, None).expect("device runs");
            same_bits(&format!("shortest paths n = {n} on {name}"), &dev, &host);
        }
    }
}
