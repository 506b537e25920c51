//! All-pairs shortest paths on the host: `tropical::paths`'s blocked Floyd–Warshall step
//! for step (same block size and order, the same diagonal closure, the same two min-plus
//! products with D's rows as the accumulated input), its products run by the host kernel
//! instead of the devices, so the distances are the same bits.

use super::host::product_rows;
use super::host_kernel::Lanes;
use super::paths::{block_size, finish, start, strips};
use super::semiring::Semiring;
use crate::error::Result;

/// Shortest path lengths of the graph with (n, n) weights `w` into `out`, on the current
/// rayon pool, in float32 or float64 (see `tropical::shortest_paths` for the rules and
/// errors).
pub fn shortest_paths_host<T: Lanes>(w: &[T], n: usize, out: &mut [T]) -> Result<()> {
    let (mut d, shift) = start(w, n, out)?;
    let mut next = vec![T::ZERO; n * n];
    let block = block_size(n);
    for kb in (0..n).step_by(block) {
        let b = block.min(n - kb);
        let (diag, column) = strips(&d, n, kb, b)?;
        let mut panel = vec![T::ZERO; n * b];
        let min = Semiring::MinPlus;
        product_rows(min, &column, &diag, Some(&column), b, b, &mut panel);
        let rows = &d[kb * n..(kb + b) * n];
        product_rows(min, &panel, rows, Some(&d), b, n, &mut next);
        std::mem::swap(&mut d, &mut next);
    }
    finish(d, n, shift, out)
}
