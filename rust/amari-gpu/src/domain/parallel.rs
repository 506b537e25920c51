//! A round on every device at once, one thread each (a device's round, of either kind, is
//! in `round`), and reading rows back without steps: the final download and the rows a new
//! layout moves through the host.

use std::collections::BTreeMap;

use super::attempt::{Attempt, Failure, States};
use super::bands::Band;
use super::round::{run, wanted_rows, DeviceRound, Readback, Round};
use super::state::Spec;
use crate::error::{Error, Result};
use crate::gpu_io::lost;

impl<'a> Attempt<'a> {
    /// Reads `readback`'s rows of every band (no steps) straight into their place on
    /// `board`: each device's rows are copied on its own thread (a host band's on the host
    /// device's threads), with no rows in between. The places are disjoint (a row is read
    /// from the one band that owns it).
    pub(super) fn fetch(
        &self,
        states: &mut States<'a>,
        board: &mut [u8],
        current: usize,
        readback: &Readback<'_>,
    ) -> std::result::Result<(), Failure> {
        let into = places(self.spec, states, board, readback).map_err(|error| Failure {
            device: None,
            error,
        })?;
        let round = Round {
            // No uploads (fresh): the board is only written, through `into`.
            board: &[],
            current,
            steps: 0,
            fresh: true,
            readback,
            timeout: self.timeout,
            interrupt: crate::interrupt::current(),
        };
        let outcomes = self.run_round(states, &round, &BTreeMap::new(), into);
        for (id, outcome) in outcomes {
            outcome.map_err(|error| Failure {
                device: Some(id),
                error,
            })?;
        }
        Ok(())
    }

    /// Runs `round` on every device with bands, each on its own thread, timed with GPU
    /// timestamps where `stamped` says, a device's rows read back into its places in
    /// `into` where it has them (see [`run`]).
    pub(super) fn run_round(
        &self,
        states: &mut States<'a>,
        round: &Round<'_>,
        stamped: &BTreeMap<usize, bool>,
        mut into: BTreeMap<usize, Vec<&mut [u8]>>,
    ) -> Vec<(usize, Result<DeviceRound>)> {
        let devices = self.ctx.devices();
        let spec = self.spec;
        // Each device's round as a closure over its bands and places, run on this thread
        // or a thread of its own; a panic in it is the device's failure either way.
        let rounds: Vec<_> = states
            .iter_mut()
            .map(|(&id, bands)| {
                let dev = &devices[id];
                let timed = stamped.get(&id).copied().unwrap_or(false);
                let places = into.remove(&id).unwrap_or_default();
                (id, move || run(dev, bands, spec, round, timed, places))
            })
            .collect();
        let panicked = |id| Err(lost(id, "the device's round panicked"));
        // One device (a host-only context, or a grid small enough for one band): its round
        // runs here, without a thread to spawn and join (about 90 µs).
        if rounds.len() == 1 {
            return rounds
                .into_iter()
                .map(|(id, one)| {
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(one));
                    (id, outcome.unwrap_or_else(|_| panicked(id)))
                })
                .collect();
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = rounds
                .into_iter()
                .map(|(id, one)| (id, scope.spawn(one)))
                .collect();
            handles
                .into_iter()
                .map(|(id, h)| (id, h.join().unwrap_or_else(|_| panicked(id))))
                .collect()
        })
    }
}

/// The place on `board` of every range `readback` reads, by device, in the order each
/// device reads its ranges: the board cut into disjoint slices. Ranges that overlap or leave
/// the board are an internal error.
pub(super) fn places<'b>(
    spec: &Spec,
    states: &States<'_>,
    board: &'b mut [u8],
    readback: &Readback<'_>,
) -> Result<BTreeMap<usize, Vec<&'b mut [u8]>>> {
    let (g, rb) = (spec.geometry, spec.row_bytes);
    // (first byte, bytes, device, index among the device's ranges)
    let mut wanted = Vec::new();
    for (&id, bands) in states.iter() {
        let refs: Vec<&Band> = bands.bands.iter().collect();
        let ranges = wanted_rows(id, &refs, readback, g);
        let each = refs.iter().zip(&ranges).flat_map(|(band, rs)| {
            rs.iter()
                .map(|r| (band.global_row(r.start, g) * rb, r.len() * rb))
        });
        for (k, (at, len)) in each.enumerate() {
            wanted.push((at, len, id, k));
        }
    }
    carve(board, wanted)
}

/// `board` cut at `wanted` (first byte, bytes, device, index among the device's ranges):
/// per device, its slices in index order. Ranges that overlap or leave the board are an
/// internal error, never a panic.
fn carve(
    board: &mut [u8],
    mut wanted: Vec<(usize, usize, usize, usize)>,
) -> Result<BTreeMap<usize, Vec<&mut [u8]>>> {
    wanted.sort_unstable();
    let mut by_device: BTreeMap<usize, Vec<(usize, &mut [u8])>> = BTreeMap::new();
    let (mut rest, mut offset) = (board, 0);
    for (at, len, id, k) in wanted {
        if len == 0 {
            by_device
                .entry(id)
                .or_default()
                .push((k, Default::default()));
            continue;
        }
        if at < offset || at - offset > rest.len() || len > rest.len() - (at - offset) {
            return Err(Error::Internal(format!(
                "rows read back at byte {at} ({len} bytes) overlap others or leave the board"
            )));
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(at - offset);
        let (place, tail) = tail.split_at_mut(len);
        rest = tail;
        offset = at + len;
        by_device.entry(id).or_default().push((k, place));
    }
    Ok(by_device
        .into_iter()
        .map(|(id, mut list)| {
            list.sort_unstable_by_key(|&(k, _)| k);
            (id, list.into_iter().map(|(_, place)| place).collect())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each device's ranges come out as its slices of the board, in the order it reads
    /// them, whatever their order on the board; empty ranges are empty slices anywhere.
    #[test]
    fn read_back_ranges_are_disjoint_places_on_the_board() {
        let mut board: Vec<u8> = (0..40).collect();
        let wanted = vec![
            (30, 10, 1, 0),
            (0, 8, 2, 1),
            (8, 4, 1, 1),
            (12, 0, 2, 0),
            (20, 5, 2, 2),
        ];
        let places = carve(&mut board, wanted).expect("disjoint");
        let got: Vec<(usize, Vec<Vec<u8>>)> = places
            .into_iter()
            .map(|(id, list)| (id, list.into_iter().map(|p| p.to_vec()).collect()))
            .collect();
        let r = |a: u8, b: u8| (a..b).collect::<Vec<u8>>();
        assert_eq!(
            got,
            vec![
                (1, vec![r(30, 40), r(8, 12)]),
                (2, vec![vec![], r(0, 8), r(20, 25)]),
            ]
        );
    }

    /// Overlapping ranges, or a range past the board's end, are refused before any byte is
    /// written.
    #[test]
    fn overlapping_or_outside_ranges_are_an_internal_error() {
        let mut board = vec![7u8; 16];
        for wanted in [
            vec![(0, 8, 0, 0), (4, 8, 1, 0)],
            vec![(12, 8, 0, 0)],
            vec![(usize::MAX, 1, 0, 0)],
            vec![(4, usize::MAX, 0, 0)],
        ] {
            match carve(&mut board, wanted.clone()) {
                Err(Error::Internal(m)) => assert!(m.contains("overlap others or leave"), "{m}"),
                other => panic!("{wanted:?}: expected Internal, got {:?}", other.map(|_| ())),
            }
        }
        assert_eq!(board, vec![7u8; 16]);
    }
}
