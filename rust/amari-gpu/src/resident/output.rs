//! Where a call's result goes, by one rule for every operation: a call on host operands
//! writes host words; a call with a resident operand gives a resident result (a new array
//! with that operand's sharding, or written into a resident `out`, which keeps its own), or
//! gathers it into host words the caller gave.

use super::array::ResidentArray;
use super::run::Operand;
use crate::context::MultiGpuContext;
use crate::error::Result;
use crate::kernel::Kernel;
use crate::plan::Plan;

/// The destination of a call's result.
pub enum Destination<'a> {
    /// Host words of the result's shape.
    Host(&'a mut [f32]),
    /// A new resident array (`None`), or this resident array of the result's rows.
    Resident(Option<&'a ResidentArray>),
}

/// What a call gives back besides what it wrote.
#[derive(Default)]
pub struct Outcome {
    /// The plan followed (a run over host operands).
    pub plan: Option<Plan>,
    /// The new resident result (for [`Destination::Resident`]`(None)`).
    pub array: Option<ResidentArray>,
}

impl MultiGpuContext {
    /// Runs `kernel` (per-item output) on `operands`, at least one resident, into `out`:
    /// [`run_resident`](Self::run_resident) for a new array, its `_into` twin for a resident
    /// `out`, or a new array gathered into host words and released.
    pub fn run_resident_to(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
        out: Destination<'_>,
    ) -> Result<Outcome> {
        match out {
            Destination::Resident(Some(out)) => {
                self.run_resident_into(kernel, operands, out)?;
                Ok(Outcome::default())
            }
            Destination::Resident(None) => Ok(Outcome {
                plan: None,
                array: Some(self.run_resident(kernel, operands)?),
            }),
            Destination::Host(out) => {
                let array = self.run_resident(kernel, operands)?;
                self.gather(&array, out)?;
                Ok(Outcome::default())
            }
        }
    }
}
