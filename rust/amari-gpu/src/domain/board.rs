//! The host board of a heat run: built from the caller's grid (rows padded to whole vec4s,
//! scaled near the type's limit) on the host device's threads, and the result taken from it
//! after the last round, handed over whole where the board's words are exactly the result's.

use super::host_grid::HeatCell;
use super::scale_cells;
use crate::context::MultiGpuContext;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::host::rows::{copy_rows, new_rows};
use crate::host::HostPool;

/// The grid of a heat run's final `board`. A float32 board whose rows have no padding
/// (width a multiple of 4) and no spare capacity holds exactly the result's cells: it is
/// handed over as the result (the next call's board is then a new buffer) rather than
/// copied. Otherwise each cell is written once, from the board's bytes (its rows are only
/// 4-byte aligned), rows split across the host device's threads, and the board is kept.
pub(super) fn heat_result<T: HeatCell>(
    ctx: &MultiGpuContext,
    mut board: Vec<f32>,
    height: usize,
    width: usize,
    row_bytes: usize,
) -> Result<Vec<T>> {
    if row_bytes == width * size_of::<T>() && board.capacity() == board.len() {
        // `T` is `f32` exactly when the downcast succeeds (`Pod` types are `'static`).
        let any: Box<dyn std::any::Any> = Box::new(board);
        board = match any.downcast::<Vec<T>>() {
            Ok(cells) => return Ok(*cells),
            Err(any) => *any
                .downcast::<Vec<f32>>()
                .map_err(|_| Error::Internal("a heat board is a vector of 4-byte words".into()))?,
        };
    }
    let out = new_rows::<T>(
        host_pool(ctx),
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

/// The host board of a heat run: `grid`'s rows, each padded with zero cells to `row_bytes`,
/// scaled by 2^-`shift` when the grid is that close to its type's limit. Built once per
/// attempt straight from the caller's cells (a restart after a failed device builds it again
/// rather than keeping a copy), rows copied on the host device's threads when the context
/// has it. A board [`heat_result`] hands over as the result (float32 rows without padding,
/// unscaled) is a new vector each call, written once by that copy: taken as a spare it
/// would be one the context does not have, so a new one zeroed on the calling thread first
/// (a serial pass over fresh pages). Any other is built in a spare buffer of the context
/// when it has one (not zeroed first: every word of every row is written here).
pub(super) fn heat_board<T: HeatCell>(
    ctx: &MultiGpuContext,
    grid: &[T],
    width: usize,
    row_bytes: usize,
    shift: i32,
) -> Result<Vec<f32>> {
    let row_cells = row_bytes / 4;
    let height = grid.len() / width;
    if shift == 0 && row_bytes == width * size_of::<T>() && T::DTYPE == Dtype::F32 {
        let bytes: &[u8] = bytemuck::cast_slice(grid);
        return new_rows::<f32>(host_pool(ctx), (bytes, row_bytes), height, row_cells)
            .ok_or_else(|| Error::HostOutOfMemory {
                argument: "grid".into(),
                bytes: bytes.len() as u128,
            });
    }
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
        host_pool(ctx),
        (&mut board, row_cells),
        (T::words(grid), words),
        words,
        padded,
    );
    Ok(board)
}

/// The host device's threads, where the context has the host device: a grid call's large
/// copies run on them.
pub(super) fn host_pool(ctx: &MultiGpuContext) -> Option<&HostPool> {
    ctx.devices()
        .iter()
        .find_map(|d| d.as_host())
        .map(|h| &h.pool)
}
