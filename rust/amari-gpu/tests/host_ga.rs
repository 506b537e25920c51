//! Host geometric-algebra kernels against the generated WGSL kernels on every wgpu adapter
//! present: the same bits for every signature class (Euclidean, mixed, degenerate), every
//! operation and every broadcast mode, on odd sizes cut into several chunks; and against a
//! float64 reference on the host alone.

mod common;

use amari_gpu::ga::host::GaKernel;
use amari_gpu::ga::host_apply::apply_host;
use amari_gpu::ga::{apply, Algebra, Operation};
use amari_gpu::kernel::{FmaMode, HostImpl};
use common::{basis, contexts, fma_mode, one_at_a_time, operations, random, same_bits};

const ITEMS: usize = 1037;

/// Rows of varied magnitude: uniform, scaled by powers of two (for `normalize`'s exact
/// scaling), a zero row and rows of small integers.
fn operand(w: usize, n: usize, seed: u64) -> Vec<f32> {
    let mut x = random(w * n, seed);
    for (r, row) in x.chunks_exact_mut(w).enumerate() {
        match r % 7 {
            1 => row
                .iter_mut()
                .for_each(|v| *v *= 2f32.powi((r % 61) as i32 - 30)),
            2 => row.iter_mut().for_each(|v| *v = (*v * 4.0).round()),
            3 if r % 21 == 3 => row.iter_mut().for_each(|v| *v = 0.0),
            _ => {}
        }
    }
    x
}

/// `op` of `operands` on the host (rounding like `ctx`'s adapter) and on `ctx`'s devices,
/// `len` words each: (host, device), both started as NaN so that an unwritten word shows.
fn host_and_device(
    ctx: &amari_gpu::MultiGpuContext,
    algebra: &Algebra,
    op: Operation,
    operands: &[&[f32]],
    len: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut host = vec![f32::NAN; len];
    apply_host(algebra, op, operands, &mut host, fma_mode(ctx)).expect("host runs");
    let mut dev = vec![f32::NAN; len];
    apply(ctx, algebra, op, operands, &mut dev, None).expect("device runs");
    (host, dev)
}

fn check_algebra(
    ctxs: &[(String, amari_gpu::MultiGpuContext)],
    algebra: Algebra,
    ops: &[Operation],
) {
    let w = algebra.blades();
    let a = operand(w, ITEMS, 11);
    let b = operand(w, ITEMS, 12);
    for &op in ops {
        let binary = op.operands().len() == 2;
        let shapes: Vec<(&str, Vec<&[f32]>)> = if binary {
            vec![
                ("batch x batch", vec![&a[..], &b[..]]),
                ("single x batch", vec![&a[..w], &b[..]]),
                ("batch x single", vec![&a[..], &b[..w]]),
            ]
        } else {
            vec![("batch", vec![&a[..]])]
        };
        for (shape, operands) in shapes {
            let ow = op.output_words(&algebra);
            for (name, ctx) in ctxs {
                let (host, dev) = host_and_device(ctx, &algebra, op, &operands, ITEMS * ow);
                same_bits(
                    &format!("{} {} {shape} on {name}", algebra.label(), op.name()),
                    &dev,
                    &host,
                );
            }
        }
    }
}

#[test]
fn every_operation_and_broadcast_matches_the_devices_bit_for_bit() {
    let _serial = one_at_a_time();
    let ctxs = contexts(Some(256));
    for (p, q, r) in [
        (1, 0, 0),
        (0, 1, 0),
        (0, 0, 1),
        (2, 0, 0),
        (1, 1, 0),
        (3, 0, 0),
        (0, 3, 0),
        (2, 0, 1),
        (3, 0, 1),
        (1, 3, 0),
    ] {
        let algebra = Algebra::new(p, q, r).unwrap();
        check_algebra(&ctxs, algebra, &operations(&algebra));
    }
}

#[test]
fn five_and_six_dimensional_algebras_match_the_devices_bit_for_bit() {
    let _serial = one_at_a_time();
    let ctxs = contexts(Some(512));
    // Fully unrolled 32- and 64-blade kernels take the drivers seconds to compile: the
    // product in every broadcast mode, and normalize, per signature class.
    use Operation::{Geometric, Normalize, Sandwich};
    for (p, q, r, ops) in [
        (5, 0, 0, &[Geometric, Sandwich, Normalize][..]),
        (4, 0, 1, &[Geometric, Normalize]),
        (3, 2, 1, &[Geometric]),
        (6, 0, 0, &[Geometric]),
    ] {
        check_algebra(&ctxs, Algebra::new(p, q, r).unwrap(), ops);
    }
}

#[test]
fn chunks_of_any_size_give_the_same_bits_as_the_whole() {
    let _serial = one_at_a_time();
    let algebra = Algebra::new(3, 0, 1).unwrap();
    let kernel = GaKernel::new(
        algebra,
        Operation::Geometric,
        amari_gpu::ga::Broadcast::None,
        FmaMode::Fused,
    );
    let (a, b) = (operand(16, ITEMS, 3), operand(16, ITEMS, 4));
    let mut whole = vec![0.0; ITEMS * 16];
    kernel.run(&[&a, &b], 0..ITEMS, &mut whole);
    for cut in [1, 7, 64, 333, 1036] {
        let mut pieces = vec![0.0; ITEMS * 16];
        let (lo, hi) = pieces.split_at_mut(cut * 16);
        kernel.run(&[&a, &b], 0..cut, lo);
        kernel.run(&[&a, &b], cut..ITEMS, hi);
        same_bits(&format!("cut at {cut}"), &pieces, &whole);
    }
}

#[test]
fn host_products_match_a_float64_reference() {
    let _serial = one_at_a_time();
    for (p, q, r) in [(3, 0, 0), (1, 3, 0), (3, 0, 1), (2, 2, 2)] {
        let algebra = Algebra::new(p, q, r).unwrap();
        let squares: Vec<f64> = (0..algebra.dimension())
            .map(|v| f64::from(algebra.square(v)))
            .collect();
        let w = algebra.blades();
        let n = 200;
        let (a, b) = (random(w * n, 5), random(w * n, 6));
        let mut out = vec![0.0; w * n];
        apply_host(
            &algebra,
            Operation::Geometric,
            &[&a, &b],
            &mut out,
            FmaMode::Fused,
        )
        .unwrap();
        let mut norm = vec![0.0; w * n];
        apply_host(
            &algebra,
            Operation::Normalize,
            &[&a],
            &mut norm,
            FmaMode::Fused,
        )
        .unwrap();
        for row in 0..n {
            let (x, y) = (&a[row * w..][..w], &b[row * w..][..w]);
            let (mut want, mut bound) = (vec![0.0f64; w], vec![0.0f64; w]);
            for i in 0..w {
                for j in 0..w {
                    let t = basis(i, j, &squares) * f64::from(x[i]) * f64::from(y[j]);
                    want[i ^ j] += t;
                    bound[i ^ j] += t.abs();
                }
            }
            for k in 0..w {
                let err = (f64::from(out[row * w + k]) - want[k]).abs();
                assert!(
                    err <= 1e-6 * bound[k],
                    "{} row {row} blade {k}",
                    algebra.label()
                );
            }
            // ⟨x x̃⟩₀ of the normalized row is ±1 (or the row was null and kept).
            let terms: Vec<f64> = (0..w)
                .map(|k| {
                    let rev = if (k.count_ones() % 4) < 2 { 1.0 } else { -1.0 };
                    basis(k, k, &squares) * rev * f64::from(norm[row * w + k]).powi(2)
                })
                .collect();
            let n2: f64 = terms.iter().sum();
            let bound: f64 = terms.iter().map(|t| t.abs()).sum();
            assert!(
                (n2.abs() - 1.0).abs() < 1e-5 * bound,
                "{} row {row}: {n2}",
                algebra.label()
            );
        }
    }
}

/// A context of the given backends, cutting problems into chunks of `chunk_items` items.
fn open_backends(backends: &[&str], chunk_items: usize) -> amari_gpu::MultiGpuContext {
    amari_gpu::MultiGpuContext::new(amari_gpu::ContextOptions {
        backends: Some(backends.iter().map(|b| b.to_string()).collect()),
        chunk_items: Some(chunk_items),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{backends:?} opens: {e}"))
}

#[test]
fn the_static_cl3_product_on_the_host_matches_the_shader_bit_for_bit() {
    let _serial = one_at_a_time();
    use amari_gpu::ga::geometric_product_cl3;
    use amari_gpu::Strategy;
    let n = 4099;
    let (a, b) = (operand(8, n, 21), operand(8, n, 22));
    let host = open_backends(&["host"], 1000);
    let mut want = vec![f32::NAN; 8 * n];
    geometric_product_cl3(&host, &a, &b, &mut want, None).expect("host runs");
    for (name, ctx) in contexts(Some(1000)) {
        let mut dev = vec![f32::NAN; 8 * n];
        geometric_product_cl3(&ctx, &a, &b, &mut dev, None).expect("device runs");
        same_bits(&format!("static Cl(3,0) on {name}"), &dev, &want);
    }
    let mixed = open_backends(&["vulkan", "gl", "host"], 700);
    for strategy in [Strategy::Balanced, Strategy::Adaptive, Strategy::Capability] {
        let mut out = vec![f32::NAN; 8 * n];
        geometric_product_cl3(&mixed, &a, &b, &mut out, Some(strategy)).expect("mixed runs");
        same_bits(&format!("static Cl(3,0) mixed {strategy:?}"), &out, &want);
    }
    // Against float64: each blade within a few roundings of its terms' magnitude.
    for item in 0..n {
        let x: [f64; 8] = std::array::from_fn(|k| f64::from(a[item * 8 + k]));
        let y: [f64; 8] = std::array::from_fn(|k| f64::from(b[item * 8 + k]));
        let r = amari_gpu::ga::geometric_product_cl3_reference(&x, &y);
        let bound: f64 =
            x.iter().map(|v| v.abs()).sum::<f64>() * y.iter().map(|v| v.abs()).sum::<f64>();
        for k in 0..8 {
            let err = (f64::from(want[item * 8 + k]) - r[k]).abs();
            assert!(err <= 1e-6 * bound, "item {item} blade {k}: {err}");
        }
    }
}

/// `normalize` on rows of extreme range against every device, bit for bit: a null part far
/// larger than the entering one (the shape hypothesis found: x_k 2^e overflowed although
/// x_k / |x| is finite), and components over float32's whole range, subnormals included,
/// in every signature class.
#[test]
fn normalize_of_extreme_rows_matches_the_devices_bit_for_bit() {
    let _serial = one_at_a_time();
    let ctxs = contexts(Some(256));
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for (p, q, r) in [
        (3, 0, 1),
        (2, 0, 1),
        (0, 0, 1),
        (3, 0, 0),
        (1, 3, 0),
        (4, 1, 0),
    ] {
        let algebra = Algebra::new(p, q, r).unwrap();
        let w = algebra.blades();
        let null = |k: usize| r == 1 && k >= w / 2;
        let mut x = random(w * ITEMS, 31);
        let mut overflows = 0;
        for (row, xs) in x.chunks_exact_mut(w).enumerate() {
            if row % 2 == 0 && r == 1 {
                // Tiny entering parts (2^-128..2^-100), null ones up to f32::MAX.
                let tiny = 2f32.powi(-100 - (next() % 29) as i32);
                let e = -(tiny.log2().floor() as i32 + 1);
                for (k, v) in xs.iter_mut().enumerate() {
                    *v *= if null(k) {
                        2f32.powi((next() % 128) as i32)
                    } else {
                        tiny
                    };
                    if null(k) && f64::from(*v).abs() * 2f64.powi(e) > f64::from(f32::MAX) {
                        overflows += 1;
                    }
                }
            } else {
                // Every exponent from the subnormals to 2^127.
                for v in xs.iter_mut() {
                    *v = *v
                        * 2f32.powi(127 - (next() % 254) as i32)
                        * 2f32.powi(-((next() % 24) as i32));
                }
            }
        }
        assert!(
            r == 0 || overflows > 0,
            "no row of {} would overflow",
            algebra.label()
        );
        for (name, ctx) in &ctxs {
            let (host, dev) = host_and_device(ctx, &algebra, Operation::Normalize, &[&x], x.len());
            same_bits(
                &format!("{} extreme normalize on {name}", algebra.label()),
                &dev,
                &host,
            );
        }
    }
}

/// `normalize` of rows holding NaN or ±inf against every device, bit for bit, in every
/// signature class and in algebras read as scalars (2 blades) and as vec4: NaN of either
/// sign and payload at each blade among zeros (once kept: a float max drops it) and among
/// finite values, in null blades too; ±inf alone, together, and beside NaN. Any NaN makes
/// the row the quiet NaN 0x7fc00000; else infinite entries are that NaN and finite ones 0
/// with their sign.
#[test]
fn normalize_of_nan_and_inf_rows_matches_the_devices_bit_for_bit() {
    let _serial = one_at_a_time();
    const NAN: u32 = 0x7fc0_0000;
    let ctxs = contexts(Some(64));
    let specials = [
        f32::NAN,
        f32::from_bits(0xffc0_1234),
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    for (p, q, r) in [
        (1, 0, 0),
        (0, 1, 0),
        (0, 0, 1),
        (3, 0, 1),
        (1, 3, 0),
        (4, 1, 0),
    ] {
        let algebra = Algebra::new(p, q, r).unwrap();
        let w = algebra.blades();
        let finite = random(w, 5);
        let mut x = Vec::new();
        for k in 0..w {
            for s in specials {
                for base in [vec![0.0; w], finite.clone()] {
                    let mut row = base;
                    row[k] = s;
                    x.extend(row);
                }
            }
            let mut row = finite.clone();
            row[k] = f32::INFINITY;
            row[(k + 1) % w] = f32::NEG_INFINITY;
            x.extend(row);
        }
        let n = x.len() / w;
        for (name, ctx) in &ctxs {
            let (host, dev) = host_and_device(ctx, &algebra, Operation::Normalize, &[&x], x.len());
            for (row, (xs, rs)) in x.chunks_exact(w).zip(host.chunks_exact(w)).enumerate() {
                let nan_row = xs.iter().any(|v| v.is_nan());
                for (k, (v, r)) in xs.iter().zip(rs).enumerate() {
                    let want = if nan_row || v.is_infinite() {
                        NAN
                    } else {
                        v.to_bits() & 0x8000_0000
                    };
                    assert_eq!(r.to_bits(), want, "{} row {row} blade {k}", algebra.label());
                }
            }
            same_bits(
                &format!(
                    "{} normalize of {n} NaN/inf rows on {name}",
                    algebra.label()
                ),
                &dev,
                &host,
            );
        }
    }
}
