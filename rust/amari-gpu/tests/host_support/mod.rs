//! Shared by the `host_*` tests: one context per wgpu adapter present (each alone, so a
//! mismatch names its adapter), seeded inputs, and bit-for-bit comparison.

#![allow(dead_code)]

use amari_gpu::{ContextOptions, MultiGpuContext};

/// One context per backend that has an adapter ("vulkan": lavapipe, "gl": llvmpipe here),
/// cutting problems into chunks of `chunk_items` items so that odd sizes straddle chunks.
pub fn contexts(chunk_items: Option<usize>) -> Vec<(String, MultiGpuContext)> {
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
pub fn fma_mode(ctx: &MultiGpuContext) -> amari_gpu::host::FmaMode {
    use amari_gpu::ga::{apply, Algebra, Operation};
    let [x, y, _] = amari_gpu::host::FmaMode::PROBE;
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
    amari_gpu::host::FmaMode::from_probe(out[0])
        .unwrap_or_else(|| panic!("fma probe gave {:e}, neither fused nor separate", out[0]))
}
