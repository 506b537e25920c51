//! Argument checks of the family's entry points: errors that name the argument, say what
//! was expected and what came, and point at the first offending entry.

use crate::error::{shape_text, Error, Result};
use crate::resident::Operand;

/// (N, W) from `dims`, the shape of the operand named `argument` as the caller gave it (a
/// numpy array's own; a DeviceArray's logical shape, since its rows and row width alone
/// would take an (N, K, K) array for (N·K, K) rows): two axes, whose words the operand
/// holds. Shape only: the values are the run's to read.
pub(crate) fn matrix(
    argument: &str,
    operand: Operand<'_>,
    dims: &[usize],
) -> Result<(usize, usize)> {
    matrix_in(argument, operand, dims, 1)
}

/// [`matrix`] of a call whose host operands hold values of `host_words` words each (2 for
/// float64 host operands beside a float64 DeviceArray); a DeviceArray's values are words
/// of its dtype ([`value_words`]).
pub(crate) fn matrix_in(
    argument: &str,
    operand: Operand<'_>,
    dims: &[usize],
    host_words: usize,
) -> Result<(usize, usize)> {
    let (n, w) = two_axes(argument, dims)?;
    let (expected, actual) = match operand {
        Operand::Resident(array) => {
            let words = value_words(array);
            if (array.rows(), array.cols()) == (n, w * words) {
                return Ok((n, w));
            }
            (
                "the DeviceArray's rows and row width",
                format!("{} rows of {}", array.rows(), array.cols() / words),
            )
        }
        Operand::Host(data) if n.checked_mul(w * host_words) == Some(data.len()) => {
            return Ok((n, w))
        }
        Operand::Host(data) => ("the array's words", format!("{} floats", data.len())),
    };
    Err(Error::Shape {
        argument: argument.into(),
        expected: format!("{} ({expected})", shape_text(dims)),
        actual,
    })
}

/// Words of one value of `array`: two for float64, else one (a row's words as the
/// shaders read them).
pub(crate) fn value_words(array: &crate::resident::ResidentArray) -> usize {
    if array.dtype() == crate::dtype::Dtype::F64 {
        2
    } else {
        1
    }
}

/// (N, W) from `dims`, the shape of a host array named `argument` (whose values its shape
/// counts): two axes.
pub(crate) fn two_axes(argument: &str, dims: &[usize]) -> Result<(usize, usize)> {
    match *dims {
        [n, w] => Ok((n, w)),
        _ => Err(Error::Shape {
            argument: argument.into(),
            expected: "(N, W)".into(),
            actual: shape_text(dims),
        }),
    }
}

/// `dims`, the shape of the vector named `argument` as the caller gave it, is (`n`,).
pub(crate) fn vector(argument: &str, dims: &[usize], n: usize) -> Result<()> {
    if dims == [n] {
        return Ok(());
    }
    Err(Error::Shape {
        argument: argument.into(),
        expected: shape_text(&[n]),
        actual: shape_text(dims),
    })
}

/// Rows of a flat row-major (N, `width`) array named `argument`, for `width` within
/// `1..=max_width`.
pub(crate) fn rows<T>(argument: &str, data: &[T], width: usize, max_width: usize) -> Result<usize> {
    if width == 0 || width > max_width {
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!("(N, W) with 1 <= W <= {max_width}"),
            actual: format!("W = {width}"),
        });
    }
    Error::rows(argument, data, width, &format!("(N, {width})"))
}

/// `data` has exactly `len` words, else a shape error naming `argument`.
pub(crate) fn same_shape<T>(
    argument: &str,
    data: &[T],
    rows: usize,
    width: Option<usize>,
) -> Result<()> {
    let len = rows * width.unwrap_or(1);
    if data.len() == len {
        return Ok(());
    }
    let shape = |r: usize| match width {
        Some(w) => format!("({r}, {w})"),
        None => format!("({r},)"),
    };
    Err(Error::Shape {
        argument: argument.into(),
        expected: shape(rows),
        actual: match width {
            Some(w) if data.len().is_multiple_of(w) => shape(data.len() / w),
            _ => format!("{} floats", data.len()),
        },
    })
}

/// Where in a row-major array of `width` columns flat index `index` lies.
pub(crate) fn position(index: usize, width: usize) -> String {
    if width == 1 {
        format!("[{index}]")
    } else {
        format!("[{}, {}]", index / width, index % width)
    }
}

/// Values above which [`all_values`] scans in parallel (4 MiB of float32).
const PARALLEL_VALUES: usize = 1 << 20;

/// Whether [`all_values`] scans `len` values in parallel blocks (on the current rayon pool:
/// a call runs it on the host device's threads, `MultiGpuContext::on_host_threads`).
pub(crate) fn values_in_parallel(len: usize) -> bool {
    len > PARALLEL_VALUES
}

/// Every value satisfies `ok`, else an invalid-argument error naming `argument`, the
/// requirement and the first offending entry.
pub(crate) fn all_values<T: Copy + Sync + std::fmt::Display>(
    argument: &str,
    data: &[T],
    width: usize,
    requirement: &str,
    ok: impl Fn(T) -> bool + Sync,
) -> Result<()> {
    use rayon::prelude::*;
    // Blocks tested whole first: a loop without an early exit vectorises (a scan of
    // float64 scores ran at a fraction of the memory's speed as one `position`), and
    // only a block that fails is searched for its first offending entry.
    const BLOCK: usize = 4096;
    let passes = |block: &[T]| block.iter().fold(true, |all, &v| all & ok(v));
    // A large input is scanned on rayon's pool (the first failing block wins, whichever
    // thread finds it): on one thread the check of 65,536 x 256 float64 scores was a tenth
    // of a Fisher call's CPU, its cores otherwise idle. A small one is scanned here, where a
    // hand-off to the pool would cost more than the scan.
    let bad = if values_in_parallel(data.len()) {
        data.par_chunks(BLOCK).position_first(|block| !passes(block))
    } else {
        data.chunks(BLOCK).position(|block| !passes(block))
    };
    match bad.and_then(|b| {
        let i = data[b * BLOCK..].iter().position(|&v| !ok(v));
        i.map(|i| b * BLOCK + i)
    }) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(
            argument,
            format!(
                "expected {requirement}, got {} at {}",
                data[i],
                position(i, width)
            ),
        )),
    }
}

/// The summed P x P Fisher matrix is finite, else the error naming the first entry whose
/// `dtype` accumulation overflowed.
pub(crate) fn accumulated(matrix: &[f64], p: usize, dtype: &str) -> Result<()> {
    match matrix.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(
            "scores",
            format!(
                "the {dtype} accumulation overflowed at F{}: weighted products of scores \
                 exceed the {dtype} range; rescale the scores (or the weights)",
                position(i, p)
            ),
        )),
    }
}

/// Every value (float32 or float64) is finite.
pub(crate) fn finite<T: Copy + Sync + std::fmt::Display + Into<f64>>(
    argument: &str,
    data: &[T],
    width: usize,
) -> Result<()> {
    all_values(argument, data, width, "finite values", |v| v.into().is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked_as_the_caller_gave_them() {
        let data = [0.0f32; 6];
        assert_eq!(matrix("scores", Operand::Host(&data), &[2, 3]), Ok((2, 3)));
        let text = |e: Error| e.to_string();
        let three = matrix("probs", Operand::Host(&data), &[1, 2, 3]).map_err(text);
        assert_eq!(
            three,
            Err("probs: expected shape (N, W), got (1, 2, 3)".into())
        );
        let short = matrix("mean", Operand::Host(&data), &[3, 3]).map_err(text);
        assert_eq!(
            short,
            Err("mean: expected shape (3, 3) (the array's words), got 6 floats".into())
        );
        assert_eq!(vector("weights", &[2], 2), Ok(()));
        assert_eq!(
            vector("weights", &[2, 1], 2).map_err(text),
            Err("weights: expected shape (2,), got (2, 1)".into())
        );
    }
}
