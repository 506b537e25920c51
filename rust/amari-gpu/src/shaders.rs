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

/// A loop of `shaders/peak.wgsl` whose chains each repeat `$step`, an expression of the
/// chain's value `x`, the constant `m` and the thread's seed `s`.
macro_rules! peak_kernel {
    ($step:literal) => {
        concat!(
            map_kernel!("peak.wgsl"),
            "\nfn step(x: vec4<f32>, m: vec4<f32>, s: vec4<f32>) -> vec4<f32> {\n    return ",
            $step,
            ";\n}\n"
        )
    };
}

/// Steps one thread of a [`PEAK`] loop runs on each of its lanes: 256 iterations of 8
/// chains of vec4.
pub const PEAK_STEPS_PER_THREAD: f64 = 256.0 * 8.0 * 4.0;

/// Arithmetic-peak micro-benchmark used by calibration: chains of fused multiply-adds.
pub const PEAK: &str = peak_kernel!("fma(x, m, s)");

/// Flops one thread of [`PEAK`] does (a multiply-add counts two).
pub const PEAK_FLOPS_PER_THREAD: f64 = PEAK_STEPS_PER_THREAD * 2.0;

/// The add limit: chains of adds, one operation a step.
pub const PEAK_ADD: &str = peak_kernel!("x + m");

/// The max-plus limit: chains of an add then a max (the step of a max-plus product), two
/// operations a step. (A chain of maxes alone would be idempotent, which a compiler may
/// fold away.)
pub const PEAK_MAX: &str = peak_kernel!("max(x + m, s)");

/// Streaming-copy micro-benchmark used by calibration.
pub const COPY: &str = map_kernel!("copy.wgsl");

/// Streaming-triad micro-benchmark: the roofline's bandwidth limit on a wgpu device.
pub const TRIAD: &str = map_kernel!("triad.wgsl");

/// Bytes one thread of [`TRIAD`] moves: eight vec4 read from each of two arrays, eight
/// written.
pub const TRIAD_BYTES_PER_THREAD: f64 = 8.0 * 16.0 * 3.0;

/// One Jacobi step of the 2-D heat equation on a band of rows.
pub const HEAT: &str = include_str!("../../../shaders/heat.wgsl");

/// One Game of Life step on a band of rows (cells packed four to a word).
pub const LIFE: &str = include_str!("../../../shaders/life.wgsl");

/// Shaders embedded by this module, by file name (kernel families embed their own).
pub const ALL: &[(&str, &str)] = &[
    ("geometric_cl3.wgsl", GEOMETRIC_CL3),
    ("peak.wgsl", PEAK),
    ("peak.wgsl (add)", PEAK_ADD),
    ("peak.wgsl (max)", PEAK_MAX),
    ("copy.wgsl", COPY),
    ("triad.wgsl", TRIAD),
    ("heat.wgsl", HEAT),
    ("life.wgsl", LIFE),
];
