//! The host twin of the elementwise WGSL (`shaders/elementwise.wgsl` for float32, `wgsl`
//! for float64 and float16): the same IEEE operation per value (Rust's `+ - * /` and `sqrt`
//! are the correctly rounded ones numpy's loops use; float16 values are widened to float32,
//! computed there and rounded once, as numpy's float16 loops do), the comparisons,
//! `negative` and `absolute` on the bits as the shaders do. Rows are split over the rayon
//! pool; no `fma`, so the device's fma mode changes nothing.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::op::{Layout, Op};
use crate::dtype::{read_f16_bits, read_f64, write_f64, Dtype};
use crate::host::f16::{to_f16, to_f32};
use crate::kernel::{FmaMode, HostImpl};

/// Rows per rayon task.
const GRAIN: usize = 1024;

/// `op` over rows of `cols` values of `dtype`, the second operand laid out as `layout`
/// (`swap`: it is the left operand): what `elementwise::kernel` builds the WGSL kernel of.
#[derive(Debug, Clone, Copy)]
pub struct Elementwise {
    /// The operation.
    pub op: Op,
    /// Values per row.
    pub cols: usize,
    /// How the second operand lines up with the rows.
    pub layout: Layout,
    /// Whether the second operand is the left one.
    pub swap: bool,
    /// The dtype of the values (float16: even `cols`).
    pub dtype: Dtype,
}

/// The float types the operations compute in: the sign-bit operations on their bits.
pub trait Real:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    /// 1.0 and 0.0, a comparison's answers.
    const ONE: Self;
    /// 0.0.
    const ZERO: Self;
    /// The sign bit flipped (NaN too, as numpy does).
    fn negative(self) -> Self;
    /// The sign bit cleared.
    fn absolute(self) -> Self;
    /// The correctly rounded square root.
    fn root(self) -> Self;
}

impl Real for f32 {
    const ONE: f32 = 1.0;
    const ZERO: f32 = 0.0;
    fn negative(self) -> f32 {
        f32::from_bits(self.to_bits() ^ 0x8000_0000)
    }
    fn absolute(self) -> f32 {
        f32::from_bits(self.to_bits() & 0x7fff_ffff)
    }
    fn root(self) -> f32 {
        self.sqrt()
    }
}

impl Real for f64 {
    const ONE: f64 = 1.0;
    const ZERO: f64 = 0.0;
    fn negative(self) -> f64 {
        f64::from_bits(self.to_bits() ^ (1 << 63))
    }
    fn absolute(self) -> f64 {
        f64::from_bits(self.to_bits() & !(1 << 63))
    }
    fn root(self) -> f64 {
        self.sqrt()
    }
}

/// numpy's answer of `op` for one pair of values (`y` unused by unary operations).
pub fn apply<T: Real>(op: Op, x: T, y: T) -> T {
    // Comparisons with a NaN are false (`!=` true), as IEEE and numpy say; Rust's
    // operators already compare so.
    let truth = |t: bool| if t { T::ONE } else { T::ZERO };
    match op {
        Op::Add => x + y,
        Op::Subtract => x - y,
        Op::Multiply => x * y,
        Op::Divide => x / y,
        Op::Less => truth(x < y),
        Op::LessEqual => truth(x <= y),
        Op::Greater => truth(x > y),
        Op::GreaterEqual => truth(x >= y),
        Op::Equal => truth(x == y),
        Op::NotEqual => truth(x != y),
        Op::Negative => x.negative(),
        Op::Absolute => x.absolute(),
        Op::Sqrt => x.root(),
    }
}

/// numpy's float16 answer of `op` on the bits `x`, `y`: the sign-bit operations on the
/// bits, the rest computed on the (exact) float32 values and rounded once.
pub fn apply_f16(op: Op, x: u16, y: u16) -> u16 {
    match op {
        Op::Negative => x ^ 0x8000,
        Op::Absolute => x & 0x7fff,
        _ => to_f16(apply(op, to_f32(x), to_f32(y))),
    }
}

/// The (left, right) operands of a row's value and the second operand's (`swap`: the second
/// is the left one).
fn order<T>(swap: bool, own: T, other: T) -> (T, T) {
    if swap {
        (other, own)
    } else {
        (own, other)
    }
}

impl HostImpl for Elementwise {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let cols = self.cols;
        let (b_row, b_col) = self.layout.strides(cols);
        let (a, b) = (inputs[0], inputs[1]);
        let Elementwise {
            op, swap, dtype, ..
        } = *self;
        let row_words = dtype.words_of(cols);
        output
            .par_chunks_mut(row_words * GRAIN)
            .enumerate()
            .for_each(|(task, out)| {
                let first = range.start + task * GRAIN;
                for (r, row) in out.chunks_mut(row_words).enumerate() {
                    let i = first + r;
                    match dtype {
                        Dtype::F32 => {
                            for (k, word) in row.iter_mut().enumerate() {
                                let (x, y) = order(swap, a[i * cols + k], b[i * b_row + k * b_col]);
                                *word = apply(op, x, y);
                            }
                        }
                        Dtype::F64 => {
                            for k in 0..cols {
                                let own = read_f64(a, i * cols + k);
                                let (x, y) = order(swap, own, read_f64(b, i * b_row + k * b_col));
                                write_f64(row, k, apply(op, x, y));
                            }
                        }
                        Dtype::F16 => {
                            for (w, word) in row.iter_mut().enumerate() {
                                let mut bits = 0u32;
                                for half in 0..2 {
                                    let k = 2 * w + half;
                                    let own = read_f16_bits(a, i * cols + k);
                                    let other = read_f16_bits(b, i * b_row + k * b_col);
                                    let (x, y) = order(swap, own, other);
                                    bits |= u32::from(apply_f16(op, x, y)) << (16 * half);
                                }
                                *word = f32::from_bits(bits);
                            }
                        }
                    }
                }
            });
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }

    fn splits(&self, items: usize) -> bool {
        items > GRAIN
    }
}
