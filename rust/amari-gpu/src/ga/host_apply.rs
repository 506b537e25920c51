//! A whole geometric-algebra call on the host, outside the executor: the operands checked as
//! `ga::apply` checks them, then one [`GaKernel`] run over every item (for tests and
//! benchmarks that compare the host with the devices).

use super::algebra::Algebra;
use super::run::bound_whole;
use super::sandwich_map::matrix;
use super::host::GaKernel;
use super::operation::Operation;
use crate::kernel::FmaMode;
use crate::kernel::HostImpl;

/// Runs `op` in `algebra` over whole operands on the host, as `ga::apply` does on
/// the devices (for tests and benchmarks; the executor calls [`GaKernel::run`] per chunk).
pub fn apply_host(
    algebra: &Algebra,
    op: Operation,
    operands: &[&[f32]],
    out: &mut [f32],
    fma: FmaMode,
) -> crate::error::Result<()> {
    let (items, broadcast) = crate::ga::shape(algebra, op, operands)?;
    let broadcast = bound_whole(op, items, broadcast);
    let kernel = GaKernel::new(*algebra, op, broadcast, fma);
    // A sandwich by one rotor binds the rotor's map in its place (restricted to the rows'
    // blades), as `ga::check` does.
    let map;
    let mut operands = operands.to_vec();
    if broadcast.is_map(op) {
        let full = matrix(algebra, &operands[0][..algebra.blades()]);
        map = op.blades(algebra).restrict::<f32>(&full, algebra.blades())?;
        operands[0] = &map;
    }
    if out.len() != items * kernel.output_words() {
        return Err(crate::error::Error::Shape {
            argument: "out".into(),
            expected: format!("({items}, {})", kernel.output_words()),
            actual: format!("{} floats", out.len()),
        });
    }
    kernel.run(&operands, 0..items, out);
    Ok(())
}
