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
                let kernel = elementwise::kernel(op, cols, layout, swap);
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
