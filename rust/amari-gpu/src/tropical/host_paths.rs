//! All-pairs shortest paths on the host: `tropical::paths`'s blocked Floyd–Warshall step
//! for step (same block size and order, the same diagonal closure, the same two min-plus
//! products with D's rows as the accumulated input), its products run by the host kernel
//! instead of the devices, so the distances are the same bits.

use super::host::product_rows;
use super::paths::{block_size, finish, start, strips};
use super::semiring::Semiring;
use crate::error::Result;

/// Shortest path lengths of the graph with (n, n) weights `w` into `out`, on the current
/// rayon pool (see `tropical::shortest_paths` for the rules and errors).
pub fn shortest_paths_host(w: &[f32], n: usize, out: &mut [f32]) -> Result<()> {
    let (mut d, shift) = start(w, n, out)?;
    let mut next = vec![0.0f32; n * n];
    let block = block_size(n);
    for kb in (0..n).step_by(block) {
        let b = block.min(n - kb);
        let (diag, column) = strips(&d, n, kb, b)?;
        let mut panel = vec![0.0f32; n * b];
        product_rows(
            Semiring::MinPlus,
            &column,
            &diag,
            Some(&column),
            b,
            b,
            &mut panel,
        );
        let rows = &d[kb * n..(kb + b) * n];
        product_rows(Semiring::MinPlus, &panel, rows, Some(&d), b, n, &mut next);
        std::mem::swap(&mut d, &mut next);
    }
    finish(d, n, shift, out)
}
