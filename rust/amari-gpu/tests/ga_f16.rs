//! Geometric-algebra kernels in float16 storage: rows stored as float16, widened to float32,
//! computed by the float32 kernel's chains and rounded once to float16. The same bits on
//! lavapipe (Vulkan, `SHADER_F16`), on the host device (F16C or the scalar conversion) and on
//! both at once, equal to the float32 kernel's result on the widened rows rounded once; the
//! GL device (llvmpipe, no `SHADER_F16`) is left out of float16 work and says so, and a
//! GL-only context refuses it. Operations and algebras float16 rows cannot hold are refused.

mod common;

use amari_gpu::ga::{apply, apply_in, kernel, Algebra, Broadcast, Operation};
use amari_gpu::host::f16::{narrow, to_f16, widen};
use amari_gpu::host::Level;
use amari_gpu::{ContextOptions, Dtype, MultiGpuContext, Strategy};
use common::{one_at_a_time, random, same_bits, validate_with};

const ITEMS: usize = 1037;

fn context(backends: &[&str], devices_per_adapter: usize) -> MultiGpuContext {
    common::logging();
    MultiGpuContext::new(ContextOptions {
        backends: Some(backends.iter().map(|b| b.to_string()).collect()),
        devices_per_adapter,
        chunk_items: Some(64),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{backends:?} opens: {e}"))
}

/// `n` values as float16 words (two per word), of varied magnitude: rows of 8 values scaled
/// up by 2^8 (products past float16's range round to infinity), down by 2^-10 (products in
/// its subnormals) or kept in [-1, 1).
fn f16_words(n: usize, seed: u64) -> Vec<f32> {
    let mut values = random(n, seed);
    for (r, row) in values.chunks_mut(8).enumerate() {
        let scale = match r % 5 {
            1 => 256.0,
            2 => 2f32.powi(-10),
            _ => 1.0,
        };
        row.iter_mut().for_each(|v| *v *= scale);
    }
    let mut words = vec![0.0f32; n / 2];
    narrow(Level::Portable, &values, &mut words);
    words
}

fn widened(words: &[f32]) -> Vec<f32> {
    let mut values = vec![0.0f32; 2 * words.len()];
    widen(Level::Portable, words, &mut values);
    values
}

/// The operations float16 storage has kernels for in `algebra`, on one or two operands.
fn operations() -> [Operation; 7] {
    [
        Operation::Geometric,
        Operation::Outer,
        Operation::Inner,
        Operation::Reverse,
        Operation::GradeInvolution,
        Operation::Sandwich,
        Operation::Normalize,
    ]
}

#[test]
fn every_float16_kernel_validates_with_shader_f16() {
    for (p, q, r) in [(3, 0, 0), (1, 0, 0), (3, 0, 1), (4, 1, 0)] {
        let algebra = Algebra::new(p, q, r).expect("valid signature");
        let rotor = (Operation::Sandwich, Broadcast::Left);
        for (op, broadcast) in operations()
            .map(|op| (op, Broadcast::None))
            .into_iter()
            .chain([rotor])
        {
            let k = kernel(&algebra, op, broadcast, Dtype::F16);
            assert_eq!(k.pipeline_key(), format!("{}@float16", k.id));
            assert!(k.source.starts_with("// Generated"), "{}", k.source);
            assert!(k.source.contains("enable f16;"), "{}", k.source);
            validate_with(&k.id, &k.source, naga::valid::Capabilities::SHADER_FLOAT16);
        }
    }
}

#[test]
fn float16_products_have_the_same_bits_on_lavapipe_the_host_and_both() {
    let _one = one_at_a_time();
    let vulkan = context(&["vulkan"], 1);
    let contexts = [
        ("host", context(&["host"], 1)),
        ("vulkan x2", context(&["vulkan"], 2)),
        ("host + vulkan", context(&["host", "vulkan"], 1)),
    ];
    for (p, q, r) in [(3, 0, 0), (1, 0, 0), (3, 0, 1), (4, 1, 0)] {
        let algebra = Algebra::new(p, q, r).expect("valid signature");
        let w = algebra.blades();
        let a = f16_words(w * ITEMS, 1);
        let b = f16_words(w * ITEMS, 2);
        let single = f16_words(w, 3);
        for op in operations() {
            let two = op.operands().len() == 2;
            // Batches, a single right operand and (the sandwich by one rotor, its map built
            // from the widened rotor) a single left one.
            let pairs: Vec<Vec<&[f32]>> = match (two, op) {
                (false, _) => vec![vec![&a]],
                (true, Operation::Sandwich) => {
                    vec![vec![&a, &b], vec![&a, &single], vec![&single, &b]]
                }
                (true, _) => vec![vec![&a, &b], vec![&a, &single]],
            };
            for operands in pairs {
                let right = operands.last().expect("an operand");
                // The float32 kernel on the widened rows, rounded once (by the scalar
                // conversion): what every float16 result must be, bit for bit.
                let wide: Vec<Vec<f32>> = operands.iter().map(|o| widened(o)).collect();
                let wide: Vec<&[f32]> = wide.iter().map(Vec::as_slice).collect();
                let mut f32_out = vec![f32::NAN; w * ITEMS];
                apply(&vulkan, &algebra, op, &wide, &mut f32_out, None).expect("float32 runs");
                let mut want = vec![0.0f32; w * ITEMS / 2];
                narrow(Level::Portable, &f32_out, &mut want);
                let what = format!(
                    "{} {} ({} x {} words)",
                    algebra.label(),
                    op.name(),
                    operands[0].len(),
                    right.len()
                );
                let mut got = vec![f32::NAN; want.len()];
                apply_in(
                    &vulkan,
                    (&algebra, op, Dtype::F16),
                    &operands,
                    &mut got,
                    None,
                )
                .expect("float16 runs on lavapipe");
                same_bits(&format!("{what} on lavapipe"), &got, &want);
                for (name, ctx) in &contexts {
                    // Bits are promised within a context: a host-only context has no wgpu
                    // device whose fma rounding to follow (it fuses), so its reference is its
                    // own float32 result of the widened rows; the products' chains give
                    // lavapipe's bits there too.
                    let want = if *name == "host" {
                        let mut f32_out = vec![f32::NAN; w * ITEMS];
                        apply(ctx, &algebra, op, &wide, &mut f32_out, None).expect("float32 runs");
                        let mut own = vec![0.0f32; want.len()];
                        narrow(Level::Portable, &f32_out, &mut own);
                        if !matches!(op, Operation::Sandwich | Operation::Normalize) {
                            same_bits(&format!("{what}: host-only float32"), &own, &want);
                        }
                        own
                    } else {
                        want.clone()
                    };
                    for strategy in [Strategy::Balanced, Strategy::Adaptive] {
                        let mut got = vec![f32::NAN; want.len()];
                        apply_in(
                            ctx,
                            (&algebra, op, Dtype::F16),
                            &operands,
                            &mut got,
                            Some(strategy),
                        )
                        .expect("float16 runs");
                        same_bits(&format!("{what} on {name}, {strategy:?}"), &got, &want);
                    }
                }
            }
        }
    }
}

#[test]
fn the_host_result_is_the_float32_product_rounded_once_by_the_scalar_conversion() {
    // The host device (F16C where the CPU has it) against the float32 product rounded by the
    // scalar conversion (what the portable level runs; `ga::host_f16`'s unit test runs the
    // kernel itself at that forced level).
    let algebra = Algebra::new(3, 0, 0).expect("Cl(3,0)");
    let host = context(&["host"], 1);
    let (a, b) = (f16_words(8 * ITEMS, 4), f16_words(8 * ITEMS, 5));
    let mut detected = vec![f32::NAN; 4 * ITEMS];
    apply_in(
        &host,
        (&algebra, Operation::Geometric, Dtype::F16),
        &[&a, &b],
        &mut detected,
        None,
    )
    .expect("runs");
    let mut wide = vec![0.0f32; 8 * ITEMS];
    let mut scalar = vec![0.0f32; 4 * ITEMS];
    let (wa, wb) = (widened(&a), widened(&b));
    let mut product = vec![0.0f32; 8 * ITEMS];
    apply(
        &host,
        &algebra,
        Operation::Geometric,
        &[&wa, &wb],
        &mut product,
        None,
    )
    .expect("runs");
    narrow(Level::Portable, &product, &mut scalar);
    same_bits("Cl(3,0) product, scalar conversion", &detected, &scalar);
    widen(Level::Portable, &detected, &mut wide);
    for (i, (&x, &y)) in wide.iter().zip(&product).enumerate() {
        assert_eq!(to_f16(y), to_f16(x), "value {i}: one rounding of {y:e}");
    }
}

#[test]
fn float16_leaves_out_the_gl_device_and_a_gl_context_refuses_it() {
    let _one = one_at_a_time();
    let algebra = Algebra::new(3, 0, 0).expect("Cl(3,0)");
    let (a, b) = (f16_words(8 * ITEMS, 6), f16_words(8 * ITEMS, 7));
    let mixed = context(&["vulkan", "gl"], 1);
    let mut out = vec![f32::NAN; 4 * ITEMS];
    let plan = apply_in(
        &mixed,
        (&algebra, Operation::Geometric, Dtype::F16),
        &[&a, &b],
        &mut out,
        Some(Strategy::Balanced),
    )
    .expect("runs on lavapipe");
    common::gl_left_out(&mixed, &plan, "float16 needs SHADER_F16: device");
    let gl_only = context(&["gl"], 1);
    let mut untouched = vec![0.0f32; 4 * ITEMS];
    let error = apply_in(
        &gl_only,
        (&algebra, Operation::Geometric, Dtype::F16),
        &[&a, &b],
        &mut untouched,
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("dtype: no device of this context computes in float16: float16 needs SHADER_F16: device 0 '"),
        "{error}"
    );
    assert!(untouched.iter().all(|&x| x == 0.0), "nothing written");
}

#[test]
fn float16_refuses_what_its_rows_cannot_hold() {
    let host = context(&["host"], 1);
    let refused = |(p, q, r): (u32, u32, u32), op: Operation| {
        let algebra = Algebra::new(p, q, r).expect("valid signature");
        let x = vec![0.0f32; 8 * algebra.blades()];
        let operands: Vec<&[f32]> = vec![&x; op.operands().len()];
        let mut out = vec![0.0f32; 8 * algebra.blades()];
        let error = apply_in(&host, (&algebra, op, Dtype::F16), &operands, &mut out, None)
            .unwrap_err()
            .to_string();
        assert!(out.iter().all(|&x| x == 0.0), "nothing written");
        error
    };
    let e = refused((3, 0, 0), Operation::Scalar);
    assert!(
        e.starts_with("dtype: scalar_product computes in float32 and float64"),
        "{e}"
    );
    assert!(e.ends_with("got float16"), "{e}");

    // Every algebra has an even number of blades (2 to 64), so its rows pack whole.
    assert!(Algebra::new(0, 0, 0).is_err());
}
