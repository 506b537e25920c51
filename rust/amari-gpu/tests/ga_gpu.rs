//! Generated geometric-algebra kernels on a real adapter (lavapipe where there is no GPU)
//! against a float64 reference written here from the definitions, plus broadcasting and
//! the errors that name an operand.

mod common;

use amari_gpu::ga::host_apply::apply_host;
use amari_gpu::ga::{apply, Algebra, Operation};
use amari_gpu::kernel::FmaMode;
use amari_gpu::sample::uniform_f32;
use amari_gpu::{ContextOptions, Error, MultiGpuContext};
use common::basis;

/// Geometric, outer (grades add) and left-contraction (grade j − grade i) products, f64,
/// with the sum of |terms| per coefficient.
fn reference(kind: Operation, squares: &[f64], a: &[f32], b: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let w = 1 << squares.len();
    let (mut out, mut bound) = (vec![0.0; w], vec![0.0; w]);
    let g = |x: usize| x.count_ones() as i64;
    for (i, &x) in a.iter().enumerate().take(w) {
        for (j, &y) in b.iter().enumerate().take(w) {
            let k = i ^ j;
            let keep = match kind {
                Operation::Outer => g(k) == g(i) + g(j),
                Operation::Inner => g(k) == g(j) - g(i),
                _ => true,
            };
            let term = basis(i, j, squares) * f64::from(x) * f64::from(y);
            if keep {
                out[k] += term;
                bound[k] += term.abs();
            }
        }
    }
    (out, bound)
}

fn check(kind: Operation, signature: (u32, u32, u32), ctx: &MultiGpuContext) {
    let (p, q, r) = signature;
    let algebra = Algebra::new(p, q, r).expect("valid algebra");
    let squares: Vec<f64> = (0..algebra.dimension())
        .map(|v| f64::from(algebra.square(v)))
        .collect();
    let (w, n) = (algebra.blades(), 1000);
    let a = uniform_f32(w * n, 7);
    let b = uniform_f32(w * n, 8);
    let mut out = vec![f32::NAN; w * n];
    apply(ctx, &algebra, kind, &[&a, &b], &mut out, None).expect("kernel runs");
    for row in 0..n {
        let s = row * w..(row + 1) * w;
        let (want, bound) = reference(kind, &squares, &a[s.clone()], &b[s.clone()]);
        for k in 0..w {
            let err = (f64::from(out[s.start + k]) - want[k]).abs();
            assert!(
                err <= 1e-5 * bound[k],
                "{kind:?} in {}: row {row} blade {k}: got {} want {}",
                algebra.label(),
                out[s.start + k],
                want[k]
            );
        }
    }
}

#[test]
fn products_match_the_reference() {
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        ..Default::default()
    })
    .expect("context opens");
    for signature in [(3, 0, 1), (1, 3, 0), (2, 0, 0)] {
        for kind in [Operation::Geometric, Operation::Outer, Operation::Inner] {
            check(kind, signature, &ctx);
        }
    }
}

#[test]
fn a_single_rotor_is_applied_to_every_row_on_several_devices() {
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter: 3,
        chunk_items: Some(100),
        ..Default::default()
    })
    .expect("context opens");
    let pga = Algebra::new(3, 0, 1).unwrap();
    let n = 1234;
    let rotor = uniform_f32(16, 1);
    let x = uniform_f32(16 * n, 2);
    let repeated: Vec<f32> = rotor.iter().copied().cycle().take(16 * n).collect();
    let mut once = vec![0.0; 16 * n];
    let mut each = vec![0.0; 16 * n];
    apply(
        &ctx,
        &pga,
        Operation::Sandwich,
        &[&rotor, &x],
        &mut once,
        None,
    )
    .unwrap();
    apply(
        &ctx,
        &pga,
        Operation::Sandwich,
        &[&repeated, &x],
        &mut each,
        None,
    )
    .unwrap();
    // One rotor is its linear map (`ga::sandwich_map`), built once and bound to every device:
    // lavapipe's bits are the host kernel's with lavapipe's two roundings per fma. A rotor per
    // row is the two-stage (r x) r̃: the same values within float32 rounding, not the same bits.
    let mut host = vec![0.0; 16 * n];
    apply_host(
        &pga,
        Operation::Sandwich,
        &[&rotor, &x],
        &mut host,
        FmaMode::Separate,
    )
    .unwrap();
    assert!(once
        .iter()
        .zip(&host)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    assert!(once
        .iter()
        .zip(&each)
        .all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + b.abs())));
    assert!(once.iter().all(|v| v.is_finite()) && once.iter().any(|&v| v != 0.0));
}

#[test]
fn bad_operands_are_named() {
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        ..Default::default()
    })
    .expect("context opens");
    let cl3 = Algebra::CL3;
    let mut out = vec![0.0; 16];
    let cases: [(Operation, Vec<Vec<f32>>, &str); 4] = [
        (
            Operation::Geometric,
            vec![vec![0.0; 15], vec![0.0; 16]],
            "a",
        ),
        (Operation::Sandwich, vec![vec![0.0; 16], vec![0.0; 24]], "x"),
        (Operation::Reverse, vec![vec![0.0; 12]], "x"),
        (
            Operation::GradeProjection(0b1_0000),
            vec![vec![0.0; 16]],
            "k",
        ),
    ];
    for (op, operands, name) in cases {
        let slices: Vec<&[f32]> = operands.iter().map(Vec::as_slice).collect();
        match apply(&ctx, &cl3, op, &slices, &mut out, None) {
            Err(
                Error::Shape { argument, .. }
                | Error::Broadcast { argument, .. }
                | Error::InvalidArgument { argument, .. },
            ) => {
                assert_eq!(argument, name, "{op:?}")
            }
            other => panic!("{op:?}: expected an error naming {name}, got {other:?}"),
        }
    }
}
