//! Grid steps on the host for a band of rows with its ghost rows, as `domain/` runs
//! `shaders/heat.wgsl` and `shaders/life.wgsl`: the same buffer layout (rows padded to whole
//! vec4s / u32 words), the same step rows `lo..hi`, the same arithmetic per cell.
//!
//! Heat: `u + α((up + down) + (left + right) − 4u)` bracketed as written, the update one
//! `fma(α, s − 4u, u)` rounded as the devices round it ([`FmaMode`]; `4u` is exact, so a
//! driver contracting `s − 4u` changes nothing); Dirichlet frame cells, and padding cells,
//! keep their value. One row kernel serves float32 and float64 cells ([`HeatCell`]), as the
//! shader's one source does; its inner cells run in explicit AVX-512 or AVX2 vectors
//! (`domain::heat_simd`) where the CPU has them, the same arithmetic per cell. Life: the
//! shader's word-wise counts (integers, exact). Cells of a row vectorise. One step
//! ([`heat_step`], [`life_step`]) splits its rows across rayon threads; the steps of a
//! host round run several at a time per pass over the rows
//! (`domain::host_blocked`), each row computed by the same row kernel.

use std::ops::{Range, Sub};

use super::heat_simd::{inner2_f32, inner2_f64, inner_f32, inner_f64, Around};
use super::host_blocked::{single, Stencil};
use crate::host::arith::Real;
use crate::host::simd::{dispatch, dispatched, Level, Task};
use crate::kernel::FmaMode;
use crate::tropical::scalar::Scalar;

/// A type heat cells are held and stepped in (float32 or float64): the arithmetic of
/// [`Real`], the range and words of [`Scalar`], and what the overflow scaling of a grid
/// (`domain::heat`) reads of its values.
pub trait HeatCell: Real + Scalar + Sub<Output = Self> + bytemuck::Pod + Default {
    /// 4, the weight of the cell itself.
    const FOUR: Self;
    /// Grids whose largest |u| is at most 2^LIMIT run as given: a step forms
    /// `(up + down) + (left + right) − 4u`, up to 8 max|u| = 2^(LIMIT + 3) = 2^(E − 1), E
    /// the type's largest exponent (its largest finite just under 2^(E + 1)): a factor 2
    /// below 2^E is left for the rounding of steps that the maximum principle otherwise
    /// bounds. LIMIT = E − 4 (float32: 127 − 4 = 123; float64: 1023 − 4 = 1019).
    const LIMIT: i32;
    /// The bits of |value| as an unsigned integer: they order as the magnitudes, with inf
    /// and NaN above every finite value.
    type Bits: Copy + Ord + Default + Send + Sync + Into<u64> + TryFrom<u64>;
    /// The bits of |self|.
    fn abs_bits(self) -> Self::Bits;
    /// The value of bits `bits` of a non-negative value.
    fn from_abs_bits(bits: Self::Bits) -> Self;
    /// Writes the cells of row `out` (its `out.len()` cells: the inner ones in this type's
    /// vectors, the first and last wrapped when `periodic`, else kept) from rows `up`, `at`
    /// and `down` at `level` (`domain::heat_simd`), fused when `FUSED`, and says so; or
    /// writes nothing (no vectors at that level, or a row too short for them).
    fn inner_row<const F: bool>(
        level: Level,
        a: Self,
        rows: Around<'_, Self>,
        out: &mut [Self],
        periodic: bool,
    ) -> bool;
    /// [`inner_row`](Self::inner_row) of two rows one above the other, `outs[0]` from
    /// `rows[..3]` and `outs[1]` from `rows[1..]`, in one sweep (`domain::heat_simd`), or
    /// nothing (no such sweep at `level`).
    fn inner_rows2<const F: bool>(
        level: Level,
        a: Self,
        rows: [&[Self]; 4],
        outs: [&mut [Self]; 2],
        periodic: bool,
    ) -> bool;
}

/// [`HeatCell`] for float type `$t`, whose bits are `$bits` with sign bit `$sign`, whose
/// limit exponent is `$limit`, and whose inner cells `heat_simd::$inner` vectorises.
macro_rules! heat_cell {
    ($t:ty, $bits:ty, $sign:expr, $limit:expr, $inner:ident, $inner2:ident) => {
        impl HeatCell for $t {
            const FOUR: $t = 4.0;
            const LIMIT: i32 = $limit;
            type Bits = $bits;
            #[inline(always)]
            fn abs_bits(self) -> $bits {
                self.to_bits() & !$sign
            }
            fn from_abs_bits(bits: $bits) -> $t {
                <$t>::from_bits(bits)
            }
            #[inline]
            fn inner_row<const F: bool>(
                level: Level,
                a: $t,
                rows: Around<'_, $t>,
                out: &mut [$t],
                periodic: bool,
            ) -> bool {
                $inner::<F>(level, a, rows, out, periodic)
            }
            #[inline]
            fn inner_rows2<const F: bool>(
                level: Level,
                a: $t,
                rows: [&[$t]; 4],
                outs: [&mut [$t]; 2],
                periodic: bool,
            ) -> bool {
                $inner2::<F>(level, a, rows, outs, periodic)
            }
        }
    };
}

heat_cell!(f32, u32, 1u32 << 31, 123, inner_f32, inner2_f32);
heat_cell!(f64, u64, 1u64 << 63, 1019, inner_f64, inner2_f64);

/// One heat step of a band (the uniform of `shaders/heat.wgsl`), on cells of `T`.
#[derive(Debug, Clone)]
pub struct HeatStep<T = f32> {
    /// Cells per row.
    pub width: usize,
    /// Rows of the whole grid.
    pub height: usize,
    /// Global row of buffer row 0 (Dirichlet only).
    pub row0: usize,
    /// Buffer rows this step computes ([`heat_step`]; a blocked pass takes each step's rows
    /// from the band).
    pub rows: Range<usize>,
    /// Whether the grid wraps (else a Dirichlet frame).
    pub periodic: bool,
    /// Diffusion number.
    pub alpha: T,
    /// How the devices round `fma` in `T`.
    pub fma: FmaMode,
}

impl<T> HeatStep<T> {
    /// Floats per buffer row: the width rounded up to whole vec4s.
    pub fn row_cells(&self) -> usize {
        self.width.div_ceil(4) * 4
    }
}

/// Writes buffer rows `step.rows` of `dst` from `src` (both whole band buffers, ghosts
/// included); other rows of `dst` are left as they are.
pub fn heat_step<T: HeatCell>(src: &[T], dst: &mut [T], step: &HeatStep<T>) {
    single(step, step.rows.clone(), src, dst);
}

impl<T: HeatCell> Stencil for HeatStep<T> {
    type Cell = T;

    fn row_len(&self) -> usize {
        self.row_cells()
    }

    fn fixed(&self, r: usize) -> bool {
        !self.periodic && {
            let g = self.row0 + r;
            g == 0 || g + 1 == self.height
        }
    }

    fn row(&self, up: &[T], at: &[T], down: &[T], out: &mut [T]) {
        let (w, level, fused) = (self.width, dispatched(), self.fma == FmaMode::Fused);
        let cells = &mut out[..w];
        let p = self.periodic;
        let vectors = if fused {
            T::inner_row::<true>(level, self.alpha, [up, at, down], cells, p)
        } else {
            T::inner_row::<false>(level, self.alpha, [up, at, down], cells, p)
        };
        self.rest_of_row([up, at, down], out, vectors);
    }

    fn rows2(&self, [up, at, at2, down]: [&[T]; 4], [out, out2]: [&mut [T]; 2]) {
        let (w, level, fused) = (self.width, dispatched(), self.fma == FmaMode::Fused);
        let (cells, cells2) = (&mut out[..w], &mut out2[..w]);
        let (rows, p) = ([up, at, at2, down], self.periodic);
        let vectors = if fused {
            T::inner_rows2::<true>(level, self.alpha, rows, [cells, cells2], p)
        } else {
            T::inner_rows2::<false>(level, self.alpha, rows, [cells, cells2], p)
        };
        if !vectors {
            self.row(up, at, at2, out);
            self.row(at, at2, down, out2);
            return;
        }
        self.rest_of_row([up, at, at2], out, true);
        self.rest_of_row([at, at2, down], out2, true);
    }
}

impl<T: HeatCell> HeatStep<T> {
    /// The cells of row `out` (from rows `[up, at, down]`) the vector kernels did not
    /// write: its padding when `vectors` wrote the row's cells, else every cell.
    fn rest_of_row(&self, [up, at, down]: [&[T]; 3], out: &mut [T], vectors: bool) {
        if vectors {
            // Padding cells keep their value (most rows have none: no copy call then).
            let (w, n) = (self.width, out.len());
            if n > w {
                out[w..].copy_from_slice(&at[w..n]);
            }
            return;
        }
        let row = HeatRow {
            step: self,
            up,
            at,
            down,
            out,
        };
        match self.fma == FmaMode::Fused {
            true => dispatch(Fused(row)),
            false => dispatch(Separate(row)),
        }
    }
}

struct HeatRow<'a, T> {
    step: &'a HeatStep<T>,
    up: &'a [T],
    at: &'a [T],
    down: &'a [T],
    out: &'a mut [T],
}

#[inline(always)]
fn cell<T: HeatCell, const F: bool>(alpha: T, up: T, down: T, left: T, right: T, u: T) -> T {
    let s = (up + down) + (left + right);
    T::madd::<F>(alpha, s - T::FOUR * u, u)
}

#[inline(always)]
fn heat_row<T: HeatCell, const F: bool>(row: HeatRow<'_, T>) {
    let HeatRow {
        step,
        up,
        at,
        down,
        out,
    } = row;
    let (w, a) = (step.width, step.alpha);
    let last = w - 1;
    // Padding cells keep their value.
    out[w..].copy_from_slice(&at[w..]);
    if w >= 3 {
        // Slices of one length, so the loop has no bounds checks and vectorises.
        let n = w - 2;
        let (up, down, mid) = (&up[1..=n], &down[1..=n], &at[1..=n]);
        let (left, right) = (&at[..n], &at[2..n + 2]);
        let inner = &mut out[1..=n];
        for (c, o) in inner.iter_mut().enumerate() {
            *o = cell::<T, F>(a, up[c], down[c], left[c], right[c], mid[c]);
        }
    }
    for c in [0, last] {
        out[c] = if step.periodic {
            let left = at[if c == 0 { last } else { c - 1 }];
            let right = at[if c == last { 0 } else { c + 1 }];
            cell::<T, F>(a, up[c], down[c], left, right, at[c])
        } else {
            at[c]
        };
    }
}

struct Fused<'a, T>(HeatRow<'a, T>);
struct Separate<'a, T>(HeatRow<'a, T>);

impl<T: HeatCell> Task for Fused<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        heat_row::<T, true>(self.0)
    }
}

impl<T: HeatCell> Task for Separate<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        heat_row::<T, false>(self.0)
    }
}

/// One Life step of a band (the uniform of `shaders/life.wgsl`): cells are bytes 0 or 1,
/// four to a u32 word, rows padded to whole words; always on a torus.
#[derive(Debug, Clone)]
pub struct LifeStep {
    /// Cells per row.
    pub width: usize,
    /// Buffer rows this step computes (rows above and below are ghosts or neighbours).
    pub rows: Range<usize>,
}

/// Writes buffer rows `step.rows` of `dst` from `src` (words of four cells).
pub fn life_step(src: &[u32], dst: &mut [u32], step: &LifeStep) {
    single(step, step.rows.clone(), src, dst);
}

impl Stencil for LifeStep {
    type Cell = u32;

    fn row_len(&self) -> usize {
        self.width.div_ceil(4)
    }

    fn fixed(&self, _: usize) -> bool {
        false
    }

    fn row(&self, up: &[u32], at: &[u32], down: &[u32], out: &mut [u32]) {
        let width = self.width;
        let words = self.row_len();
        // Words whose neighbour cells on both sides lie in whole neighbouring words of the
        // row (not the row's first word, nor one holding or next to its last cell).
        let inner = 1..(width.saturating_sub(1) / 4).max(1);
        for wi in inner.clone() {
            out[wi] = inner_word(up, at, down, wi);
        }
        let edges = (0..inner.start).chain(inner.end.max(inner.start)..words);
        for wi in edges {
            let (su, sa, sd) = (
                sides(up, wi, width),
                sides(at, wi, width),
                sides(down, wi, width),
            );
            let n = (su.0.wrapping_add(up[wi]).wrapping_add(su.1))
                .wrapping_add(sa.0.wrapping_add(sa.1))
                .wrapping_add(sd.0.wrapping_add(down[wi]).wrapping_add(sd.1));
            let mut next = 0u32;
            for b in 0..4 {
                if wi * 4 + b >= width {
                    break;
                }
                let count = (n >> (b * 8)) & 0xff;
                let alive = (at[wi] >> (b * 8)) & 1;
                let live = count == 3 || (count == 2 && alive == 1);
                next |= u32::from(live) << (b * 8);
            }
            out[wi] = next;
        }
    }
}

/// Word `w` of a row whose four cells and both neighbours are cells of the row (`w >= 1`,
/// `4w + 4 < width`): the shader's counts without its per-cell branches, all four lanes at
/// once. Integers throughout, so exact: a lane's count is at most 8 (no carry between
/// lanes), and for a count `n` and a cell `a` (0 or 1), `n == 3 || (n == 2 && a == 1)` is
/// `n | a == 3`, so a lane lives when `(n | a) ^ 3` is zero there.
#[inline(always)]
fn inner_word(up: &[u32], at: &[u32], down: &[u32], w: usize) -> u32 {
    const ONES: u32 = 0x0101_0101;
    let around = |row: &[u32]| {
        let x = row[w];
        let left = (x << 8) | ((row[w - 1] >> 24) & 1);
        let right = (x >> 8) | ((row[w + 1] & 1) << 24);
        (left, x, right)
    };
    let (ul, u, ur) = around(up);
    let (al, _, ar) = around(at);
    let (dl, d, dr) = around(down);
    let n = (ul.wrapping_add(u).wrapping_add(ur))
        .wrapping_add(al.wrapping_add(ar))
        .wrapping_add(dl.wrapping_add(d).wrapping_add(dr));
    // Lanes of z are below 16: shifting by 1 to 3 bits brings each lane's own bits to its
    // bit 0, never a neighbour lane's.
    let z = (n | at[w]) ^ (3 * ONES);
    let nonzero = (z | (z >> 1) | (z >> 2) | (z >> 3)) & ONES;
    nonzero ^ ONES
}

fn life_cell(row: &[u32], c: usize) -> u32 {
    (row[c >> 2] >> ((c & 3) * 8)) & 1
}

/// The words of left and right neighbours of word `w` (`sides` in the shader).
fn sides(row: &[u32], w: usize, width: usize) -> (u32, u32) {
    let x = row[w];
    let c0 = w * 4;
    let last = width - 1;
    let left = (x << 8) | life_cell(row, if c0 == 0 { last } else { c0 - 1 });
    let mut right = x >> 8;
    if c0 + 3 < last {
        right |= life_cell(row, c0 + 4) << 24;
    } else {
        let shift = (last - c0) * 8;
        right = (right & !(0xffu32 << shift)) | (life_cell(row, 0) << shift);
    }
    (left, right)
}
