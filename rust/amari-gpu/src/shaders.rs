//! The WGSL sources of the kernel families, compiled into the crate from `shaders/`.

/// Cl(3,0) geometric product of two batches of multivectors.
pub const GEOMETRIC_CL3: &str = include_str!("../../../shaders/geometric_cl3.wgsl");

/// Every shader file, by file name (for validation and tooling).
pub const ALL: &[(&str, &str)] = &[("geometric_cl3.wgsl", GEOMETRIC_CL3)];
