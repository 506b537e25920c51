//! Dispatch geometry: how many workgroups to launch for a chunk, folded into two dimensions
//! so that no chunk is capped by the 65,535-workgroups-per-dimension limit.

/// Threads per workgroup of every map kernel (a multiple of every subgroup size in use).
pub const WORKGROUP_SIZE: u32 = 64;

/// A two-dimensional grid of workgroups covering `items` threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Workgroups along x.
    pub x: u32,
    /// Workgroups along y.
    pub y: u32,
}

impl Grid {
    /// Threads per row of workgroups; the shader's linear index is `gid.y * row + gid.x`.
    #[cfg(test)]
    pub fn row_threads(&self) -> u32 {
        self.x * WORKGROUP_SIZE
    }
}

/// The grid for `items` threads given the device's per-dimension workgroup limit.
/// Returns `None` when even a square grid cannot cover them.
pub fn grid_for(items: u64, max_per_dimension: u32) -> Option<Grid> {
    let groups = items.div_ceil(u64::from(WORKGROUP_SIZE)).max(1);
    let max = u64::from(max_per_dimension.max(1));
    if groups <= max {
        return Some(Grid {
            x: groups as u32,
            y: 1,
        });
    }
    let y = groups.div_ceil(max);
    if y > max {
        return None;
    }
    // Spread evenly so that the wasted tail of the last row is smaller than one row.
    let x = groups.div_ceil(y);
    Some(Grid {
        x: x as u32,
        y: y as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_problems_are_one_row() {
        assert_eq!(grid_for(0, 65535), Some(Grid { x: 1, y: 1 }));
        assert_eq!(grid_for(1, 65535), Some(Grid { x: 1, y: 1 }));
        assert_eq!(grid_for(64 * 65535, 65535), Some(Grid { x: 65535, y: 1 }));
    }

    #[test]
    fn large_problems_fold_into_two_dimensions_and_cover_every_item() {
        for items in [64 * 65535 + 1, 10_000_000, 1 << 30, 3_000_000_017] {
            let g = grid_for(items, 65535).unwrap();
            assert!(g.x <= 65535 && g.y <= 65535);
            let covered = u64::from(g.x) * u64::from(g.y) * u64::from(WORKGROUP_SIZE);
            assert!(covered >= items, "{items} not covered by {g:?}");
            assert!(covered - items < u64::from(g.row_threads()) + u64::from(WORKGROUP_SIZE));
        }
    }

    #[test]
    fn impossible_grids_are_refused() {
        assert_eq!(grid_for(u64::MAX / 2, 16), None);
    }
}
