//! Row bands of a 2-D grid: which device holds which rows, the ghost rows each band keeps
//! around them, which of its rows each step may compute, and which rows it hands back to
//! the host for its neighbours. Pure arithmetic; the GPU side is in `state`.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::partition::apportion::apportion;

/// The grid's shape and how bands see past their edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Rows of the whole grid.
    pub height: usize,
    /// Steps a band runs between exchanges, and so ghost rows on each side.
    pub halo: usize,
    /// Whether rows wrap (periodic, torus) or the outer rows are fixed (Dirichlet).
    pub periodic: bool,
}

/// Rows `rows` of the grid held by `device`, with `above` and `below` ghost rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Band {
    /// Device holding the band.
    pub device: usize,
    /// Rows the band owns.
    pub rows: Range<usize>,
    /// Ghost rows kept above the owned rows.
    pub above: usize,
    /// Ghost rows kept below.
    pub below: usize,
}

impl Band {
    /// The band of `rows` on `device`: `halo` ghost rows on each side, fewer where a
    /// Dirichlet grid ends (a fixed outer row needs nothing beyond it).
    pub fn new(device: usize, rows: Range<usize>, g: Geometry) -> Self {
        let (above, below) = if g.periodic {
            (g.halo, g.halo)
        } else {
            (g.halo.min(rows.start), g.halo.min(g.height - rows.end))
        };
        Band {
            device,
            rows,
            above,
            below,
        }
    }

    /// Rows owned.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True for a band without rows (never built by [`layout`]).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Rows of the band's device buffers: ghosts and owned rows.
    pub fn buffer_rows(&self) -> usize {
        self.above + self.len() + self.below
    }

    /// Buffer rows of the owned rows.
    pub fn owned_rows(&self) -> Range<usize> {
        self.above..self.above + self.len()
    }

    /// Grid row held in buffer row `local` (ghost rows of a periodic grid wrap).
    pub fn global_row(&self, local: usize, g: Geometry) -> usize {
        let h = g.height as isize;
        (self.rows.start as isize - self.above as isize + local as isize).rem_euclid(h) as usize
    }

    /// Grid row of buffer row 0 on a Dirichlet grid (never negative there).
    pub fn first_row(&self) -> usize {
        self.rows.start - self.above
    }

    fn top_fixed(&self, g: Geometry) -> bool {
        !g.periodic && self.first_row() == 0
    }

    fn bottom_fixed(&self, g: Geometry) -> bool {
        !g.periodic && self.rows.end + self.below == g.height
    }

    /// Buffer rows that step `k` (1-based, counted from the last exchange) computes. Each
    /// step loses one more row at each ghost edge, whose neighbours are stale; an edge on a
    /// Dirichlet frame loses nothing because its outer row never changes.
    pub fn step_rows(&self, k: usize, g: Geometry) -> Range<usize> {
        let lo = if self.top_fixed(g) { 0 } else { k };
        let hi = self.buffer_rows() - if self.bottom_fixed(g) { 0 } else { k };
        lo..hi
    }

    /// Buffer rows handed back after a round for the neighbours' ghosts: the first and last
    /// `halo` owned rows (all of them when the band is thinner than two halos). Every ghost
    /// row of every band is among some band's border rows.
    pub fn border_rows(&self, g: Geometry) -> Vec<Range<usize>> {
        let (start, n) = (self.above, self.len());
        if n <= 2 * g.halo {
            return std::iter::once(start..start + n).collect();
        }
        vec![start..start + g.halo, start + n - g.halo..start + n]
    }

    /// Buffer rows `rows` as runs whose grid rows are consecutive on the host board:
    /// (buffer rows, grid row of the first), in buffer order. Ghost rows of a periodic grid
    /// break a run where they wrap.
    pub fn board_runs(&self, rows: Range<usize>, g: Geometry) -> Vec<(Range<usize>, usize)> {
        let mut runs = Vec::new();
        let mut local = rows.start;
        while local < rows.end {
            let first = self.global_row(local, g);
            let mut n = 1;
            while local + n < rows.end
                && first + n < g.height
                && self.global_row(local + n, g) == first + n
            {
                n += 1;
            }
            runs.push((local..local + n, first));
            local += n;
        }
        runs
    }

    /// Buffer rows that are ghosts, as (buffer rows, first grid row) runs.
    pub fn ghost_rows(&self) -> [Range<usize>; 2] {
        let end = self.above + self.len();
        [0..self.above, end..end + self.below]
    }
}

/// Splits `height` rows over devices in proportion to `weights` (zero: no rows).
pub fn split_rows(height: usize, weights: &[f64]) -> Vec<usize> {
    let caps = vec![u64::MAX; weights.len()];
    apportion(height as u64, weights, &caps)
        .into_iter()
        .map(|n| n as usize)
        .collect()
}

/// Checks a caller's `split` (rows per device, for each of `devices` devices) against a
/// grid of `height` rows: one entry per device, each at most `height`, adding up to
/// `height` exactly. The sum is checked, never wrapped: values whose sum wraps past 2^64 to
/// `height` would otherwise pass and have [`layout`] cut billions of bands.
pub fn check_split(split: &[usize], devices: usize, height: usize) -> Result<()> {
    if split.len() != devices {
        return Err(Error::invalid(
            "split",
            format!(
                "expected rows for each of the {devices} devices, got {} entries",
                split.len()
            ),
        ));
    }
    if let Some((id, &rows)) = split.iter().enumerate().find(|(_, &r)| r > height) {
        return Err(Error::invalid(
            "split",
            format!(
                "expected at most the grid's {height} rows per device, got {rows} for device {id}"
            ),
        ));
    }
    // Each entry is at most `height`, so the sum fits a u128 whatever the entries.
    let total: u128 = split.iter().map(|&r| r as u128).sum();
    if total != height as u128 {
        return Err(Error::invalid(
            "split",
            format!("expected rows adding up to the grid's {height} rows, got {total}"),
        ));
    }
    Ok(())
}

/// The rows per healthy device of a caller's `split`, as a run's first layout takes them:
/// `split` checked by [`check_split`] against `devices` devices and `height` rows, and
/// refused when it gives rows to a device not in `healthy` (ids below `devices`), which
/// takes no part in the run.
pub fn caller_split(
    split: &[usize],
    devices: usize,
    healthy: &[usize],
    height: usize,
) -> Result<Vec<(usize, usize)>> {
    check_split(split, devices, height)?;
    if let Some(&id) = healthy.iter().find(|&&id| id >= devices) {
        return Err(Error::invalid(
            "healthy",
            format!("expected device ids below {devices}, got {id}"),
        ));
    }
    if let Some(id) = (0..devices).find(|&i| split[i] > 0 && !healthy.contains(&i)) {
        return Err(Error::invalid(
            "split",
            format!("device {id} is not healthy and cannot be given rows"),
        ));
    }
    Ok(healthy.iter().map(|&id| (id, split[id])).collect())
}

/// The bands of a split: each device's rows in device order, contiguous, cut into as few
/// bands as keep every band's buffer (ghosts included) within `max_rows(device)` rows.
pub fn layout(
    rows_per_device: &[(usize, usize)],
    g: Geometry,
    max_rows: &dyn Fn(usize) -> usize,
) -> Result<Vec<Band>> {
    // The split's rows must tile the grid: a larger total would cut bands past its end
    // (each a device buffer), a sum that wraps would pass as the grid's height.
    let total = rows_per_device
        .iter()
        .try_fold(0usize, |total, &(_, rows)| total.checked_add(rows));
    if total != Some(g.height) {
        return Err(Error::Internal(format!(
            "a split of {rows_per_device:?} does not tile a grid of {} rows",
            g.height
        )));
    }
    let mut bands = Vec::new();
    let mut start = 0;
    for &(device, rows) in rows_per_device {
        if rows == 0 {
            continue;
        }
        let room = max_rows(device).saturating_sub(2 * g.halo);
        if room == 0 {
            return Err(Error::invalid(
                "grid",
                format!(
                    "a row with its {} ghost rows on each side does not fit one buffer \
                     binding of device {device} ({} rows at most); use a smaller halo or \
                     narrower grid",
                    g.halo,
                    max_rows(device)
                ),
            ));
        }
        let pieces = rows.div_ceil(room);
        bands
            .try_reserve(pieces)
            .map_err(|_| Error::HostOutOfMemory {
                argument: "split".into(),
                bytes: pieces as u128 * std::mem::size_of::<Band>() as u128,
            })?;
        for p in 0..pieces {
            // Even pieces, the larger ones first.
            let n = rows / pieces + usize::from(p < rows % pieces);
            bands.push(Band::new(device, start..start + n, g));
            start += n;
        }
    }
    Ok(bands)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(height: usize, halo: usize, periodic: bool) -> Geometry {
        Geometry {
            height,
            halo,
            periodic,
        }
    }

    #[test]
    fn dirichlet_bands_have_no_ghosts_past_the_frame() {
        let g = geometry(10, 2, false);
        let top = Band::new(0, 0..4, g);
        assert_eq!((top.above, top.below), (0, 2));
        assert_eq!(top.step_rows(1, g), 0..5);
        assert_eq!(top.step_rows(2, g), 0..4);
        let middle = Band::new(1, 4..5, g);
        assert_eq!((middle.above, middle.below), (2, 2));
        assert_eq!(middle.step_rows(2, g), 2..3);
        let near_top = Band::new(1, 1..5, geometry(10, 4, false));
        assert_eq!((near_top.above, near_top.first_row()), (1, 0));
        assert_eq!(near_top.step_rows(4, geometry(10, 4, false)), 0..5);
    }

    #[test]
    fn periodic_ghosts_wrap_even_past_a_tiny_grid() {
        let g = geometry(3, 4, true);
        let band = Band::new(0, 0..3, g);
        let rows: Vec<usize> = (0..band.buffer_rows())
            .map(|i| band.global_row(i, g))
            .collect();
        assert_eq!(rows, [2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(band.step_rows(4, g), 4..7);
    }

    /// After a round of `halo` steps the owned rows were computed at every step, and every
    /// ghost row is some band's border row, for any split.
    #[test]
    fn rounds_keep_owned_rows_valid_and_borders_cover_every_ghost() {
        for periodic in [false, true] {
            for height in 1..14 {
                for halo in 1..5 {
                    let g = geometry(height, halo, periodic);
                    for devices in 1..5 {
                        let split = split_rows(height, &vec![1.0; devices]);
                        let pairs: Vec<(usize, usize)> = split.into_iter().enumerate().collect();
                        let bands = layout(&pairs, g, &|_| 3 + 2 * halo).unwrap();
                        let mut border = vec![false; height];
                        for b in &bands {
                            for r in b.border_rows(g) {
                                for local in r {
                                    border[b.global_row(local, g)] = true;
                                }
                            }
                        }
                        for b in &bands {
                            assert!(b.buffer_rows() <= 3 + 2 * halo);
                            let owned = b.above..b.above + b.len();
                            for k in 1..=halo {
                                let s = b.step_rows(k, g);
                                assert!(s.start <= owned.start && owned.end <= s.end);
                            }
                            for ghosts in b.ghost_rows() {
                                for local in ghosts {
                                    assert!(border[b.global_row(local, g)], "{b:?} {g:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn board_runs_break_where_periodic_ghosts_wrap() {
        let g = geometry(5, 2, true);
        let band = Band::new(0, 0..2, g);
        // Buffer rows hold grid rows 3, 4, 0, 1, 2, 3.
        assert_eq!(band.board_runs(0..6, g), [(0..2, 3), (2..6, 0)]);
        assert_eq!(band.board_runs(1..3, g), [(1..2, 4), (2..3, 0)]);
        assert_eq!(band.board_runs(3..3, g), []);
    }

    #[test]
    fn a_row_too_wide_for_one_binding_is_refused() {
        let g = geometry(8, 2, true);
        let err = layout(&[(0, 8)], g, &|_| 4).unwrap_err();
        assert!(err.to_string().contains("ghost rows"), "{err}");
    }

    /// Entries whose sum wraps past 2^64 to the grid's height, entries larger than the
    /// grid, a wrong count and a short sum are refused naming `split` (the wrapping sum used
    /// to pass, and laying it out grew a list of bands until the process was killed).
    #[test]
    fn a_split_that_does_not_tile_the_grid_is_refused() {
        let half = 1usize << 63;
        let cases: [(&[usize], &str); 6] = [
            (
                &[half + 4, half + 4],
                "at most the grid's 8 rows per device, got 9223372036854775812 for device 0",
            ),
            (&[usize::MAX, 9], "at most the grid's 8 rows per device"),
            (&[4, 9], "got 9 for device 1"),
            (&[0, 0], "adding up to the grid's 8 rows, got 0"),
            (&[5, 5], "adding up to the grid's 8 rows, got 10"),
            (&[8], "rows for each of the 2 devices, got 1 entries"),
        ];
        for (split, expected) in cases {
            match check_split(split, 2, 8) {
                Err(Error::InvalidArgument { argument, message }) => {
                    assert_eq!(argument, "split");
                    assert!(
                        message.contains(expected),
                        "{message} should say {expected}"
                    );
                }
                other => panic!("{split:?}: expected InvalidArgument(split), got {other:?}"),
            }
        }
        assert_eq!(check_split(&[3, 5], 2, 8), Ok(()));
        assert_eq!(check_split(&[0, 8], 2, 8), Ok(()));
    }

    /// A caller's split gives the healthy devices their rows; rows for a device outside
    /// `healthy`, or a healthy id past the devices, are refused, never indexed.
    #[test]
    fn a_callers_split_gives_rows_to_healthy_devices_only() {
        assert_eq!(
            caller_split(&[3, 0, 5], 3, &[0, 2], 8),
            Ok(vec![(0, 3), (2, 5)])
        );
        assert_eq!(
            caller_split(&[3, 5], 2, &[0, 1], 8),
            Ok(vec![(0, 3), (1, 5)])
        );
        let refused = |split: &[usize], healthy: &[usize]| match caller_split(split, 2, healthy, 8)
        {
            Err(Error::InvalidArgument { argument, message }) => format!("{argument}: {message}"),
            other => panic!("{split:?} {healthy:?}: expected InvalidArgument, got {other:?}"),
        };
        assert_eq!(
            refused(&[3, 5], &[0]),
            "split: device 1 is not healthy and cannot be given rows"
        );
        assert_eq!(
            refused(&[8, 0], &[0, 7]),
            "healthy: expected device ids below 2, got 7"
        );
        assert!(refused(&[5, 5], &[0, 1]).contains("adding up to the grid's 8 rows, got 10"));
    }

    /// A layout whose rows do not add up to the grid is an error, never a loop over a
    /// wrapped count.
    #[test]
    fn a_layout_of_a_wrapping_split_is_an_error_not_a_huge_list() {
        let g = geometry(8, 1, false);
        let half = 1usize << 63;
        let err = layout(&[(0, half + 4), (1, half + 4)], g, &|_| 16).unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err:?}");
        assert!(layout(&[(0, 3), (1, 3)], g, &|_| 16).is_err());
    }

    #[test]
    fn split_follows_weights_and_covers_every_row() {
        assert_eq!(split_rows(10, &[1.0, 1.0]), [5, 5]);
        assert_eq!(split_rows(3, &[1.0; 6]).iter().sum::<usize>(), 3);
        assert_eq!(split_rows(100, &[3.0, 1.0, 0.0]), [75, 25, 0]);
    }
}
