//! Users' kernels (`map_rows`) on real devices: a kernel the driver refuses at pipeline
//! creation is the user's error and leaves every device healthy, and the call stops.

use amari_gpu::kernel::{Input, Kernel, Output};
use amari_gpu::{ContextOptions, Error, Family, MultiGpuContext};

#[test]
fn a_users_kernel_the_driver_refuses_is_the_users_error_and_no_device_fails() {
    let ctx = MultiGpuContext::new(ContextOptions {
        backends: Some(vec!["vulkan".into()]),
        devices_per_adapter: 2,
        chunk_items: Some(64),
        ..Default::default()
    })
    .expect("context opens");
    // Past naga's check (which `rows::kernel` runs) straight to the devices: an entry
    // point that does not exist fails pipeline creation on every device.
    let mut kernel = Kernel::map("refused", Family::Rows, "fn row() {}\n");
    kernel.entry = "amari_rows_main";
    kernel.inputs = vec![Input::PerItem(1)];
    kernel.output = Output::PerItem(1);
    let input = vec![1.0f32; 1000];
    let mut out = vec![0.0f32; 1000];
    let err = ctx
        .run_map(&kernel, &[&input], &mut out, 1000, None)
        .expect_err("the pipeline cannot be made");
    let Error::KernelCompile(message) = err else {
        panic!("expected KernelCompile, got {err:?}");
    };
    assert!(message.contains("refused the kernel"), "{message}");
    assert!(ctx.health().iter().all(|(_, healthy, _)| *healthy));
}
