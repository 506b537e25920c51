//! Helpers shared by the integration tests: WGSL validation, one context per adapter,
//! seeded inputs, bit-for-bit comparison, the adapter's fma rounding, and float64
//! references written from the definitions.

// Every test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use amari_gpu::ga::{Algebra, Operation};
use amari_gpu::{ContextOptions, MultiGpuContext};

/// Parses and validates WGSL with naga (no GPU needed), panicking with naga's report named
/// after `name`; returns the module for further checks.
pub fn validate(name: &str, source: &str) -> naga::Module {
    validate_with(name, source, naga::valid::Capabilities::empty())
}

/// [`validate`] with the shader capabilities `capabilities` (e.g. `FLOAT64`, which a device
/// with `SHADER_F64` grants).
pub fn validate_with(
    name: &str,
    source: &str,
    capabilities: naga::valid::Capabilities,
) -> naga::Module {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{name} does not parse:\n{}", e.emit_to_string(source)));
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities)
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name} does not validate:\n{}", e.emit_to_string(source)));
    module
}

/// Shows the core's log records as `RUST_LOG` asks (e.g. `RUST_LOG=amari_gpu=info cargo
/// test`); nothing without it. Captured per test like `println!`.
pub fn logging() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// One context per backend that has an adapter ("vulkan": lavapipe, "gl": llvmpipe here),
/// cutting problems into chunks of `chunk_items` items so that odd sizes straddle chunks.
pub fn contexts(chunk_items: Option<usize>) -> Vec<(String, MultiGpuContext)> {
    logging();
    let infos = amari_gpu::adapters();
    let mut out = Vec::new();
    for backend in ["vulkan", "gl", "metal", "dx12"] {
        let Some(info) = infos.iter().find(|i| i.backend == backend) else {
            continue;
        };
        let ctx = MultiGpuContext::new(ContextOptions {
            adapters: Some(vec![info.index]),
            chunk_items,
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{backend} adapter {} opens: {e}", info.name));
        out.push((format!("{backend} ({})", info.name), ctx));
    }
    assert!(
        !out.is_empty(),
        "no wgpu adapter: install Mesa's lavapipe/llvmpipe"
    );
    out
}

/// Asserts that `plan` gave the GL devices of `ctx` nothing and left each out with a reason
/// starting `reason` (e.g. "float64 needs SHADER_F64: device") and ending "(gl) lacks it".
pub fn gl_left_out(ctx: &MultiGpuContext, plan: &amari_gpu::Plan, reason: &str) {
    let gl: Vec<usize> = ctx
        .devices()
        .iter()
        .filter(|d| d.adapter.backend == "gl")
        .map(|d| d.id)
        .collect();
    assert!(!gl.is_empty());
    assert!(
        plan.assignments.iter().all(|a| !gl.contains(&a.device)),
        "{plan:?}"
    );
    for id in &gl {
        let (_, why) = plan
            .left_out
            .iter()
            .find(|(d, _)| d == id)
            .unwrap_or_else(|| panic!("device {id} left out in {plan:?}"));
        assert!(why.starts_with(reason), "{why}");
        assert!(why.ends_with("(gl) lacks it"), "{why}");
    }
}

/// Held by tests that open contexts and compile many kernels: wgpu's GL backend holds one
/// adapter-context lock while it compiles a pipeline and gives up after 6 s, and a test
/// binary's generated kernels (64-blade algebras among them) take llvmpipe longer than that
/// on a busy machine when several tests compile at once. One test at a time keeps each
/// compile's wait short.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `n` seeded floats in [-1, 1).
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    amari_gpu::sample::uniform_f32(n, seed)
}

/// Asserts `got == want` bit for bit, naming the first differing word.
pub fn same_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        let differing = (0..got.len())
            .filter(|&i| got[i].to_bits() != want[i].to_bits())
            .count();
        panic!(
            "{what}: word {i} differs: device {:e} ({:#010x}), host {:e} ({:#010x}); {differing} of {} words differ",
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits(),
            got.len()
        );
    }
}

/// How `ctx`'s device rounds WGSL `fma`, measured with the generated Cl(1) product:
/// r0 = a0 b0 then fma(a1, b1, r0), with a0 b0 = −1 and a1 b1 just under 1.
pub fn fma_mode(ctx: &MultiGpuContext) -> amari_gpu::kernel::FmaMode {
    use amari_gpu::ga::{apply, Algebra, Operation};
    let [x, y, _] = amari_gpu::kernel::FmaMode::PROBE;
    let mut out = [0.0f32; 2];
    let algebra = Algebra::new(1, 0, 0).expect("Cl(1)");
    apply(
        ctx,
        &algebra,
        Operation::Geometric,
        &[&[1.0, x], &[-1.0, y]],
        &mut out,
        None,
    )
    .expect("probe runs");
    amari_gpu::kernel::FmaMode::from_probe(out[0])
        .unwrap_or_else(|| panic!("fma probe gave {:e}, neither fused nor separate", out[0]))
}

/// e_i e_j = sign e_(i^j): swaps to sort the vectors, times the squares of shared ones.
pub fn basis(i: usize, j: usize, squares: &[f64]) -> f64 {
    let n = squares.len();
    let swaps = (0..n)
        .flat_map(|x| (0..x).map(move |y| (x, y)))
        .filter(|&(x, y)| i >> x & 1 == 1 && j >> y & 1 == 1)
        .count();
    let metric: f64 = (0..n)
        .filter(|v| (i & j) >> v & 1 == 1)
        .map(|v| squares[v])
        .product();
    if swaps % 2 == 0 {
        metric
    } else {
        -metric
    }
}

/// Every operation the generator writes, with three kinds of grade projection.
pub fn operations(algebra: &Algebra) -> Vec<Operation> {
    let all_grades = (1u8 << (algebra.dimension() + 1)) - 1;
    vec![
        Operation::Geometric,
        Operation::Outer,
        Operation::Inner,
        Operation::Scalar,
        Operation::Sandwich,
        Operation::Reverse,
        Operation::GradeInvolution,
        Operation::GradeProjection(1),
        Operation::GradeProjection(0b10),
        Operation::GradeProjection(all_grades),
        Operation::Normalize,
        Operation::Dual,
    ]
}

/// Heat steps with a Dirichlet frame in float64.
pub fn heat_reference(grid: &[f32], h: usize, w: usize, steps: u64, alpha: f64) -> Vec<f64> {
    let mut u: Vec<f64> = grid.iter().map(|&v| f64::from(v)).collect();
    for _ in 0..steps {
        let mut next = u.clone();
        for r in 1..h - 1 {
            for c in 1..w - 1 {
                let i = r * w + c;
                let s = u[i - w] + u[i + w] + u[i - 1] + u[i + 1];
                next[i] = u[i] + alpha * (s - 4.0 * u[i]);
            }
        }
        u = next;
    }
    u
}

/// A batched tropical matrix product of host operands through the one entry, by the
/// `variant` kernel, written into `out` (batch, m, n); returns the plan.
pub fn matmul_host(
    ctx: &MultiGpuContext,
    variant: amari_gpu::tropical::product::Variant,
    product: amari_gpu::tropical::Product<'_>,
    out: &mut [f32],
    strategy: Option<amari_gpu::Strategy>,
) -> amari_gpu::Result<amari_gpu::Plan> {
    use amari_gpu::tropical::{product::tropical_matmul_with, Operands};
    let amari_gpu::tropical::BatchShape { batch, m, k, n } = product.shape;
    let operands = Operands {
        semiring: product.semiring,
        a: amari_gpu::ResidentOperand::Host(product.a),
        a_shape: &[batch, m, k],
        b: product.b,
        b_shape: &[batch, k, n],
    };
    let out = amari_gpu::Destination::Host(out);
    let ran = tropical_matmul_with(ctx, variant, operands)?.run(ctx, out, strategy)?;
    Ok(ran.plan.expect("a run over host operands has a plan"))
}

/// A batched tropical matrix-vector product of host operands (`product.b` the (batch, k)
/// vectors) through the one entry, written into `out` (batch, m); returns the plan.
pub fn matvec_host(
    ctx: &MultiGpuContext,
    product: amari_gpu::tropical::Product<'_>,
    out: &mut [f32],
    strategy: Option<amari_gpu::Strategy>,
) -> amari_gpu::Result<amari_gpu::Plan> {
    use amari_gpu::tropical::{tropical_matvec, Operands};
    let amari_gpu::tropical::BatchShape { batch, m, k, .. } = product.shape;
    let operands = Operands {
        semiring: product.semiring,
        a: amari_gpu::ResidentOperand::Host(product.a),
        a_shape: &[batch, m, k],
        b: product.b,
        b_shape: &[batch, k],
    };
    let out = amari_gpu::Destination::Host(out);
    let ran = tropical_matvec(ctx, operands)?.run(ctx, out, strategy)?;
    Ok(ran.plan.expect("a run over host operands has a plan"))
}
