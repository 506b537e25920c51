//! The host board of a heat run: built from the caller's grid (rows padded to whole vec4s,
//! scaled near the type's limit) on the host device's threads, and the result taken from it
//! after the last round; where the board's words are exactly the result's, a board of the
//! cells' own type handed over whole.

use super::host_grid::HeatCell;
use super::scale_cells;
use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::host::rows::{copy_rows, new_rows};

/// The grid of a heat run's final `board` (rows padded to `row_bytes`, or scaled): each
/// cell written once, from the board's bytes (its rows are only 4-byte aligned), rows split
/// across the host device's threads, and the board kept for the next call.
pub(super) fn heat_result<T: HeatCell>(
    ctx: &MultiGpuContext,
    board: Vec<f32>,
    height: usize,
    width: usize,
    row_bytes: usize,
) -> Result<Vec<T>> {
    let out = new_rows::<T>(
        ctx.host_pool(),
        (bytemuck::cast_slice(&board), row_bytes),
        height,
        width,
    )
    .ok_or_else(|| Error::HostOutOfMemory {
        argument: "grid".into(),
        bytes: (height * width * size_of::<T>()) as u128,
    })?;
    ctx.spare.keep(board);
    Ok(out)
}

/// The board of a heat run whose rows have no padding (a width of whole vec4s) and whose
/// grid is not scaled: its words are exactly the result's cells, so the board is handed
/// over as the result rather than copied out. A new vector each call, written once by a
/// copy of `grid` on the host device's threads (not zeroed first: a fresh buffer zeroed on
/// the calling thread is a serial pass over fresh pages).
pub(super) fn cells_board<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    width: usize,
) -> Result<Vec<T>> {
    let bytes: &[u8] = bytemuck::cast_slice(grid);
    let rows = grid.len() / width.max(1);
    new_rows::<T>(
        ctx.host_pool(),
        (bytes, width * size_of::<T>()),
        rows,
        width,
    )
    .ok_or_else(|| Error::HostOutOfMemory {
        argument: "grid".into(),
        bytes: bytes.len() as u128,
    })
}

/// The host board of a heat run: `grid`'s rows, each padded with zero cells to `row_bytes`,
/// scaled by 2^-`shift` when the grid is that close to its type's limit. Built once per
/// attempt straight from the caller's cells (a restart after a failed device builds it again
/// rather than keeping a copy), rows copied on the host device's threads when the context
/// has it, in a spare buffer of the context when it has one (not zeroed first: every word
/// of every row is written here). A board without padding or scaling is [`cells_board`].
pub(super) fn heat_board<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    width: usize,
    row_bytes: usize,
    shift: i32,
) -> Result<Vec<f32>> {
    let row_cells = row_bytes / 4;
    let height = grid.len() / width;
    let mut board = ctx.spare.take_any(
        "grid",
        crate::alloc::product("grid", &[height, row_cells], 4)?,
    )?;
    let words = width * T::WORDS;
    let padded = |row: &mut [f32]| {
        let (cells, padding) = row.split_at_mut(words);
        padding.fill(0.0);
        if shift != 0 {
            T::with_values_mut(cells, |cells| scale_cells(cells, -shift));
        }
    };
    copy_rows(
        ctx.host_pool(),
        (&mut board, row_cells),
        (T::words(grid), words),
        words,
        padded,
    );
    Ok(board)
}
