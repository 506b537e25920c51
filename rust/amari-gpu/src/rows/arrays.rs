//! The arrays of a `map_rows` call as the caller gave them (host words or resident rows,
//! each with its shape) and their checks: one owner for both kinds, every error naming
//! `arrays[k]` and its shape as the caller wrote it.

use crate::dtype::Dtype;
use crate::error::{shape_text, Error, Result};
use crate::resident::Operand;

/// One array argument of a `map_rows` call as the caller gave it: host words or a resident
/// array, of shape `(N, C)` (a row per item) or `(C,)` (one row for every item; host only).
#[derive(Clone, Copy)]
pub struct RowArray<'a> {
    /// The words, or the resident rows.
    pub data: Operand<'a>,
    /// The caller's shape.
    pub shape: &'a [usize],
}

impl RowArray<'_> {
    /// Columns: the `C` of `array<amari_float, C>`.
    pub(crate) fn cols(&self) -> usize {
        self.shape.last().copied().unwrap_or(0)
    }

    /// Whether one row is applied to every item.
    pub(crate) fn broadcast(&self) -> bool {
        self.shape.len() == 1
    }
}

/// A `map_rows` call: the user's WGSL, the arrays in `row`'s parameter order, the output
/// width, the named f32 parameters (readable in WGSL as `params.NAME`) and the rows' dtype
/// (float32 or float64; host arrays hold its words, two per float64 value).
#[derive(Clone)]
pub struct RowsCall<'a> {
    /// WGSL defining `fn row`.
    pub source: &'a str,
    /// The arrays, in parameter order.
    pub arrays: Vec<RowArray<'a>>,
    /// Words `row` returns per item.
    pub out_cols: usize,
    /// Named parameters.
    pub params: Vec<(String, f32)>,
    /// What the rows hold and `row` computes in.
    pub dtype: Dtype,
}

/// Refuses an array whose shape is not `(N, C)` or `(C,)` with C >= 1 (a resident one
/// `(N, C)` of `dtype`), or whose words (`dtype`'s) do not make up its shape.
fn check_array(argument: &str, array: &RowArray<'_>, dtype: Dtype) -> Result<()> {
    let shape = array.shape;
    let resident = matches!(array.data, Operand::Resident(_));
    let wanted = if resident { 2..=2 } else { 1..=2 };
    if !wanted.contains(&shape.len()) || array.cols() == 0 {
        let expected = if resident {
            "(N, C) with C >= 1 for a DeviceArray (a (C,) row for every item is passed as a \
             numpy array)"
        } else {
            "(N, C) or (C,) with C >= 1"
        };
        return Err(Error::Shape {
            argument: argument.into(),
            expected: expected.into(),
            actual: shape_text(shape),
        });
    }
    if let Operand::Resident(r) = array.data {
        if r.dtype() != dtype {
            return Err(Error::invalid(
                argument,
                format!(
                    "expected a {dtype} array (the call computes in {dtype}), got a DeviceArray \
                     of {}; pass dtype=np.{}, or the rows as a numpy array",
                    r.dtype(),
                    r.dtype()
                ),
            ));
        }
    }
    let width = dtype.words(array.cols())?;
    let (rows, cols) = match array.data {
        Operand::Host(data) => (data.len() / width, data.len() % width),
        Operand::Resident(r) => (r.rows(), r.cols().abs_diff(width)),
    };
    let lead = if array.broadcast() { 1 } else { shape[0] };
    if (rows, cols) != (lead, 0) {
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!("{} (the words of its rows)", shape_text(shape)),
            actual: format!("{rows} rows"),
        });
    }
    Ok(())
}

/// The items of a call (the rows of its per-row arrays), checking every array's shape and
/// that their rows agree.
pub(crate) fn items(call: &RowsCall<'_>) -> Result<usize> {
    if call.arrays.is_empty() {
        return Err(Error::invalid(
            "arrays",
            "expected at least one array, got none",
        ));
    }
    if call.out_cols == 0 {
        return Err(Error::invalid(
            "out_cols",
            "expected an integer >= 1, got 0",
        ));
    }
    let mut rows: Option<(usize, usize)> = None;
    for (k, array) in call.arrays.iter().enumerate() {
        let argument = format!("arrays[{k}]");
        check_array(&argument, array, call.dtype)?;
        if array.broadcast() {
            continue;
        }
        let n = array.shape[0];
        match rows {
            Some((first, n0)) if n0 != n => {
                return Err(Error::Shape {
                    argument,
                    expected: format!("({n0}, {}) (the rows of arrays[{first}])", array.cols()),
                    actual: shape_text(array.shape),
                });
            }
            Some(_) => {}
            None => rows = Some((k, n)),
        }
    }
    // Only broadcast rows: one item.
    Ok(rows.map_or(1, |(_, n)| n))
}
