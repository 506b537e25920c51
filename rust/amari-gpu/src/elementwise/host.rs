//! The host twin of `shaders/elementwise.wgsl`: the same IEEE operation per word (Rust's
//! `+ - * /` and `sqrt` are the correctly rounded ones numpy's float32 loops use), the
//! comparisons, `negative` and `absolute` on the bits as the shader does. Rows are split
//! over the rayon pool; no `fma`, so the device's fma mode changes nothing.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::op::{Layout, Op};
use crate::kernel::{FmaMode, HostImpl};

/// Rows per rayon task.
const GRAIN: usize = 1024;

/// `op` over rows of `cols` words, the second operand laid out as `layout` (`swap`: it is
/// the left operand): what `elementwise::kernel` builds the WGSL kernel of.
#[derive(Debug, Clone, Copy)]
pub struct Elementwise {
    /// The operation.
    pub op: Op,
    /// Words per row.
    pub cols: usize,
    /// How the second operand lines up with the rows.
    pub layout: Layout,
    /// Whether the second operand is the left one.
    pub swap: bool,
}

/// numpy's answer of `op` for one pair of words (`y` unused by unary operations).
pub fn apply(op: Op, x: f32, y: f32) -> f32 {
    // Comparisons with a NaN are false (`!=` true), as IEEE and numpy say; Rust's
    // operators already compare so.
    let truth = |t: bool| if t { 1.0 } else { 0.0 };
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
        Op::Negative => f32::from_bits(x.to_bits() ^ 0x8000_0000),
        Op::Absolute => f32::from_bits(x.to_bits() & 0x7fff_ffff),
        Op::Sqrt => x.sqrt(),
    }
}

impl HostImpl for Elementwise {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let cols = self.cols;
        let (b_row, b_col) = self.layout.strides(cols);
        let (a, b) = (inputs[0], inputs[1]);
        let Elementwise { op, swap, .. } = *self;
        output
            .par_chunks_mut(cols * GRAIN)
            .enumerate()
            .for_each(|(task, out)| {
                let first = range.start + task * GRAIN;
                for (r, row) in out.chunks_mut(cols).enumerate() {
                    let i = first + r;
                    for (k, word) in row.iter_mut().enumerate() {
                        let own = a[i * cols + k];
                        let other = b[i * b_row + k * b_col];
                        let (x, y) = if swap { (other, own) } else { (own, other) };
                        *word = apply(op, x, y);
                    }
                }
            });
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}
