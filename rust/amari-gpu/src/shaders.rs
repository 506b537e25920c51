//! The WGSL sources of the kernel families, compiled into the crate from `shaders/`.
//!
//! Map kernels (one thread per item, the ABI of `Kernel::map`) share one skeleton,
//! `shaders/map.wgsl`: the uniform, the entry point and its bounds check. Each one's file
//! holds only its bindings and `fn item(i: u32)`, and its source is the skeleton followed
//! by that file.

/// The source of the map kernel in `shaders/$file`: the shared skeleton, then the file.
macro_rules! map_kernel {
    ($file:literal) => {
        concat!(
            include_str!("../../../shaders/map.wgsl"),
            include_str!(concat!("../../../shaders/", $file))
        )
    };
}

/// Cl(3,0) geometric product of two batches of multivectors.
pub const GEOMETRIC_CL3: &str = map_kernel!("geometric_cl3.wgsl");

/// Arithmetic-peak micro-benchmark used by calibration.
pub const PEAK: &str = map_kernel!("peak.wgsl");

/// Flops one thread of [`PEAK`] does (256 iterations of 8 vec4 FMAs).
pub const PEAK_FLOPS_PER_THREAD: f64 = 256.0 * 8.0 * 4.0 * 2.0;

/// Streaming-copy micro-benchmark used by calibration.
pub const COPY: &str = map_kernel!("copy.wgsl");

/// One Jacobi step of the 2-D heat equation on a band of rows.
pub const HEAT: &str = include_str!("../../../shaders/heat.wgsl");

/// One Game of Life step on a band of rows (cells packed four to a word).
pub const LIFE: &str = include_str!("../../../shaders/life.wgsl");

/// Shaders embedded by this module, by file name (kernel families embed their own).
pub const ALL: &[(&str, &str)] = &[
    ("geometric_cl3.wgsl", GEOMETRIC_CL3),
    ("peak.wgsl", PEAK),
    ("copy.wgsl", COPY),
    ("heat.wgsl", HEAT),
    ("life.wgsl", LIFE),
];
