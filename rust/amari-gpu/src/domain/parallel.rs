//! A round on every device at once, one thread each (a device's round, of either kind, is
//! in `round`), and reading rows back without steps: the final download and the rows a new
//! layout moves through the host.

use std::collections::BTreeMap;

use super::attempt::{Attempt, Failure, States};
use super::round::{place, run, DeviceRound, Readback, Round};
use crate::error::Result;
use crate::gpu_io::lost;

impl<'a> Attempt<'a> {
    /// Reads `readback`'s rows of every band (no steps) and places them on `board`.
    pub(super) fn fetch(
        &self,
        states: &mut States<'a>,
        board: &mut [u8],
        current: usize,
        readback: &Readback<'_>,
    ) -> std::result::Result<(), Failure> {
        let round = Round {
            board,
            current,
            steps: 0,
            fresh: true,
            readback,
            timeout: self.timeout,
            interrupt: crate::interrupt::current(),
        };
        let outcomes = self.run_round(states, &round, &BTreeMap::new());
        for (id, outcome) in outcomes {
            let r = outcome.map_err(|error| Failure {
                device: Some(id),
                error,
            })?;
            place(board, self.spec, &r);
        }
        Ok(())
    }

    /// Runs `round` on every device with bands, each on its own thread, timed with GPU
    /// timestamps where `stamped` says.
    pub(super) fn run_round(
        &self,
        states: &mut States<'a>,
        round: &Round<'_>,
        stamped: &BTreeMap<usize, bool>,
    ) -> Vec<(usize, Result<DeviceRound>)> {
        let devices = self.ctx.devices();
        let spec = self.spec;
        std::thread::scope(|scope| {
            let handles: Vec<_> = states
                .iter_mut()
                .map(|(&id, bands)| {
                    let dev = &devices[id];
                    let timed = stamped.get(&id).copied().unwrap_or(false);
                    let handle = scope.spawn(move || run(dev, bands, spec, round, timed));
                    (id, handle)
                })
                .collect();
            handles
                .into_iter()
                .map(|(id, h)| {
                    let outcome = h
                        .join()
                        .unwrap_or_else(|_| Err(lost(id, "the device's round panicked")));
                    (id, outcome)
                })
                .collect()
        })
    }
}
