//! Geometric-algebra kernels: batches of multivectors of Cl(p, q, r), p + q + r ≤ 6, in
//! bitmask blade order. The kernels are generated at run time from the algebra's
//! multiplication table ([`codegen`]), one per algebra, operation and broadcast, and run
//! through the engine like any other ([`apply`]). The static Cl(3,0) product in
//! `shaders/geometric_cl3.wgsl` stays as the family's calibration reference.

pub mod algebra;
pub mod codegen;
pub mod kernels;
pub mod operation;

pub use algebra::Algebra;
pub use codegen::{generate, Broadcast};
pub use kernels::{apply, kernel, shape};
pub use operation::Operation;

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::kernel::{Input, Kernel, Output};
use crate::plan::{Plan, Strategy};
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
        ..Kernel::map("geometric_cl3", "geometric_algebra", shaders::GEOMETRIC_CL3)
    }
}

fn check_batch(argument: &str, data: &[f32]) -> Result<usize> {
    if !data.len().is_multiple_of(CL3_BLADES) {
        return Err(Error::Shape {
            argument: argument.to_string(),
            expected: format!("(N, {CL3_BLADES})"),
            actual: format!("{} floats, not a multiple of {CL3_BLADES}", data.len()),
        });
    }
    Ok(data.len() / CL3_BLADES)
}

/// `out[i] = a[i] b[i]` in Cl(3,0) for flat row-major batches of shape (N, 8).
pub fn geometric_product_cl3(
    ctx: &MultiGpuContext,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let n = check_batch("a", a)?;
    let nb = check_batch("b", b)?;
    if nb != n {
        return Err(Error::Shape {
            argument: "b".into(),
            expected: format!("({n}, {CL3_BLADES}) like a"),
            actual: format!("({nb}, {CL3_BLADES})"),
        });
    }
    if out.len() != a.len() {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({n}, {CL3_BLADES})"),
            actual: format!("{} floats", out.len()),
        });
    }
    ctx.run_map(&geometric_cl3_kernel(), &[a, b], out, n, strategy)
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
