//! The empirical Fisher matrix of resident scores, computed where their rows live, with the
//! numpy path's bits: the same checks, the same power-of-two scaling (chosen from column
//! maxima found on the devices), the same SYRK partials on the same chunk grid, summed in
//! chunk order on the host. Three passes over the rows, none of which moves them:
//!
//! 1. `column_max` (`shaders/fisher_resident.wgsl`): every column's largest magnitude, as
//!    bits, per chunk; the host takes the maxima (exact in any order) and chooses the
//!    scaling. A NaN or an infinity shows up there; the rows are then gathered once to
//!    report the first one as the numpy path does.
//! 2. `prepare_rows`, only when the scaling is not the identity or P is not a multiple of 4:
//!    a resident copy scaled exactly and padded for the SYRK's vec4 reads.
//! 3. The SYRK (`fisher_tiled` / `fisher_rows`) on each shard's chunks.
//!
//! The weights (N words) stay on the host and are uploaded to the devices that need them.

use std::sync::Arc;

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::fisher::host_resident::{ColumnMax, PrepareRows, COLUMN_SLICES};
use crate::kernel::{Dispatch, Input, Kernel, Output};
use crate::resident::{Operand, ResidentArray};

use super::reduce::reduce_tiled;
use super::scale::Scaling;
use super::split::{check_weights, device_weights, finish_matrix, no_rows, Finish};
use super::syrk::{tiled_kernel, SyrkShape, MAX_SCORE_COLUMNS};

/// The WGSL of the two passes before the SYRK.
pub const SOURCE: &str = include_str!("../../../../shaders/fisher_resident.wgsl");

fn column_grid(_items: u32, params: &[u32]) -> [u32; 3] {
    // params[0]: columns; one thread per column and run of rows.
    [params[0].div_ceil(64).max(1), COLUMN_SLICES as u32, 1]
}

/// Per chunk of rows of `p` scores: every column's largest `bits & 0x7fff_ffff` over each
/// of [`COLUMN_SLICES`] runs of the chunk's rows.
pub fn column_max_kernel(p: usize) -> Kernel {
    Kernel {
        entry: "column_max",
        inputs: vec![Input::PerItem(p)],
        output: Output::PerChunk(COLUMN_SLICES * p),
        params: vec![p as u32, 0, 0, 0],
        dispatch: Dispatch::Custom(column_grid),
        // Each thread walks a run of a chunk's rows: at most 16,384, within the loop
        // budget. Maxima are exact in any order, so the grid does not change them.
        max_chunk_items: Some(COLUMN_SLICES << 14),
        flops_per_item: p as f64,
        host: Some(Arc::new(ColumnMax { p })),
        ..Kernel::map("fisher_column_max", Family::InformationGeometry, SOURCE)
    }
}

/// Rows of `p` scores scaled by `2^exponent[j]` per column (the second input, i32 bits)
/// and padded with zeros to `width` words.
pub fn prepare_kernel(p: usize, width: usize) -> Kernel {
    Kernel {
        entry: "prepare_rows",
        inputs: vec![Input::PerItem(p), Input::Whole(p)],
        output: Output::PerItem(width),
        params: vec![p as u32, width as u32, 0, 0],
        dispatch: Dispatch::Linear {
            threads_per_item: 1,
        },
        flops_per_item: width as f64,
        host: Some(Arc::new(PrepareRows { p, width })),
        ..Kernel::map("fisher_prepare_rows", Family::InformationGeometry, SOURCE)
    }
}

/// The numpy path's checks of the shape (N, P) of resident scores: 1 <= P <= 4096, N >= 1.
pub(super) fn check_rows(n: usize, p: usize) -> Result<()> {
    if p == 0 || p > MAX_SCORE_COLUMNS {
        return Err(Error::Shape {
            argument: "scores".into(),
            expected: format!("(N, W) with 1 <= W <= {MAX_SCORE_COLUMNS}"),
            actual: format!("W = {p}"),
        });
    }
    if n == 0 {
        return Err(no_rows(p));
    }
    Ok(())
}

/// [`super::information::fisher_information`] of the resident (N, P) `scores`: the row-major P × P
/// float64 matrix, bit for bit the numpy path's whatever the sharding, computed where the
/// rows live. `weights` (N,) are host words. Errors as the numpy path's, word for word.
pub fn fisher_information_resident(
    ctx: &MultiGpuContext,
    scores: &ResidentArray,
    weights: Option<&[f32]>,
) -> Result<Vec<f64>> {
    let (n, p) = (scores.rows(), scores.cols());
    check_rows(n, p)?;
    let total = check_weights(weights, n)?;
    let maxima = column_max_kernel(p);
    let grid = |k: &Kernel| ctx.kernel_chunk_items(k, n);
    let tops = ctx.run_resident_chunks(&maxima, scores, "scores", None, grid(&maxima))?;
    let mut top = vec![0u32; p];
    for chunk in tops.chunks_exact(p) {
        for (t, v) in top.iter_mut().zip(chunk) {
            *t = (*t).max(v.to_bits());
        }
    }
    if top.iter().any(|&bits| bits >= 0x7f80_0000) {
        // A NaN or an infinity: the numpy path finds and names the first one.
        let mut rows = crate::alloc::zeroed("scores", n * p)?;
        ctx.gather(scores, &mut rows)?;
        return super::information::fisher_information(ctx, &rows, p, weights, None)
            .map(|f| f.matrix);
    }
    let col_max: Vec<f32> = top.into_iter().map(f32::from_bits).collect();
    let scaling = Scaling::from_maxima(&col_max, n, weights);
    let (weights, total) = device_weights(&scaling, weights, n, total)?;
    let shape = SyrkShape::new(p);
    let prepared;
    let rows = if scaling.is_identity() && shape.width == p {
        scores
    } else {
        let exponents: Vec<f32> = scaling
            .columns
            .iter()
            .map(|&a| f32::from_bits(a as u32))
            .collect();
        prepared = ctx.run_resident(
            &prepare_kernel(p, shape.width),
            &[
                ("scores", Operand::Resident(scores)),
                ("exponents", Operand::Host(&exponents)),
            ],
        )?;
        &prepared
    };
    let syrk = tiled_kernel(p);
    // The numpy path's grid, so the partials are its partials.
    let partials = ctx.run_resident_chunks(&syrk, rows, "scores", Some(&weights), grid(&syrk))?;
    let matrix = reduce_tiled(&shape, &partials)?;
    finish_matrix(
        &Finish {
            p,
            total,
            column_exponents: scaling.columns,
            weight_exponent: scaling.weights,
        },
        matrix,
    )
}
