//! The host tropical products in float64: the float32 product's blocking (`host`) on the
//! float64 micro-kernels (`host_kernel64`) and the shared packing (`host_pack`), and the
//! engine's float64 words read as values. Exact like float32 (one rounding per sum,
//! comparisons and negations exact, k in order per output), so the host and every float64
//! device agree bit for bit.

use std::borrow::Cow;
use std::ops::Range;

use rayon::prelude::*;

use super::host_kernel64::Kernel64;
use super::host_pack::{pack_a, pack_b, store_tile, Place};
use super::semiring::Semiring;
use super::shape::{batch_runs, ProductShape, BLOCK_ROWS};
use crate::dtype::{as_f64, as_f64_mut, read_f64, write_f64};
use crate::host::simd::Level;

/// Inner indices of one k block: a strip's block (128 × 16 values, 16 KiB) stays in L1.
const K_BLOCK: usize = 128;

/// Left-operand bytes one task packs: its panels stay in L2 beside the strip they meet.
const TASK_PANEL_BYTES: usize = 192 << 10;

/// float64 `words` as values: in place when 8-byte aligned, else copied.
pub(super) fn values(words: &[f32]) -> Cow<'_, [f64]> {
    match as_f64(words) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned((0..words.len() / 2).map(|i| read_f64(words, i)).collect()),
    }
}

/// Writes float64 `values` into `words` (which may be only 4-byte aligned).
pub(super) fn store(values: &[f64], words: &mut [f32]) {
    match as_f64_mut(words) {
        Some(out) => out.copy_from_slice(values),
        None => {
            for (i, &v) in values.iter().enumerate() {
                write_f64(words, i, v);
            }
        }
    }
}

/// Rows of a float64 product on the current rayon pool: `a` (rows × k), `b` (k × cols),
/// `c` and `out` (rows × cols), with the micro-kernel of this CPU's SIMD level.
pub fn product_rows_f64(
    semiring: Semiring,
    a: &[f64],
    b: &[f64],
    c: Option<&[f64]>,
    k: usize,
    cols: usize,
    out: &mut [f64],
) {
    product_rows_f64_at(Level::detect(), semiring, (a, b, c), (k, cols), out);
}

/// [`product_rows_f64`] with the micro-kernel of `level` (which the CPU must have): `b`
/// packed into strips, each task packing a few panels of rows of `a` and walking every strip
/// over them one k block at a time (the tiles carry their accumulators from block to block,
/// so each output is one walk over k).
pub(super) fn product_rows_f64_at(
    level: Level,
    semiring: Semiring,
    (a, b, c): (&[f64], &[f64], Option<&[f64]>),
    (k, cols): (usize, usize),
    out: &mut [f64],
) {
    if cols == 0 || out.is_empty() {
        return;
    }
    let kernel = Kernel64::at(level);
    let (mr, nr) = (kernel.mr, kernel.nr);
    let min = semiring == Semiring::MinPlus;
    let strips = pack_b(b, k, cols, nr, min);
    let rows = out.len() / cols;
    let panels = rows.div_ceil(mr);
    let by_cache = (TASK_PANEL_BYTES / (mr * k.max(1) * 8)).max(1);
    let by_threads = panels.div_ceil(rayon::current_num_threads()).max(1);
    let task_rows = by_cache.min(by_threads) * mr;
    out.par_chunks_mut(task_rows * cols)
        .enumerate()
        .for_each(|(t, out)| {
            let r0 = t * task_rows;
            let rows = out.len() / cols;
            let c = c.map(|c| &c[r0 * cols..(r0 + rows) * cols]);
            let mut packed = vec![0.0f64; rows.div_ceil(mr) * mr * k];
            for (p, panel) in packed.chunks_mut(mr * k.max(1)).enumerate() {
                let (first, last) = (r0 + p * mr, (r0 + (p + 1) * mr).min(r0 + rows));
                pack_a(&a[first * k..last * k], k, mr, min, panel);
            }
            let panels = rows.div_ceil(mr);
            let mut acc = vec![0.0f64; panels * mr * nr];
            for s in 0..cols.div_ceil(nr) {
                let (col, strip) = (s * nr, &strips[s * k * nr..(s + 1) * k * nr]);
                acc.fill(f64::NEG_INFINITY);
                for k0 in (0..k).step_by(K_BLOCK) {
                    let k1 = (k0 + K_BLOCK).min(k);
                    for (p, tile) in acc.chunks_exact_mut(mr * nr).enumerate() {
                        let panel = &packed[p * mr * k..(p + 1) * mr * k];
                        kernel.tile(&panel[k0 * mr..k1 * mr], &strip[k0 * nr..k1 * nr], tile);
                    }
                }
                for (p, tile) in acc.chunks_exact(mr * nr).enumerate() {
                    let place = Place {
                        row: p * mr,
                        col,
                        rows: mr.min(rows - p * mr),
                        cols: nr.min(cols - col),
                    };
                    store_tile(tile, nr, &place, c, cols, min, out);
                }
            }
        });
}

/// The float64 run of `TropicalProduct`: items `range` of 64-row blocks (inputs: a blocks,
/// item_batch, b, c, in float64 words) into `output`, each run of one batch one product.
pub(super) fn run_blocks(
    semiring: Semiring,
    shape: &ProductShape,
    inputs: &[&[f32]],
    range: Range<usize>,
    output: &mut [f32],
) {
    let ProductShape {
        k,
        cols,
        batches,
        accumulate,
        ..
    } = *shape;
    let (a, item_batch) = (values(inputs[0]), inputs[1]);
    let (b, c) = (values(inputs[2]), values(inputs[3]));
    let mut result = vec![0.0f64; range.len() * BLOCK_ROWS * cols];
    for (Range { start: q, end }, batch) in batch_runs(item_batch, range.clone(), batches) {
        let rows = (q - range.start) * BLOCK_ROWS..(end - range.start) * BLOCK_ROWS;
        let (at, n) = (q * BLOCK_ROWS, (end - q) * BLOCK_ROWS);
        let operands = (
            &a[at * k..(at + n) * k],
            &b[batch * k * cols..(batch + 1) * k * cols],
            accumulate.then(|| &c[at * cols..(at + n) * cols]),
        );
        let out = &mut result[rows.start * cols..rows.end * cols];
        product_rows_f64_at(Level::detect(), semiring, operands, (k, cols), out);
    }
    store(&result, output);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_computes_the_shader_rule_in_float64() {
        let pool = [f64::NEG_INFINITY, f64::INFINITY, 0.0, -0.0, 1.0, -1.0, 0.1, 1e300];
        let values = |n: usize, seed: usize| -> Vec<f64> {
            (0..n).map(|i| pool[(i * 7 + seed * 3 + i / 5) % pool.len()]).collect()
        };
        for level in Level::available() {
            for semiring in Semiring::ALL {
                for (rows, k, cols) in [(1, 1, 1), (13, 7, 33), (25, 0, 17), (37, 300, 19)] {
                    let (a, b, c) = (values(rows * k, 1), values(k * cols, 2), values(rows * cols, 3));
                    let sg = |x: f64| if semiring == Semiring::MinPlus { -x } else { x };
                    let mut out = vec![f64::NAN; rows * cols];
                    product_rows_f64_at(level, semiring, (&a, &b, Some(&c)), (k, cols), &mut out);
                    for r in 0..rows {
                        for j in 0..cols {
                            let mut acc = f64::NEG_INFINITY;
                            for l in 0..k {
                                let s = sg(a[r * k + l]) + sg(b[l * cols + j]);
                                acc = if s > acc { s } else { acc };
                            }
                            let cv = sg(c[r * cols + j]);
                            acc = if acc > cv { acc } else { cv };
                            let got = out[r * cols + j];
                            assert_eq!(got.to_bits(), sg(acc).to_bits(), "{level:?} {r},{j}");
                        }
                    }
                }
            }
        }
    }
}
