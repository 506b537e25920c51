//! The elementwise operations (numpy's ufunc names) and how a second operand lines up with
//! the rows: what the WGSL builder and the host twin both read.

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::kernel::Input;

/// The operations, by numpy's ufunc name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `x + y`.
    Add,
    /// `x - y`.
    Subtract,
    /// `x * y`.
    Multiply,
    /// `x / y`.
    Divide,
    /// `x < y` as 1.0 / 0.0.
    Less,
    /// `x <= y`.
    LessEqual,
    /// `x > y`.
    Greater,
    /// `x >= y`.
    GreaterEqual,
    /// `x == y`.
    Equal,
    /// `x != y` (true with a NaN operand).
    NotEqual,
    /// `-x` (the sign bit flipped, NaN too, as numpy does).
    Negative,
    /// `|x|` (the sign bit cleared).
    Absolute,
    /// `sqrt(x)`.
    Sqrt,
}

/// Every operation, in the order of their codes in the shader.
pub const OPS: [Op; 13] = [
    Op::Add,
    Op::Subtract,
    Op::Multiply,
    Op::Divide,
    Op::Less,
    Op::LessEqual,
    Op::Greater,
    Op::GreaterEqual,
    Op::Equal,
    Op::NotEqual,
    Op::Negative,
    Op::Absolute,
    Op::Sqrt,
];

impl Op {
    /// numpy's name of the ufunc.
    pub fn name(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Subtract => "subtract",
            Op::Multiply => "multiply",
            Op::Divide => "divide",
            Op::Less => "less",
            Op::LessEqual => "less_equal",
            Op::Greater => "greater",
            Op::GreaterEqual => "greater_equal",
            Op::Equal => "equal",
            Op::NotEqual => "not_equal",
            Op::Negative => "negative",
            Op::Absolute => "absolute",
            Op::Sqrt => "sqrt",
        }
    }

    /// The operation named `name` (numpy's ufunc name); an error naming `op` otherwise.
    pub fn parse(name: &str) -> Result<Op> {
        OPS.into_iter().find(|op| op.name() == name).ok_or_else(|| {
            let known: Vec<&str> = OPS.iter().map(|op| op.name()).collect();
            Error::invalid(
                "op",
                format!("expected one of {}, got {name:?}", known.join(", ")),
            )
        })
    }

    /// Its code in the shader (`OP`).
    pub(super) fn code(self) -> u32 {
        OPS.iter().position(|&op| op == self).unwrap_or(0) as u32
    }

    /// Whether it computes on the values (`+ - * /`, `sqrt`) rather than reading their
    /// bits (the comparisons, `negative`, `absolute`).
    pub fn is_arithmetic(self) -> bool {
        matches!(
            self,
            Op::Add | Op::Subtract | Op::Multiply | Op::Divide | Op::Sqrt
        )
    }

    /// Whether it takes one operand.
    pub fn is_unary(self) -> bool {
        matches!(self, Op::Negative | Op::Absolute | Op::Sqrt)
    }
}

/// How the second operand's words line up with the first's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// The same rows (`cols` words per row).
    Rows,
    /// One row of `cols` words for every row.
    Row,
    /// One word for every word (a scalar; a unary operation's unused word too).
    Scalar,
}

impl Layout {
    /// (B_ROW, B_COL): value k of row i is value `i * B_ROW + k * B_COL` of `b`.
    pub(super) fn strides(self, cols: usize) -> (usize, usize) {
        match self {
            Layout::Rows => (cols, 1),
            Layout::Row => (0, 1),
            Layout::Scalar => (0, 0),
        }
    }

    /// How the operand binds for rows of `cols` values of `dtype` (a scalar is one value;
    /// a float16 one, one word holding it twice).
    pub(super) fn input(self, cols: usize, dtype: Dtype) -> Input {
        match self {
            Layout::Rows => Input::PerItem(dtype.words_of(cols)),
            Layout::Row => Input::Whole(dtype.words_of(cols)),
            Layout::Scalar => Input::Whole(dtype.words_of(1).max(1)),
        }
    }
}
