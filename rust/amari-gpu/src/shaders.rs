//! The WGSL sources of the kernel families, compiled into the crate from `shaders/`.

/// Cl(3,0) geometric product of two batches of multivectors.
pub const GEOMETRIC_CL3: &str = include_str!("../../../shaders/geometric_cl3.wgsl");

/// Arithmetic-peak micro-benchmark used by calibration.
pub const PEAK: &str = include_str!("../../../shaders/peak.wgsl");

/// Flops one thread of [`PEAK`] does (256 iterations of 8 vec4 FMAs).
pub const PEAK_FLOPS_PER_THREAD: f64 = 256.0 * 8.0 * 4.0 * 2.0;

/// Streaming-copy micro-benchmark used by calibration.
pub const COPY: &str = include_str!("../../../shaders/copy.wgsl");

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
