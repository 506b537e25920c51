//! The static Cl(3,0) geometric product of `shaders/geometric_cl3.wgsl`: the family's
//! calibration reference kernel (with its host twin, `ga::host_cl3`) and its float64 reference.

use std::sync::Arc;

use super::algebra;
use crate::family::Family;
use crate::ga::host_cl3::Cl3Product;
use crate::kernel::{Input, Kernel, Output};
use crate::shaders;

/// Blades of Cl(3,0).
pub const CL3_BLADES: usize = 8;

/// The Cl(3,0) geometric-product kernel.
pub fn geometric_cl3_kernel() -> Kernel {
    Kernel {
        inputs: vec![Input::PerItem(CL3_BLADES), Input::PerItem(CL3_BLADES)],
        output: Output::PerItem(CL3_BLADES),
        // 64 products and 56 sums.
        flops_per_item: 120.0,
        host: Some(Arc::new(Cl3Product)),
        ..Kernel::map(
            "geometric_cl3",
            Family::GeometricAlgebra,
            shaders::GEOMETRIC_CL3,
        )
    }
}

/// Float64 reference of the Cl(3,0) geometric product, for tests and benchmarks.
pub fn geometric_product_cl3_reference(a: &[f64; 8], b: &[f64; 8]) -> [f64; 8] {
    let mut out = [0.0; 8];
    for (i, &x) in a.iter().enumerate() {
        for (j, &y) in b.iter().enumerate() {
            out[i ^ j] += f64::from(algebra::reorder_sign(i, j)) * x * y;
        }
    }
    out
}
