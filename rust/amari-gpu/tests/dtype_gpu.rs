//! Kernels of a dtype other than float32 on the devices that run it: lavapipe (Vulkan)
//! offers `SHADER_F64`, llvmpipe (GL) does not. A float64 call runs on the Vulkan devices
//! only and its plan names the GL device as left out; a GL-only context refuses it with the
//! error that names every device and what it lacks.

mod common;

use amari_gpu::dtype::{f64_words, f64_words_mut};
use amari_gpu::kernel::{Input, Kernel, Output};
use amari_gpu::{ContextOptions, Dtype, Family, MultiGpuContext, Strategy};

/// `out[i] = x[i] * x[i] + 1/3` in float64: two words per value.
const SQUARE_F64: &str = "
struct Params { n: u32, row_threads: u32, _pad0: u32, _pad1: u32, }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> in0: array<f64>;
@group(0) @binding(2) var<storage, read_write> out: array<f64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * params.row_threads + gid.x;
    if (i >= params.n) { return; }
    out[i] = in0[i] * in0[i] + f64(1.0) / f64(3.0);
}
";

fn square_f64() -> Kernel {
    Kernel {
        inputs: vec![Input::PerItem(2)],
        output: Output::PerItem(2),
        dtype: Dtype::F64,
        ..Kernel::map("test_square_f64", Family::Probe, SQUARE_F64)
    }
}

fn context(backends: &[&str]) -> MultiGpuContext {
    common::logging();
    MultiGpuContext::new(ContextOptions {
        backends: Some(backends.iter().map(|b| b.to_string()).collect()),
        chunk_items: Some(64),
        ..Default::default()
    })
    .expect("the software adapters open")
}

#[test]
fn devices_say_which_dtypes_they_run() {
    let ctx = context(&["vulkan", "gl"]);
    for dev in ctx.devices() {
        let want = match dev.adapter.backend.as_str() {
            "vulkan" => vec![Dtype::F16, Dtype::F32, Dtype::F64],
            _ => vec![Dtype::F32],
        };
        assert_eq!(
            dev.dtypes, want,
            "device {} ({})",
            dev.id, dev.adapter.backend
        );
    }
}

#[test]
fn float64_work_goes_to_the_devices_that_run_it_and_the_plan_says_which_did_not() {
    let ctx = context(&["vulkan", "gl"]);
    let x: Vec<f64> = (0..1000).map(|i| f64::from(i) / 7.0).collect();
    let mut out = vec![0.0f64; x.len()];
    let plan = ctx
        .run_map(
            &square_f64(),
            &[f64_words(&x)],
            f64_words_mut(&mut out),
            x.len(),
            Some(Strategy::Balanced),
        )
        .expect("runs on lavapipe");
    common::gl_left_out(&ctx, &plan, "float64 needs SHADER_F64: device");
    for (got, x) in out.iter().zip(&x) {
        assert_eq!(got.to_bits(), (x * x + 1.0 / 3.0).to_bits(), "x = {x}");
    }
}

#[test]
fn a_context_without_float64_refuses_it_naming_every_device() {
    let ctx = context(&["gl"]);
    let x = [1.0f64; 4];
    let mut out = [0.0f64; 4];
    let error = ctx
        .run_map(
            &square_f64(),
            &[f64_words(&x)],
            f64_words_mut(&mut out),
            4,
            None,
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("dtype: no device of this context computes in float64: float64 needs SHADER_F64: device 0 '"),
        "{error}"
    );
    assert!(error.contains("pass dtype=numpy.float32"), "{error}");
    assert_eq!(out, [0.0; 4], "nothing written");
}
