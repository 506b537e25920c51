//! Argument checks of the family's entry points: errors that name the argument, say what
//! was expected and what came, and point at the first offending entry.

use crate::error::{Error, Result};

/// Rows of a flat row-major (N, `width`) array named `argument`, for `width` within
/// `1..=max_width`.
pub(crate) fn rows(argument: &str, data: &[f32], width: usize, max_width: usize) -> Result<usize> {
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
pub(crate) fn same_shape(
    argument: &str,
    data: &[f32],
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

/// Every value satisfies `ok`, else an invalid-argument error naming `argument`, the
/// requirement and the first offending entry.
pub(crate) fn all_values(
    argument: &str,
    data: &[f32],
    width: usize,
    requirement: &str,
    ok: impl Fn(f32) -> bool,
) -> Result<()> {
    match data.iter().position(|&v| !ok(v)) {
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

/// Every value is finite.
pub(crate) fn finite(argument: &str, data: &[f32], width: usize) -> Result<()> {
    all_values(argument, data, width, "finite values", f32::is_finite)
}
