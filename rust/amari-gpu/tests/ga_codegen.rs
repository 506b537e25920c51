//! The generated geometric-algebra WGSL parses and validates with naga for every algebra
//! the documentation names and every operation and broadcast (no GPU needed), and the
//! generated Cl(3,0) product has, term for term, the hand-checked static shader's terms.

mod common;

use amari_gpu::ga::{generate, kernel, Algebra, Broadcast, Operation};
use amari_gpu::Dtype;
use common::{operations, validate, validate_with};

/// The algebras named in the documentation, plus the smallest ones (whose rows are not
/// whole `vec4`s).
const SIGNATURES: [(u32, u32, u32); 9] = [
    (3, 0, 0),
    (1, 3, 0),
    (3, 0, 1),
    (4, 1, 0),
    (6, 0, 0),
    (1, 0, 0),
    (0, 1, 0),
    (0, 0, 1),
    (2, 0, 0),
];

/// The broadcasts `op` has kernels for.
fn broadcasts(op: Operation) -> &'static [Broadcast] {
    if op.operands().len() == 2 {
        &[Broadcast::None, Broadcast::Left, Broadcast::Right]
    } else {
        &[Broadcast::None]
    }
}

#[test]
fn every_generated_kernel_validates() {
    let mut seen = std::collections::HashSet::new();
    for (p, q, r) in SIGNATURES {
        let algebra = Algebra::new(p, q, r).expect("valid signature");
        for op in operations(&algebra) {
            for &mode in broadcasts(op) {
                let k = kernel(&algebra, op, mode, Dtype::F32);
                assert!(seen.insert(k.id.clone()), "duplicate kernel id {}", k.id);
                assert_eq!(
                    k.source,
                    generate(&algebra, op, mode, Dtype::F32),
                    "cached source differs"
                );
                validate(&k.id, &k.source);
            }
        }
    }
}

#[test]
fn every_float64_kernel_validates_with_float64_and_only_with_it() {
    for (p, q, r) in SIGNATURES {
        let algebra = Algebra::new(p, q, r).expect("valid signature");
        for op in operations(&algebra) {
            op.check_dtype(Dtype::F64)
                .expect("every operation has float64");
            for &mode in broadcasts(op) {
                let k = kernel(&algebra, op, mode, Dtype::F64);
                let f32_kernel = kernel(&algebra, op, mode, Dtype::F32);
                // One id, two pipelines: the cache key says the dtype.
                assert_eq!(k.id, f32_kernel.id);
                assert_eq!(k.pipeline_key(), format!("{}@float64", k.id));
                assert_eq!(f32_kernel.pipeline_key(), f32_kernel.id);
                assert_eq!(k.dtype, Dtype::F64);
                assert!(k.source.contains("f64") && !k.source.contains("vec4<f32>"));
                validate_with(&k.id, &k.source, naga::valid::Capabilities::FLOAT64);
                let parsed = naga::front::wgsl::parse_str(&k.source).expect("parses");
                let without = naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::empty(),
                )
                .validate(&parsed);
                assert!(without.is_err(), "{} validates without FLOAT64", k.id);
            }
        }
    }
}

#[test]
fn generated_cl3_product_has_the_terms_of_the_static_shader() {
    // The static shader writes `let rK = ±x * y ± x * y ...;`; the generator must chain the
    // same signed products, in the same order, into fused multiply-adds.
    let generated = generate(
        &Algebra::CL3,
        Operation::Geometric,
        Broadcast::None,
        Dtype::F32,
    );
    let mut outputs = 0;
    for line in amari_gpu::shaders::GEOMETRIC_CL3.lines() {
        let Some(rest) = line.trim().strip_prefix("let r") else {
            continue;
        };
        let (k, sum) = rest.split_once(" = ").expect("let rK = ...");
        let sum = sum.trim_end_matches(';').replace(" - ", " + -");
        for (n, term) in sum.split(" + ").enumerate() {
            let (neg, product) = match term.strip_prefix('-') {
                Some(p) => ("-", p),
                None => ("", term),
            };
            let want = if n == 0 {
                format!("var r{k} = {neg}{product};")
            } else {
                let (x, y) = product.split_once(" * ").expect("x * y");
                format!("r{k} = fma({neg}{x}, {y}, r{k});")
            };
            assert!(
                generated.contains(&want),
                "generated Cl(3,0) lacks {want:?}"
            );
        }
        outputs += 1;
    }
    assert_eq!(outputs, 8);
}

#[test]
fn zero_terms_are_not_generated() {
    // In PGA a product of two blades holding e4 vanishes: e4 (a2.x, b2.x: blade 8) never
    // multiplies e4; the outer product of Cl(3,0) never multiplies e1 (a0.y, b0.y) by e1.
    let pga = generate(
        &Algebra::new(3, 0, 1).unwrap(),
        Operation::Geometric,
        Broadcast::None,
        Dtype::F32,
    );
    assert!(pga.contains("a2.x, b0.x") && !pga.contains("a2.x, b2.x"));
    let outer = generate(&Algebra::CL3, Operation::Outer, Broadcast::None, Dtype::F32);
    assert!(outer.contains("a0.y, b0.z") && !outer.contains("a0.y, b0.y"));
}

/// The sandwich on some blades: its kernel validates in every dtype for rows of 1 to 16
/// blades (whole `vec4`s or not), in the caller's order, each set its own kernel.
#[test]
fn every_sandwich_on_blades_validates() {
    let pga = Algebra::new(3, 0, 1).expect("PGA");
    let sets: [&[i64]; 6] = [
        &[15],
        &[15, 0],
        &[14, 7, 13, 11],
        &[7, 11, 13, 14],
        &[3, 5, 6, 9, 10, 12],
        &[0, 3, 5, 6, 9, 10, 12, 15],
    ];
    let mut seen = std::collections::HashSet::new();
    for set in sets {
        let op = Operation::SandwichBlades(amari_gpu::ga::Blades::new(&pga, set).expect("blades"));
        for dtype in [Dtype::F32, Dtype::F64, Dtype::F16] {
            if op.check_dtype(dtype).is_err() {
                continue;
            }
            let k = kernel(&pga, op, Broadcast::Left, dtype);
            let caps = match dtype {
                Dtype::F64 => naga::valid::Capabilities::FLOAT64,
                Dtype::F16 => naga::valid::Capabilities::SHADER_FLOAT16,
                Dtype::F32 => naga::valid::Capabilities::empty(),
            };
            validate_with(&k.id, &k.source, caps);
        }
        assert!(seen.insert(kernel(&pga, op, Broadcast::Left, Dtype::F32).id));
    }
}
