//! Where a call's result goes, by one rule for every operation: a call on host operands
//! writes host words; a call with a resident operand gives a resident result (a new array
//! with that operand's sharding, or written into a resident `out`, which keeps its own), or
//! gathers it into host words the caller gave.

use super::array::ResidentArray;
use super::pieces::Operand;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::plan::{Plan, Strategy};

/// The destination of a call's result.
pub enum Destination<'a> {
    /// Host words of the result's shape.
    Host(&'a mut [f32]),
    /// A new resident array (`None`), or this resident array of the result's rows.
    Resident(Option<&'a ResidentArray>),
}

/// What runs a call whose operands passed their checks.
type Run<'a> =
    dyn FnOnce(&MultiGpuContext, Destination<'_>, Option<Strategy>) -> Result<Outcome> + Send + 'a;

/// A call whose operands passed every check but its destination's, ready to run: what the
/// bindings check before they take the caller's `out`, so that an argument error never
/// reads as a call that began writing (and a kernel that does not compile costs nothing).
pub struct Ready<'a> {
    run: Box<Run<'a>>,
}

impl<'a> Ready<'a> {
    /// The call `run` makes.
    pub fn new(
        run: impl FnOnce(&MultiGpuContext, Destination<'_>, Option<Strategy>) -> Result<Outcome>
            + Send
            + 'a,
    ) -> Self {
        Ready { run: Box::new(run) }
    }

    /// Runs the call on `ctx` into `out` (its destination checked first); `strategy`
    /// splits host operands.
    pub fn run(
        self,
        ctx: &MultiGpuContext,
        out: Destination<'_>,
        strategy: Option<Strategy>,
    ) -> Result<Outcome> {
        (self.run)(ctx, out, strategy)
    }
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

    /// Runs the map `kernel` (per-item output) over `operands` into `out` by the one rule
    /// of every map operation: where a resident operand lives
    /// ([`run_resident_to`](Self::run_resident_to)), else over host words through the
    /// planner (`items` items, split by `strategy`), the plan returned.
    pub fn run_map_to(
        &self,
        kernel: &Kernel,
        operands: &[(&str, Operand<'_>)],
        items: usize,
        out: Destination<'_>,
        strategy: Option<Strategy>,
    ) -> Result<Outcome> {
        if let Destination::Host(out) = &out {
            let words = kernel.output_words_per_item();
            if out.len() != items * words {
                return Err(Error::Shape {
                    argument: "out".into(),
                    expected: format!("({items}, {words})"),
                    actual: format!("{} floats", out.len()),
                });
            }
        }
        let mut host = Vec::with_capacity(operands.len());
        for (_, operand) in operands {
            match operand {
                Operand::Host(data) => host.push(*data),
                Operand::Resident(_) => return self.run_resident_to(kernel, operands, out),
            }
        }
        let Destination::Host(out) = out else {
            return Err(Error::invalid(
                "out",
                "expected a numpy array or None (a DeviceArray out is taken when an operand is \
                 a DeviceArray), got DeviceArray",
            ));
        };
        let plan = self.run_map(kernel, &host, out, items, strategy)?;
        Ok(Outcome {
            plan: Some(plan),
            array: None,
        })
    }
}
