//! Laying bands out and moving them: creating a layout's bands and filling their rows, and
//! changing to a new split, where rows that stay on their device are copied there and only
//! the rows a band needs from another device go through the host. Also what a move costs
//! (the rows that change device), which the balancer weighs against its gain. Written once
//! against the device interface's band storage, for bands on devices of any kind.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::ops::Range;

use super::attempt::{Attempt, DeviceBands, Failure, States};
use super::bands::{self, Band, Geometry};
use super::round::Readback;
use super::state::{board_runs, BandProgram};
use crate::runner::bands::RowMove;
use crate::runner::bands_on;

/// Where each grid row is in `states`: (device, band index on it, buffer row).
fn owners(states: &States, height: usize) -> Vec<(usize, usize, usize)> {
    let mut owner = vec![(usize::MAX, 0, 0); height];
    for (&device, list) in states {
        for (i, band) in list.bands.iter().enumerate() {
            for (k, row) in band.rows.clone().enumerate() {
                owner[row] = (device, i, band.above + k);
            }
        }
    }
    owner
}

/// Where the buffer rows of `band` (on device `id`) come from, as runs in buffer order:
/// (buffer rows, `Some((band index, first buffer row))` of a band of the old layout on the
/// same device, or `None` for rows from the board).
type Sources = Vec<(Range<usize>, Option<(usize, usize)>)>;

fn sources(band: &Band, g: Geometry, owner: Option<&[(usize, usize, usize)]>) -> Sources {
    let id = band.device;
    let source = |l: usize| {
        let (d, i, at) = owner?[band.global_row(l, g)];
        (d == id).then_some((i, at))
    };
    let rows = band.buffer_rows();
    let mut out = Vec::new();
    let mut local = 0;
    while local < rows {
        // The longest run of buffer rows from one source: consecutive rows of one band of
        // the old layout on this device, or rows from the board.
        let first = source(local);
        let mut n = 1;
        while local + n < rows
            && match (first, source(local + n)) {
                (Some((i, at)), Some((j, bt))) => i == j && bt == at + n,
                (None, None) => true,
                _ => false,
            }
        {
            n += 1;
        }
        out.push((local..local + n, first));
        local += n;
    }
    out
}

impl<'a> Attempt<'a> {
    /// The bands of `split`, each within one binding of its device.
    pub(super) fn bands_of(
        &self,
        split: &[(usize, usize)],
    ) -> std::result::Result<Vec<bands::Band>, Failure> {
        let devices = self.ctx.devices();
        let row_bytes = self.spec.row_bytes as u64;
        let max_rows = |id: usize| (devices[id].max_binding_bytes() / row_bytes) as usize;
        Ok(bands::layout(split, self.spec.geometry, &max_rows)?)
    }

    /// Creates `layout`'s bands and fills their rows (ghosts included): by a device-side
    /// copy from a band of `old` on the same device where there is one, else from `board`.
    /// With `lend` (`board` is the caller's grid, unchanged until the first round ends), a
    /// device whose store reads uploads in place gets no rows now: its bands are marked
    /// `lent`, and the first round hands it every buffer row from the board.
    pub(super) fn build(
        &self,
        layout: Vec<bands::Band>,
        board: &[u8],
        current: usize,
        (old, lend): (Option<&States<'a>>, bool),
    ) -> std::result::Result<States<'a>, Failure> {
        let devices = self.ctx.devices();
        let spec = self.spec;
        let g = spec.geometry;
        let owner = old.map(|o| owners(o, g.height));
        let mut states: States<'a> = BTreeMap::new();
        for band in layout {
            let id = band.device;
            let dev = &devices[id];
            let fail = |error| Failure {
                device: Some(id),
                error,
            };
            let runs = sources(&band, g, owner.as_deref());
            let previous = old.and_then(|o| o.get(&id));
            let on = match states.entry(id) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let store = bands_on(dev, &self.kernel).map_err(fail)?;
                    e.insert(DeviceBands {
                        bands: Vec::new(),
                        lent: lend && old.is_none() && store.reads_uploads_in_place(),
                        store,
                    })
                }
            };
            let index = on.bands.len();
            let program = BandProgram {
                band: band.clone(),
                spec: *spec,
                // Only a first layout's passes read the caller's grid.
                scan: self.scan.clone().filter(|_| lend && old.is_none()),
            };
            on.store
                .push(band.buffer_rows(), spec.row_bytes, Box::new(program))
                .map_err(fail)?;
            let mut uploaded = 0;
            for (rows, from) in runs {
                match (from, previous) {
                    (Some((i, at)), Some(previous)) => {
                        let moved = RowMove {
                            band: index,
                            from_band: i,
                            from_row: at,
                            to_row: rows.start,
                            rows: rows.len(),
                        };
                        on.store
                            .copy_from(&*previous.store, moved, current)
                            .map_err(Failure::from)?;
                    }
                    // Left on the board: the first round uploads them.
                    _ if on.lent => {}
                    _ => {
                        for (at, bytes) in board_runs(&band, rows, spec, board) {
                            on.store.write(index, current, at, bytes);
                            uploaded += bytes.len() as u64;
                        }
                    }
                }
            }
            on.bands.push(band);
            dev.counters.chunk_done(0, uploaded, 0);
        }
        for on in states.values_mut() {
            on.store.submit();
        }
        Ok(states)
    }

    /// Moves from `old` to the bands of `split`. Only the rows a new band needs from a band
    /// on another device come down to `board` (and go up again); rows that stay on their
    /// device are copied there.
    pub(super) fn relayout(
        &self,
        mut old: States<'a>,
        split: &[(usize, usize)],
        board: &mut [u8],
        current: usize,
    ) -> std::result::Result<States<'a>, Failure> {
        let g = self.spec.geometry;
        let layout = self.bands_of(split)?;
        let owner = owners(&old, g.height);
        let mut needed: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for band in &layout {
            for local in 0..band.buffer_rows() {
                let (d, i, at) = owner[band.global_row(local, g)];
                if d != band.device {
                    needed.entry((d, i)).or_default().push(at);
                }
            }
        }
        let mut wanted: BTreeMap<usize, Vec<Vec<Range<usize>>>> = BTreeMap::new();
        for (&device, list) in &old {
            let per_band = (0..list.bands.len())
                .map(|i| {
                    let mut rows = needed.remove(&(device, i)).unwrap_or_default();
                    rows.sort_unstable();
                    rows.dedup();
                    runs(&rows)
                })
                .collect();
            wanted.insert(device, per_band);
        }
        self.fetch(&mut old, board, current, &Readback::Rows(&wanted))?;
        let states = self.build(layout, board, current, (Some(&old), false))?;
        // The copies out of the old bands are submitted; wgpu keeps their buffers alive
        // until those copies have run, and the pool hands them out only after this drop.
        drop(old);
        Ok(states)
    }
}

/// Rows that change device between two splits (in device order, contiguous), counting the
/// ghost rows each new boundary needs: what a move sends through the host.
pub fn moved_rows(from: &[(usize, usize)], to: &[(usize, usize)], halo: usize) -> usize {
    let ranges = |split: &[(usize, usize)]| {
        let mut start = 0;
        split
            .iter()
            .map(|&(d, n)| {
                start += n;
                (d, start - n..start)
            })
            .collect::<Vec<_>>()
    };
    let (a, b) = (ranges(from), ranges(to));
    let height: usize = to.iter().map(|s| s.1).sum();
    let kept: usize = b
        .iter()
        .map(|(d, r)| {
            a.iter()
                .filter(|(e, _)| e == d)
                .map(|(_, s)| r.end.min(s.end).saturating_sub(r.start.max(s.start)))
                .sum::<usize>()
        })
        .sum();
    height - kept + 2 * halo * to.iter().filter(|s| s.1 > 0).count()
}

/// Sorted distinct numbers as runs of consecutive ones.
fn runs(sorted: &[usize]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for &x in sorted {
        match out.last_mut() {
            Some(r) if r.end == x => r.end += 1,
            _ => out.push(x..x + 1),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{moved_rows, runs};

    #[test]
    fn runs_group_consecutive_rows() {
        assert_eq!(runs(&[]), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10]), vec![1..4, 7..8, 9..11]);
    }

    #[test]
    fn moved_rows_count_rows_changing_device_and_the_new_ghosts() {
        let from = [(0, 90), (1, 10)];
        assert_eq!(moved_rows(&from, &from, 1), 4);
        assert_eq!(moved_rows(&from, &[(0, 50), (1, 50)], 2), 40 + 8);
        assert_eq!(moved_rows(&from, &[(0, 0), (1, 100)], 1), 90 + 2);
    }
}
