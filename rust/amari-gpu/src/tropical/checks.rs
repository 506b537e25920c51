//! The checks of a tropical product's arguments, one owner for host and resident operands:
//! shapes as the caller gave them (an unbatched `(m, k)` or a batched `(batch, m, k)`), NaN
//! at its position in those shapes, the whole-bound operand's size, and float32 overflow of
//! the result. Errors name the caller's arguments and speak in the caller's dimensions.

use crate::context::MultiGpuContext;
use crate::dtype::Dtype;
use crate::error::{shape_text, Error, Result};
use crate::resident::Operand;
use crate::tropical::blocks::{BatchShape, Product};
use crate::tropical::scalar::Scalar;
use crate::tropical::semiring::Semiring;

fn shape_error(argument: &str, expected: impl Into<String>, dims: &[usize]) -> Error {
    Error::Shape {
        argument: argument.into(),
        expected: expected.into(),
        actual: shape_text(dims),
    }
}

/// The left operand's batch, m and k, from its shape `(m, k)` or `(batch, m, k)`.
fn left(a: &[usize]) -> Result<(usize, usize, usize)> {
    match *a {
        [m, k] => Ok((1, m, k)),
        [batch, m, k] => Ok((batch, m, k)),
        _ => Err(shape_error("a", "(m, k) or (batch, m, k)", a)),
    }
}

/// The product shape of `a` ⊗ `b` from their shapes as the caller gave them: `(m, k)` by
/// `(k, n)`, or `(batch, m, k)` by `(batch, k, n)`.
pub(crate) fn matmul_shape(a: &[usize], b: &[usize]) -> Result<BatchShape> {
    let (batch, m, k) = left(a)?;
    if !matches!(b.len(), 2 | 3) {
        return Err(shape_error("b", "(k, n) or (batch, k, n)", b));
    }
    let batched = a.len() == 3;
    if b.len() != a.len() {
        let want = if batched { "(batch, k, n)" } else { "(k, n)" };
        return Err(shape_error("b", format!("{want} like a"), b));
    }
    let (b_batch, b_k, n) = if batched {
        (b[0], b[1], b[2])
    } else {
        (1, b[0], b[1])
    };
    if b_batch != batch || b_k != k {
        let want = if batched {
            format!("({batch}, {k}, n)")
        } else {
            format!("({k}, n)")
        };
        return Err(shape_error("b", want, b));
    }
    Ok(BatchShape { batch, m, k, n })
}

/// The product shape of `a` ⊗ `x`: `(m, k)` by `(k,)`, or `(batch, m, k)` by `(batch, k)`.
pub(crate) fn matvec_shape(a: &[usize], x: &[usize]) -> Result<BatchShape> {
    let (batch, m, k) = left(a)?;
    let want: &[usize] = if a.len() == 3 { &[batch, k] } else { &[k] };
    if x != want {
        return Err(shape_error("x", shape_text(want), x));
    }
    Ok(BatchShape { batch, m, k, n: 1 })
}

/// Refuses an operand whose words do not make up its stated shape (a caller of the native
/// functions passing a shape of its own): a resident one holds every axis but the last as
/// rows and the last as the words of a row, and values of the call's `dtype`.
pub(crate) fn check_operand(
    argument: &str,
    operand: Operand<'_>,
    dims: &[usize],
    dtype: Dtype,
) -> Result<()> {
    let words = dtype.bytes() / 4;
    let (rows, cols) = match operand {
        Operand::Host(data) => return check_len(argument, data.len() / words, dims),
        Operand::Resident(array) if array.dtype() != dtype => {
            return Err(Error::invalid(
                argument,
                format!(
                    "expected a DeviceArray of {dtype} (the dtype the product computes in), got \
                     one of {}",
                    array.dtype()
                ),
            ))
        }
        Operand::Resident(array) => (array.rows(), array.cols()),
    };
    let last = dims.last().copied().unwrap_or(1) * words;
    let lead: usize = dims.iter().rev().skip(1).product();
    if (lead, last) != (rows, cols) {
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!(
                "{} (the DeviceArray's rows and row width)",
                shape_text(dims)
            ),
            actual: format!("{rows} rows of {cols}"),
        });
    }
    Ok(())
}

/// Refuses `len` words for an array of shape `dims`.
pub(crate) fn check_len(argument: &str, len: usize, dims: &[usize]) -> Result<()> {
    let want: usize = dims.iter().product();
    if len != want {
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!("{} ({want} floats)", shape_text(dims)),
            actual: format!("{len} floats"),
        });
    }
    Ok(())
}

/// The NaN error of `argument`, of shape `dims`, at `index`.
pub(crate) fn nan_error(argument: &str, index: &[usize], dims: &[usize]) -> Error {
    let text = |v: &[usize]| {
        v.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    Error::invalid(
        argument,
        format!(
            "expected no NaN (tropical values are numbers or ±inf), got NaN at [{}] of shape {}",
            text(index),
            shape_text(dims)
        ),
    )
}

/// `flat`, a row-major position in an array of shape `dims`, as one index per axis.
pub(crate) fn unravel(flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    let mut rest = flat;
    for (slot, &dim) in index.iter_mut().zip(dims).rev() {
        *slot = rest % dim.max(1);
        rest /= dim.max(1);
    }
    index
}

/// [`reject_nan`] of values of any tropical dtype.
pub(crate) fn reject_nan_of<T: Scalar>(argument: &str, data: &[T], dims: &[usize]) -> Result<()> {
    if T::DTYPE == Dtype::F32 {
        return reject_nan(argument, T::words(data), dims);
    }
    match data.iter().position(|v| v.is_nan()) {
        Some(flat) => Err(nan_error(argument, &unravel(flat, dims), dims)),
        None => Ok(()),
    }
}

/// [`largest_finite`] of values of any tropical dtype.
pub(crate) fn largest_finite_of<T: Scalar>(data: &[T]) -> f64 {
    if T::DTYPE == Dtype::F32 {
        return largest_finite(T::words(data));
    }
    data.iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.to_f64().abs()))
}

/// The bits of a float32's magnitude: for magnitudes, their order is the values' order;
/// above [`INF_BITS`] a NaN.
const MAGNITUDE: u32 = 0x7fff_ffff;
/// The magnitude bits of infinity.
const INF_BITS: u32 = 0x7f80_0000;
/// Words the NaN test scans at once before searching a block word by word.
const SCAN_BLOCK: usize = 4096;
/// Lanes the scans keep apart (an array, so that the compiler makes the loop element-wise
/// vector operations: a word-by-word search or a reduction of one value is not vectorised,
/// and cost more than a tenth of a 1024² host product for the operands' two scans each).
const LANES: usize = 16;

/// Fails with an error naming `argument` and the first position of a NaN in `data`, a flat
/// row-major array of shape `dims` (indexed like numpy: `[batch, row, column]`).
pub fn reject_nan(argument: &str, data: &[f32], dims: &[usize]) -> Result<()> {
    let has_nan = |block: &[f32]| top_magnitude_bits(block, false) > INF_BITS;
    let Some(block) = data.chunks(SCAN_BLOCK).position(has_nan) else {
        return Ok(());
    };
    let at = block * SCAN_BLOCK;
    let flat = at + data[at..].iter().position(|v| v.is_nan()).unwrap_or(0);
    Err(nan_error(argument, &unravel(flat, dims), dims))
}

/// The largest magnitude bits of `data`'s words (0 for none), of its finite words only when
/// `finite_only`.
fn top_magnitude_bits(data: &[f32], finite_only: bool) -> u32 {
    let word = |v: &f32| {
        let m = v.to_bits() & MAGNITUDE;
        // Below 2^31, so the signed comparisons SSE2 has order them.
        if finite_only && m >= INF_BITS {
            0
        } else {
            m as i32
        }
    };
    let mut top = [0i32; LANES];
    let mut chunks = data.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (t, v) in top.iter_mut().zip(chunk) {
            let m = word(v);
            *t = if m > *t { m } else { *t };
        }
    }
    let rest = chunks.remainder().iter().map(word);
    top.into_iter().chain(rest).max().unwrap_or(0) as u32
}

/// Refuses a whole-bound operand larger than some device can bind.
pub(crate) fn check_whole_binding(
    ctx: &MultiGpuContext,
    argument: &str,
    words: usize,
) -> Result<()> {
    let limit = ctx
        .devices()
        .iter()
        .map(|d| d.max_binding_bytes())
        .min()
        .unwrap_or(u64::MAX);
    let bytes = 4 * words as u64;
    if bytes > limit {
        return Err(Error::invalid(
            argument,
            format!(
                "expected at most {limit} bytes (the smallest storage binding of the context's \
                 devices; every device holds it whole), got {bytes} bytes"
            ),
        ));
    }
    Ok(())
}

/// The largest finite magnitude in `data` (0 without one), from the magnitudes' bits (which
/// order them exactly; infinities and NaN count as 0).
pub(crate) fn largest_finite(data: &[f32]) -> f64 {
    f64::from(f32::from_bits(top_magnitude_bits(data, true)))
}

/// Whether a product of operands whose largest finite magnitudes are `top_a` and `top_b`
/// may overflow its dtype, whose largest value is `max` (one sum per term, no
/// accumulation; a float64 sum that overflows float64 itself is infinite, which counts).
pub(crate) fn may_overflow(top_a: f64, top_b: f64, max: f64) -> bool {
    top_a + top_b > max
}

/// Refuses a result that a float32 overflow made wrong. A term `a + b` of finite operands
/// beyond float32 rounds to ±inf: +inf in a max-plus product (−inf in min-plus) becomes the
/// result, the other infinity reads as the tropical zero. Either way a wrong result is
/// infinite, so only infinite entries need a look: each is recomputed in float64 and, when
/// finite there, is an overflow error naming the entry (never a quiet inf, which would read
/// as "no path" or the tropical zero). Callers run it only when [`may_overflow`] holds.
pub(crate) fn check_overflow<T: Scalar>(product: Product<'_, T>, out: &[T]) -> Result<()> {
    let Product {
        semiring,
        shape,
        a,
        b,
    } = product;
    let BatchShape { m, k, n, .. } = shape;
    for (t, &v) in out.iter().enumerate() {
        if v.is_finite() {
            continue;
        }
        let (p, i, j) = (t / (m * n), t / n % m, t % n);
        let zero = semiring.zero_of::<T>();
        // Halved, each term is finite in float64 for float64 operands too.
        let exact = (0..k)
            .map(|l| {
                let (x, y) = (a[(p * m + i) * k + l], b[(p * k + l) * n + j]);
                if x == zero || y == zero {
                    zero.to_f64()
                } else {
                    x.to_f64() / 2.0 + y.to_f64() / 2.0
                }
            })
            .fold(zero.to_f64(), |acc, x| match semiring {
                Semiring::MaxPlus => acc.max(x),
                Semiring::MinPlus => acc.min(x),
            });
        if exact.is_finite() {
            let (dtype, range) = (T::DTYPE, T::RANGE);
            let shown = if (2.0 * exact).is_finite() {
                format!("{:e}", 2.0 * exact)
            } else {
                format!("2 × {exact:e}")
            };
            return Err(Error::invalid(
                "a",
                format!(
                    "tropical products overflow {dtype}: out[{p}, {i}, {j}] = {shown} is \
                     beyond the {dtype} range ({range}); rescale the operands"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_is_reported_with_its_position() {
        let err = reject_nan("a", &[0.0, 1.0, f32::NAN], &[1, 3, 1]).unwrap_err();
        assert!(
            err.to_string().contains("at [0, 2, 0] of shape (1, 3, 1)"),
            "{err}"
        );
        let mut batched = vec![0.0; 2 * 3 * 4];
        batched[4 * 3 + 5] = f32::NAN;
        let err = reject_nan("a", &batched, &[2, 3, 4]).unwrap_err();
        assert!(
            err.to_string().contains("at [1, 1, 1] of shape (2, 3, 4)"),
            "{err}"
        );
        let err = reject_nan("x", &[0.0, f32::NAN], &[2]).unwrap_err();
        assert!(err.to_string().contains("at [1] of shape (2,)"), "{err}");
    }

    #[test]
    fn the_block_scans_find_the_first_nan_and_the_largest_finite_magnitude() {
        // Past a scan block and in the short block at the end, beside infinities, ±0 and
        // a subnormal: the first NaN's position and the largest finite magnitude as the
        // word-by-word definitions give them.
        let n = 2 * SCAN_BLOCK + 37;
        let base: Vec<f32> = (0..n).map(|i| (i % 97) as f32 - 48.0).collect();
        for &at in &[0, 5, SCAN_BLOCK - 1, SCAN_BLOCK, 2 * SCAN_BLOCK + 36] {
            for &second in &[None, Some(n - 1)] {
                let mut data = base.clone();
                data[at] = f32::NAN;
                if let Some(j) = second {
                    data[j] = -f32::NAN;
                }
                data[1] = f32::INFINITY;
                data[2] = f32::NEG_INFINITY;
                let err = reject_nan("a", &data, &[n]).unwrap_err().to_string();
                assert!(err.contains(&format!("at [{at}] of shape ({n},)")), "{err}");
                assert_eq!(largest_finite(&data), 48.0);
            }
        }
        assert!(reject_nan("a", &base, &[n]).is_ok());
        let mut big = vec![-0.0, 1e-45, f32::NEG_INFINITY, -f32::MAX];
        assert_eq!(largest_finite(&big), f64::from(f32::MAX));
        big[3] = f32::INFINITY;
        assert_eq!(largest_finite(&big), f64::from(1e-45f32));
        assert_eq!(largest_finite(&[]), 0.0);
    }

    #[test]
    fn shapes_are_checked_in_the_callers_terms() {
        let text = |r: Result<BatchShape>| r.unwrap_err().to_string();
        assert_eq!(
            text(matmul_shape(&[4], &[4, 2])),
            "a: expected shape (m, k) or (batch, m, k), got (4,)"
        );
        assert_eq!(
            text(matmul_shape(&[3, 4], &[1, 4, 2])),
            "b: expected shape (k, n) like a, got (1, 4, 2)"
        );
        assert_eq!(
            text(matmul_shape(&[2, 3, 4], &[2, 5, 2])),
            "b: expected shape (2, 4, n), got (2, 5, 2)"
        );
        assert_eq!(
            text(matvec_shape(&[3, 4], &[3])),
            "x: expected shape (4,), got (3,)"
        );
        let shape = matmul_shape(&[3, 4], &[4, 2]).unwrap();
        assert_eq!(
            shape,
            BatchShape {
                batch: 1,
                m: 3,
                k: 4,
                n: 2
            }
        );
    }
}
