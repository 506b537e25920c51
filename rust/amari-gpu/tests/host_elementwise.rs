//! Host elementwise kernels against `shaders/elementwise.wgsl` on every wgpu adapter
//! present: every operation, every layout of the second operand, both operand orders, on
//! edge values (signed zeros, infinities, NaN, subnormals, the largest floats) and on rows
//! wider than one pass.

mod common;

use amari_gpu::elementwise::{self, host, Layout, OPS, PASS_COLS};
use common::{contexts, random};

/// Random values with every edge value mixed in.
fn values(n: usize, seed: u64) -> Vec<f32> {
    const EDGES: [f32; 12] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        -f32::MAX,
        f32::MIN_POSITIVE,
        1.0e-40,
        -3.0e-42,
        1.0,
        -2.0,
    ];
    random(n, seed)
        .into_iter()
        .enumerate()
        .map(|(i, v)| match i % 3 {
            0 => EDGES[(i / 3 + seed as usize) % EDGES.len()],
            1 => v * 1.0e3,
            _ => v,
        })
        .collect()
}

/// `got` equals `want` bit for bit, any NaN standing for any NaN (numpy promises no NaN
/// payload either).
fn same(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let agree = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
        assert!(
            agree,
            "{what}: word {i}: device {g:e} ({:#010x}), host {w:e} ({:#010x})",
            g.to_bits(),
            w.to_bits()
        );
    }
}

fn check(ctx: &amari_gpu::MultiGpuContext, name: &str, rows: usize, cols: usize) {
    let a = values(rows * cols, 1);
    for layout in [Layout::Rows, Layout::Row, Layout::Scalar] {
        let b = match layout {
            Layout::Rows => values(rows * cols, 2),
            Layout::Row => values(cols, 3),
            Layout::Scalar => values(1, 4),
        };
        for op in OPS {
            for swap in [false, true] {
                let kernel = elementwise::kernel(op, (cols, amari_gpu::Dtype::F32), layout, swap);
                let mut got = vec![0.0f32; rows * cols];
                ctx.run_map(&kernel, &[&a, &b], &mut got, rows, None)
                    .expect("ran");
                let want: Vec<f32> = (0..rows * cols)
                    .map(|w| {
                        let (i, k) = (w / cols, w % cols);
                        let other = match layout {
                            Layout::Rows => b[w],
                            Layout::Row => b[k],
                            Layout::Scalar => b[0],
                        };
                        let (x, y) = if swap {
                            (other, a[i * cols + k])
                        } else {
                            (a[w], other)
                        };
                        host::apply(op, x, y)
                    })
                    .collect();
                same(
                    &format!("{name} {op:?} {layout:?} swap={swap}"),
                    &got,
                    &want,
                );
            }
        }
    }
}

#[test]
fn every_operation_matches_the_host_bit_for_bit() {
    for (name, ctx) in contexts(Some(7)) {
        check(&ctx, &name, 45, 5);
    }
}

#[test]
fn rows_wider_than_a_pass_are_computed_whole() {
    for (name, ctx) in contexts(None) {
        // Past Mesa's cap of 65,535 loop trips per invocation, were the row one pass.
        check(&ctx, &name, 2, 4 * PASS_COLS + 3);
    }
}

/// float64 values with every edge value mixed in, as the engine's words.
fn values_f64(n: usize, seed: u64) -> Vec<f32> {
    const EDGES: [f64; 11] = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MAX,
        f64::MIN_POSITIVE,
        5.0e-324,
        -1.0e-310,
        1.0,
        -2.0,
    ];
    let values: Vec<f64> = random(n, seed)
        .into_iter()
        .enumerate()
        .map(|(i, v)| match i % 3 {
            0 => EDGES[(i / 3 + seed as usize) % EDGES.len()],
            1 => f64::from(v) * 1.0e3 + 1.0 / 3.0,
            _ => f64::from(v),
        })
        .collect();
    amari_gpu::dtype::f64_words(&values).to_vec()
}

/// float16 values (two to a word) with every edge value mixed in: the bits of ±0, ±inf,
/// NaN, the largest, the smallest normal and subnormals, and others.
fn values_f16(n: usize, seed: u64) -> Vec<f32> {
    const EDGES: [u16; 10] = [
        0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7bff, 0x0400, 0x0001, 0x83ff, 0x3c00,
    ];
    let bits: Vec<u16> = random(n, seed)
        .into_iter()
        .enumerate()
        .map(|(i, v)| match i % 3 {
            0 => EDGES[(i / 3 + seed as usize) % EDGES.len()],
            _ => amari_gpu::host::f16::to_f16(v * 100.0),
        })
        .collect();
    bits.chunks(2)
        .map(|p| f32::from_bits(u32::from(p[0]) | (u32::from(p[1]) << 16)))
        .collect()
}

/// Device words against the host twin's, a NaN of the dtype standing for any NaN.
fn same_in(what: &str, dtype: amari_gpu::Dtype, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    let g: &[u32] = bytemuck::cast_slice(got);
    let w: &[u32] = bytemuck::cast_slice(want);
    let nan16 = |b: u32| (b & 0x7fff) > 0x7c00;
    match dtype {
        amari_gpu::Dtype::F64 => {
            for (i, (g, w)) in g.chunks(2).zip(w.chunks(2)).enumerate() {
                let (gv, wv) = (
                    f64::from_bits(u64::from(g[0]) | (u64::from(g[1]) << 32)),
                    f64::from_bits(u64::from(w[0]) | (u64::from(w[1]) << 32)),
                );
                let agree = gv.to_bits() == wv.to_bits() || (gv.is_nan() && wv.is_nan());
                assert!(agree, "{what}: value {i}: device {gv:e}, host {wv:e}");
            }
        }
        _ => {
            for (i, (&g, &w)) in g.iter().zip(w).enumerate() {
                for half in [0, 16] {
                    let (gh, wh) = ((g >> half) & 0xffff, (w >> half) & 0xffff);
                    let agree = gh == wh || (nan16(gh) && nan16(wh));
                    assert!(agree, "{what}: word {i}: device {gh:#06x}, host {wh:#06x}");
                }
            }
        }
    }
}

/// Every operation, layout and order in `dtype` over rows of `cols` values: the device's
/// words are the host twin's.
fn check_in(
    ctx: &amari_gpu::MultiGpuContext,
    name: &str,
    dtype: amari_gpu::Dtype,
    rows: usize,
    cols: usize,
) {
    let words = |n: usize, seed: u64| match dtype {
        amari_gpu::Dtype::F64 => values_f64(n, seed),
        _ => values_f16(n.max(2), seed),
    };
    let a = words(rows * cols, 1);
    for layout in [Layout::Rows, Layout::Row, Layout::Scalar] {
        let b = match layout {
            Layout::Rows => words(rows * cols, 2),
            Layout::Row => words(cols, 3),
            // One float64 value; a float16 one twice (one word).
            Layout::Scalar if dtype == amari_gpu::Dtype::F64 => words(1, 4),
            Layout::Scalar => {
                let w = words(2, 4)[0].to_bits() & 0xffff;
                vec![f32::from_bits(w | (w << 16))]
            }
        };
        for op in OPS {
            for swap in [false, true] {
                let kernel = elementwise::kernel(op, (cols, dtype), layout, swap);
                let mut got = vec![0.0f32; a.len()];
                ctx.run_map(&kernel, &[&a, &b], &mut got, rows, None)
                    .expect("ran");
                let mut want = vec![0.0f32; a.len()];
                let host = kernel.host.as_ref().expect("a host twin");
                host.run(&[&a, &b], 0..rows, &mut want);
                same_in(
                    &format!("{name} {dtype} {op:?} {layout:?} swap={swap}"),
                    dtype,
                    &got,
                    &want,
                );
            }
        }
    }
}

#[test]
fn float64_and_float16_operations_match_the_host_bit_for_bit() {
    let mut ran = 0;
    for (name, ctx) in contexts(Some(7)) {
        for dtype in [amari_gpu::Dtype::F64, amari_gpu::Dtype::F16] {
            // Only adapters with the dtype's feature run it (llvmpipe GL has neither).
            if ctx.devices().iter().all(|d| d.runs(dtype)) {
                check_in(&ctx, &name, dtype, 45, 6);
                check_in(&ctx, &name, dtype, 2, 4 * elementwise::PASS_COLS + 2);
                ran += 1;
            }
        }
    }
    assert!(ran >= 2, "lavapipe runs float64 and float16");
}
