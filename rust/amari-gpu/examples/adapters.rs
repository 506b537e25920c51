//! Prints every adapter wgpu reports, as the core sees it.

fn main() {
    for info in amari_gpu::adapters() {
        println!(
            "[{}] {} | {} | {} | vendor {} ({:#x}) device {:#x} | driver {} {} | dup of {:?}",
            info.index,
            info.name,
            info.backend,
            info.device_type,
            info.vendor,
            info.vendor_id,
            info.device_id,
            info.driver,
            info.driver_info,
            info.same_device_as
        );
        println!("    limits: {:?}", info.limits);
        println!("    features: {:?}", info.features);
    }
}
