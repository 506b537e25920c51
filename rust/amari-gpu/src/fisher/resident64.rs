//! The empirical Fisher matrix of resident float64 scores, accumulated in float64 where
//! their rows live, with the bits of the numpy float64 path (`information64`): the same
//! checks, the same float64 SYRK partials (`syrk64`) on the same chunk grid, summed in
//! chunk order on the host. Float64 needs no scaling, so the passes over the rows are:
//!
//! 1. `column_max` over the rows' words: the largest high word of every value (its
//!    exponent field and beyond, as bits) shows whether a NaN or an infinity is there;
//!    only then are the rows gathered, to name the first one as the numpy path does.
//! 2. `prepare_rows` with no scaling, only when P is not a multiple of 4: a resident copy
//!    padded with zero columns for the SYRK's width (a copy of the words, bit for bit).
//! 3. The float64 SYRK on each shard's chunks, weights (two words a row) uploaded beside.
//!
//! Only the column maxima and the P × P partials cross to the host, never the rows.

use crate::context::MultiGpuContext;
use crate::dtype::{f64_words, Dtype};
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::resident::{Operand, ResidentArray};

use super::information64::{device_weights, information_shapes_f64, mean};
use super::resident::{check_rows, column_max_kernel, prepare_kernel};
use super::shape::SyrkShape;
use super::split::check_weights;
use super::syrk64::{kernel, reduce};

/// The high word of a float64 at or above this (sign cleared): an infinity or a NaN.
const NON_FINITE_HIGH: u32 = 0x7ff0_0000;

/// `fisher_information_f64` of resident float64 scores of the caller's shape `dims`
/// ((N, P); the array holds N rows of 2P words), with optional host (N,) `weights`: the
/// row-major P × P float64 matrix, bit for bit the numpy float64 path's whatever the
/// sharding, computed where the rows live. Errors as the numpy path's, word for word.
pub fn fisher_information_resident_f64(
    ctx: &MultiGpuContext,
    scores: &ResidentArray,
    dims: &[usize],
    weights: Option<&[f64]>,
) -> Result<Vec<f64>> {
    let (n, p) = information_shapes_f64(dims, None)?;
    if scores.dtype() != Dtype::F64 || (scores.rows(), scores.cols()) != (n, 2 * p) {
        return Err(Error::invalid(
            "scores",
            format!(
                "expected a float64 DeviceArray of shape ({n}, {p}), got one of {} with {} \
                 rows of {} words",
                scores.dtype(),
                scores.rows(),
                scores.cols()
            ),
        ));
    }
    check_rows(n, p)?;
    let words = 2 * p;
    // The rows' words hold float64 values: kernels over them run where float64 runs.
    let in_f64 = |k: Kernel| Kernel {
        dtype: Dtype::F64,
        ..k
    };
    let maxima = in_f64(column_max_kernel(words));
    let grid = |k: &Kernel| ctx.kernel_chunk_items(k, n);
    let tops = ctx.run_resident_chunks(&maxima, scores, "scores", None, grid(&maxima))?;
    // Word 2j + 1 is the high word of column j (little-endian, as numpy's float64 words).
    let non_finite = tops
        .chunks_exact(words)
        .any(|chunk| chunk.iter().skip(1).step_by(2).any(|v| v.to_bits() >= NON_FINITE_HIGH));
    if non_finite {
        // The numpy path finds and names the first one.
        let mut rows: Vec<f64> = crate::alloc::zeroed(
            "scores (gathered)",
            crate::alloc::product("scores", &[n, p], 8)?,
        )?;
        ctx.gather(scores, crate::dtype::f64_words_mut(&mut rows))?;
        return super::fisher_information_f64(ctx, &rows, p, weights, None).map(|f| f.matrix);
    }
    let total = check_weights(weights, n)?;
    let weights = device_weights(weights, n)?;
    let width = SyrkShape::new(p).width;
    let padded;
    let rows = if width == p {
        scores
    } else {
        // Exponents of 0: every word copied as it is, zero words appended.
        let unscaled = crate::alloc::zeroed::<f32>("exponents", words)?;
        padded = ctx.run_resident(
            &in_f64(prepare_kernel(words, 2 * width)),
            &[
                ("scores", Operand::Resident(scores)),
                ("exponents", Operand::Host(&unscaled)),
            ],
        )?;
        &padded
    };
    let syrk = kernel(p, width);
    // The numpy path's grid, so the partials are its partials.
    let partials = ctx.run_resident_chunks(
        &syrk,
        rows,
        "scores",
        Some(f64_words(&weights)),
        grid(&syrk),
    )?;
    let matrix = reduce(p, width, &partials);
    ctx.recycle_partials(partials);
    mean(matrix?, p, total)
}
