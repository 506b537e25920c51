//! The checks of a tropical product's arguments, one owner for host and resident operands:
//! shapes as the caller gave them (an unbatched `(m, k)` or a batched `(batch, m, k)`), NaN
//! at its position in those shapes, the whole-bound operand's size, and float32 overflow of
//! the result. Errors name the caller's arguments and speak in the caller's dimensions.

use rayon::prelude::*;

use crate::context::MultiGpuContext;
use crate::dtype::Dtype;
use crate::error::{shape_text, Error, Result};
use crate::host::simd::{dispatch, Task};
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

/// One pass over an operand's values (float32 or float64): a NaN error naming `argument`
/// and the NaN's first position in `dims`, else the largest finite magnitude (0 without
/// one), which tells whether a term may overflow ([`may_overflow`]).
pub(crate) fn checked_magnitude<T: Scalar>(argument: &str, data: &[T], dims: &[usize]) -> Result<f64> {
    let largest = match T::DTYPE {
        Dtype::F32 => magnitudes(T::words(data)).finite_or_nan(),
        _ => {
            let (top, nan) = data.iter().fold((0.0f64, false), |(top, nan), v| {
                let top = if v.is_finite() { top.max(v.to_f64().abs()) } else { top };
                (top, nan | v.is_nan())
            });
            (!nan).then_some(top)
        }
    };
    largest.ok_or_else(|| {
        let flat = data.iter().position(|v| v.is_nan()).unwrap_or(0);
        nan_error(argument, &unravel(flat, dims), dims)
    })
}

/// The bits of a float32's magnitude: for magnitudes, their order is the values' order;
/// above [`INF_BITS`] a NaN.
const MAGNITUDE: u32 = 0x7fff_ffff;
/// The magnitude bits of infinity.
const INF_BITS: u32 = 0x7f80_0000;
/// Words of a block of the parallel scan, and the words above which the scan is parallel:
/// a 1024² operand (4 MiB) is four blocks, read by both of rayon's threads, where on the
/// calling thread alone its scan was a tenth of a 1024² max-plus call's wall time.
const SCAN_BLOCK: usize = 1 << 18;
/// Lanes the scan keeps apart (an array, so that the compiler makes the loop element-wise
/// vector operations: a word-by-word search or a reduction of one value is not vectorised).
const LANES: usize = 16;

/// The largest magnitude bits of float32 words, of all of them and of the finite ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Magnitudes {
    all: u32,
    finite: u32,
}

impl Magnitudes {
    /// The larger of each.
    fn max(self, other: Magnitudes) -> Magnitudes {
        Magnitudes {
            all: self.all.max(other.all),
            finite: self.finite.max(other.finite),
        }
    }

    /// The largest finite magnitude, or None when a word is NaN.
    fn finite_or_nan(self) -> Option<f64> {
        (self.all <= INF_BITS).then(|| f64::from(f32::from_bits(self.finite)))
    }
}

/// [`Magnitudes`] of `data`: one read of its words for both (the NaN test and the largest
/// finite magnitude were two scans each), compiled for the CPU's SIMD level, and on
/// rayon's pool in blocks for a large operand. A maximum is exact in any order.
fn magnitudes(data: &[f32]) -> Magnitudes {
    if !scanned_in_parallel(data.len()) {
        return dispatch(Scan(data));
    }
    data.par_chunks(SCAN_BLOCK)
        .map(|block| dispatch(Scan(block)))
        .reduce(Magnitudes::default, Magnitudes::max)
}

/// Whether an operand of `words` float32 words is scanned in parallel blocks.
pub(crate) fn scanned_in_parallel(words: usize) -> bool {
    words > SCAN_BLOCK
}

/// One block's [`Magnitudes`], as a SIMD task.
struct Scan<'a>(&'a [f32]);

impl Task for Scan<'_> {
    type Output = Magnitudes;

    #[inline(always)]
    fn run(self) -> Magnitudes {
        // Magnitudes are below 2^31, so the signed comparisons of every level order them.
        let magnitude = |v: &f32| (v.to_bits() & MAGNITUDE) as i32;
        let finite = |m: i32| if m < INF_BITS as i32 { m } else { 0 };
        let (mut all, mut fin) = ([0i32; LANES], [0i32; LANES]);
        let mut chunks = self.0.chunks_exact(LANES);
        for chunk in &mut chunks {
            for ((a, f), v) in all.iter_mut().zip(&mut fin).zip(chunk) {
                let m = magnitude(v);
                *a = if m > *a { m } else { *a };
                let m = finite(m);
                *f = if m > *f { m } else { *f };
            }
        }
        let rest = chunks.remainder().iter().map(magnitude);
        let top = |lanes: [i32; LANES], rest: &mut dyn Iterator<Item = i32>| {
            lanes.into_iter().chain(rest).max().unwrap_or(0) as u32
        };
        Magnitudes {
            all: top(all, &mut rest.clone()),
            finite: top(fin, &mut rest.map(finite)),
        }
    }
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
        let nan = |data: &[f32], dims: &[usize]| {
            checked_magnitude("a", data, dims).unwrap_err().to_string()
        };
        let err = nan(&[0.0, 1.0, f32::NAN], &[1, 3, 1]);
        assert!(err.contains("at [0, 2, 0] of shape (1, 3, 1)"), "{err}");
        let mut batched = vec![0.0; 2 * 3 * 4];
        batched[4 * 3 + 5] = f32::NAN;
        let err = nan(&batched, &[2, 3, 4]);
        assert!(err.contains("at [1, 1, 1] of shape (2, 3, 4)"), "{err}");
        let err = checked_magnitude("x", &[0.0f64, f64::NAN], &[2]).unwrap_err();
        assert!(err.to_string().starts_with("x: "), "{err}");
        assert!(err.to_string().contains("at [1] of shape (2,)"), "{err}");
    }

    #[test]
    fn the_scan_finds_the_first_nan_and_the_largest_finite_magnitude() {
        // Past a scan block (so scanned in parallel blocks) and in the short run of words
        // at the end, beside infinities, ±0 and a subnormal: the first NaN's position and
        // the largest finite magnitude as the word-by-word definitions give them, in
        // float32 and in float64.
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
                let err = checked_magnitude("a", &data, &[n]).unwrap_err().to_string();
                assert!(err.contains(&format!("at [{at}] of shape ({n},)")), "{err}");
                let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
                let err = checked_magnitude("a", &wide, &[n]).unwrap_err().to_string();
                assert!(err.contains(&format!("at [{at}] of shape ({n},)")), "{err}");
                data[at] = 1.0;
                if let Some(j) = second {
                    data[j] = -48.5;
                }
                let want = if second.is_some() { 48.5 } else { 48.0 };
                assert_eq!(checked_magnitude("a", &data, &[n]).unwrap(), want);
                let wide: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
                assert_eq!(checked_magnitude("a", &wide, &[n]).unwrap(), want);
            }
        }
        let largest = |data: &[f32]| checked_magnitude("a", data, &[data.len()]).unwrap();
        let mut big = vec![-0.0, 1e-45, f32::NEG_INFINITY, -f32::MAX];
        assert_eq!(largest(&big), f64::from(f32::MAX));
        big[3] = f32::INFINITY;
        assert_eq!(largest(&big), f64::from(1e-45f32));
        assert_eq!(largest(&[]), 0.0);
        // Every position of a NaN in the words past the vector lanes.
        for at in 0..LANES + 3 {
            let mut data = vec![2.0f32; LANES + 3];
            data[at] = f32::NAN;
            let err = checked_magnitude("a", &data, &[data.len()]).unwrap_err();
            assert!(err.to_string().contains(&format!("at [{at}]")), "{err}");
        }
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
