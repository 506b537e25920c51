//! Tropical kernels on the host, as `shaders/tropical.wgsl` computes them: every output is
//! `sign · max_k (sign·a[r,k] + sign·b[k,j])` with the accumulator starting at −inf and
//! taking a term only when it is greater (`select(acc, s, s > acc)`), k in order, then
//! combined with `sign · c` the same way when accumulating. A NaN term (−inf + inf) is never
//! taken, which is the tropical zero's absorbing rule; ties keep the earlier value, so even
//! the sign of a zero result is the device's. All of it is exact (one rounding per sum,
//! comparisons and negations exact), so the host and every device agree bit for bit
//! whatever their `fma`. Vectorised across columns, rows in blocks, k sequential.

use std::ops::Range;
use std::sync::Arc;

use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

use super::semiring::Semiring;
use super::shape::{ProductShape, BLOCK_ROWS, MATVEC_PASS_K};
use crate::host::simd::{dispatch, Task};

/// Columns per register strip.
const STRIP: usize = 16;
/// Rows per register block.
const ROWS: usize = 4;

/// The host twin of `kernels::tiled` (and of `kernels::naive` for max-plus): a product over
/// items of [`BLOCK_ROWS`] rows of one batch, inputs bound as the WGSL kernel binds them.
#[derive(Debug, Clone, Copy)]
pub struct TropicalProduct {
    /// The semiring.
    pub semiring: Semiring,
    /// The shapes.
    pub shape: ProductShape,
}

/// The host twin of `kernels::matvec`: one row per item, 64 lane partials combined in the
/// shader's tree.
#[derive(Debug, Clone, Copy)]
pub struct TropicalMatvec {
    /// The semiring.
    pub semiring: Semiring,
    /// The shapes (`cols` is 1).
    pub shape: ProductShape,
}

#[inline(always)]
fn mx(acc: f32, s: f32) -> f32 {
    if s > acc {
        s
    } else {
        acc
    }
}

#[inline(always)]
fn signed<const MIN: bool>(x: f32) -> f32 {
    if MIN {
        -x
    } else {
        x
    }
}

/// `rows` rows of a (k wide) times `b` (k × cols) into `out` (rows × cols), combined with
/// `c` (rows × cols) when given.
struct Rows<'a, const MIN: bool> {
    a: &'a [f32],
    b: &'a [f32],
    c: Option<&'a [f32]>,
    k: usize,
    cols: usize,
    out: &'a mut [f32],
}

impl<const MIN: bool> Task for Rows<'_, MIN> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let Rows {
            a,
            b,
            c,
            k,
            cols,
            out,
        } = self;
        let rows = out.len() / cols;
        // Each strip of STRIP columns of b is packed once (signed, contiguous): b's rows
        // are a whole matrix row apart, which would alias in the caches.
        let mut packed = vec![[f32::NEG_INFINITY; STRIP]; k];
        let mut j0 = 0;
        while j0 < cols {
            let nc = STRIP.min(cols - j0);
            for (kk, p) in packed.iter_mut().enumerate() {
                for (l, v) in p.iter_mut().enumerate().take(nc) {
                    *v = signed::<MIN>(b[kk * cols + j0 + l]);
                }
            }
            let mut r0 = 0;
            while r0 < rows {
                let nr = ROWS.min(rows - r0);
                let mut acc = [[f32::NEG_INFINITY; STRIP]; ROWS];
                #[cfg(target_arch = "x86_64")]
                let vector = nr == ROWS && crate::host::simd::Level::detect().has_avx2();
                #[cfg(not(target_arch = "x86_64"))]
                let vector = false;
                if vector {
                    #[cfg(target_arch = "x86_64")]
                    {
                        let a: [&[f32]; ROWS] = std::array::from_fn(|r| &a[(r0 + r) * k..][..k]);
                        // SAFETY: `Level::has_avx2` is true only after
                        // `is_x86_feature_detected!` found AVX2 and FMA, all that the
                        // target-feature function needs; its memory accesses are in bounds.
                        #[allow(unsafe_code)]
                        unsafe {
                            avx2::tile::<MIN>(a, &packed, &mut acc)
                        };
                    }
                } else if nr == ROWS {
                    let a: [&[f32]; ROWS] = std::array::from_fn(|r| &a[(r0 + r) * k..][..k]);
                    for (kk, bs) in packed.iter().enumerate() {
                        for (r, acc) in acc.iter_mut().enumerate() {
                            let x = signed::<MIN>(a[r][kk]);
                            for l in 0..STRIP {
                                acc[l] = mx(acc[l], x + bs[l]);
                            }
                        }
                    }
                } else {
                    for (kk, bs) in packed.iter().enumerate() {
                        for (r, acc) in acc.iter_mut().enumerate().take(nr) {
                            let x = signed::<MIN>(a[(r0 + r) * k + kk]);
                            for l in 0..STRIP {
                                acc[l] = mx(acc[l], x + bs[l]);
                            }
                        }
                    }
                }
                for (r, acc) in acc.iter().enumerate().take(nr) {
                    let at = (r0 + r) * cols + j0;
                    for l in 0..nc {
                        let mut v = acc[l];
                        if let Some(c) = c {
                            v = mx(signed::<MIN>(c[at + l]), v);
                        }
                        out[at + l] = signed::<MIN>(v);
                    }
                }
                r0 += ROWS;
            }
            j0 += STRIP;
        }
    }
}

/// Rows of a product on the current rayon pool: `a` (rows × k), `b` (k × cols), `c` and
/// `out` (rows × cols). Shared by the chunk kernel and the host's shortest paths.
pub fn product_rows(
    semiring: Semiring,
    a: &[f32],
    b: &[f32],
    c: Option<&[f32]>,
    k: usize,
    cols: usize,
    out: &mut [f32],
) {
    if cols == 0 {
        return;
    }
    let grain = ROWS * 16;
    out.par_chunks_mut(grain * cols)
        .enumerate()
        .for_each(|(t, out)| {
            let r0 = t * grain;
            let rows = out.len() / cols;
            let a = &a[r0 * k..(r0 + rows) * k];
            let c = c.map(|c| &c[r0 * cols..(r0 + rows) * cols]);
            match semiring {
                Semiring::MaxPlus => dispatch(Rows::<false> {
                    a,
                    b,
                    c,
                    k,
                    cols,
                    out,
                }),
                Semiring::MinPlus => dispatch(Rows::<true> {
                    a,
                    b,
                    c,
                    k,
                    cols,
                    out,
                }),
            }
        });
}

/// The register-blocked micro-kernel on AVX2: [`ROWS`] rows by [`STRIP`] columns of
/// accumulators held in eight vector registers, k in order. `_mm256_max_ps(s, acc)` is
/// `s > acc ? s : acc` lane by lane (it returns its second operand when the comparison is
/// false, NaN included), which is the shader's `mx(acc, s)` exactly.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use crate::tropical::host::{ROWS, STRIP};

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn tile<const MIN: bool>(
        a: [&[f32]; ROWS],
        packed: &[[f32; STRIP]],
        acc: &mut [[f32; STRIP]; ROWS],
    ) {
        let neg_inf = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut lo = [neg_inf; ROWS];
        let mut hi = [neg_inf; ROWS];
        for (kk, bs) in packed.iter().enumerate() {
            // SAFETY: `bs` is an array of STRIP = 16 floats: the loads at 0 and 8 read
            // 8 floats each inside it.
            #[allow(unsafe_code)]
            let (b0, b1) = unsafe {
                (
                    _mm256_loadu_ps(bs.as_ptr()),
                    _mm256_loadu_ps(bs.as_ptr().add(8)),
                )
            };
            for r in 0..ROWS {
                let x = _mm256_set1_ps(if MIN { -a[r][kk] } else { a[r][kk] });
                lo[r] = _mm256_max_ps(_mm256_add_ps(x, b0), lo[r]);
                hi[r] = _mm256_max_ps(_mm256_add_ps(x, b1), hi[r]);
            }
        }
        for r in 0..ROWS {
            // SAFETY: `acc[r]` is an array of 16 floats: the stores at 0 and 8 write 8
            // floats each inside it.
            #[allow(unsafe_code)]
            unsafe {
                _mm256_storeu_ps(acc[r].as_mut_ptr(), lo[r]);
                _mm256_storeu_ps(acc[r].as_mut_ptr().add(8), hi[r]);
            }
        }
    }
}

/// The batch index an item's `item_batch` word holds (u32 bits), clamped as the shader does.
fn batch_of(word: f32, batches: usize) -> usize {
    (word.to_bits() as usize).min(batches.max(1) - 1)
}

/// The runs of consecutive items of `range` that belong to one batch (by their
/// `item_batch` words, of `batches` batches), each with its batch: the host runs each run as
/// one product.
pub(super) fn batch_runs(
    item_batch: &[f32],
    range: Range<usize>,
    batches: usize,
) -> impl Iterator<Item = (Range<usize>, usize)> + '_ {
    let mut q = range.start;
    std::iter::from_fn(move || {
        if q >= range.end {
            return None;
        }
        let batch = batch_of(item_batch[q], batches);
        let mut end = q + 1;
        while end < range.end && batch_of(item_batch[end], batches) == batch {
            end += 1;
        }
        let run = q..end;
        q = end;
        Some((run, batch))
    })
}

impl HostImpl for TropicalProduct {
    /// Runs items `range` (inputs: a blocks, item_batch, b, c) into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let ProductShape {
            k,
            cols,
            batches,
            accumulate,
            ..
        } = self.shape;
        let item_words = BLOCK_ROWS * cols;
        assert_eq!(
            output.len(),
            range.len() * item_words,
            "output of the chunk"
        );
        let (a, item_batch, b, c) = (inputs[0], inputs[1], inputs[2], inputs[3]);
        // Consecutive items of one batch run as one product.
        for (Range { start: q, end }, batch) in batch_runs(item_batch, range.clone(), batches) {
            let rows = (q - range.start) * BLOCK_ROWS..(end - range.start) * BLOCK_ROWS;
            let at = q * BLOCK_ROWS;
            let n = (end - q) * BLOCK_ROWS;
            product_rows(
                self.semiring,
                &a[at * k..(at + n) * k],
                &b[batch * k * cols..(batch + 1) * k * cols],
                accumulate.then(|| &c[at * cols..(at + n) * cols]),
                k,
                cols,
                &mut output[rows.start * cols..rows.end * cols],
            );
        }
    }

    /// Additions and comparisons only: unchanged.
    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}

impl HostImpl for TropicalMatvec {
    /// Runs rows `range` (inputs: a rows, row_batch, x, placeholder) into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let ProductShape { k, batches, .. } = self.shape;
        let (a, row_batch, x) = (inputs[0], inputs[1], inputs[2]);
        let sign = self.semiring.sign();
        output.par_chunks_mut(256).enumerate().for_each(|(t, out)| {
            for (i, o) in out.iter_mut().enumerate() {
                let row = range.start + t * 256 + i;
                let batch = batch_of(row_batch[row], batches);
                let (a, x) = (&a[row * k..(row + 1) * k], &x[batch * k..(batch + 1) * k]);
                // The shader's passes: each folds its 64 lanes in a tree, then into what
                // the pass before left (that first).
                let mut acc = f32::NEG_INFINITY;
                let passes = a.chunks(MATVEC_PASS_K).zip(x.chunks(MATVEC_PASS_K));
                for (pass, (ap, xp)) in passes.enumerate() {
                    let mut lanes = [f32::NEG_INFINITY; 64];
                    for (ak, xk) in ap.chunks(64).zip(xp.chunks(64)) {
                        for l in 0..ak.len() {
                            lanes[l] = mx(lanes[l], sign * (ak[l] + xk[l]));
                        }
                    }
                    let mut width = 32;
                    while width > 0 {
                        for l in 0..width {
                            lanes[l] = mx(lanes[l], lanes[l + width]);
                        }
                        width /= 2;
                    }
                    acc = if pass == 0 {
                        lanes[0]
                    } else {
                        mx(acc, lanes[0])
                    };
                }
                *o = sign * acc;
            }
        });
    }

    /// Additions and comparisons only: unchanged.
    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}
