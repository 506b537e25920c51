//! Vector micro-kernels of the host SYRK (`fisher::syrk_tile`, `fisher::syrk_block`),
//! written once over a [`Vector`] and compiled for AVX-512 (16 float32 or 8 float64 lanes)
//! and AVX2 + FMA (8 or 4): the portable kernels' exact arithmetic, each lane an independent entry (a tile
//! column, or a block column of one shader thread) whose chain advances one row at a time
//! in order, so the lanes change nothing but the speed. `F` fuses (`vfmadd`) or rounds the
//! product and the sum apart, as the devices do.

use std::arch::x86_64::{__m256, __m512};
use std::ops::Range;

use crate::host::simd::Level;

use super::shape::{BLOCK, TILE};
use super::syrk_pack::{Panels, Rows};
use super::syrk_vector::{Lanes, Vector};

const E: usize = TILE;

/// Rows of a tile.
type Rs = Range<usize>;

/// `syrk_tile::scalar` of rows `rows` of a 64 × 64 tile (`tile` holds those rows) over
/// `lhs.len() / 64` packed rows (the right rows `stride` apart: packed, or the scores'
/// own rows): four tile rows by `NV` registers of columns at a time,
/// loaded from the tile (or 0 on the `first` block), run over the block's rows, stored
/// back. On a `diag`onal tile the registers whose columns all lie below the diagonal
/// (c < r for every row r of the four) are skipped: the kernel zeroes those entries
/// afterwards (`syrk_tile::run_triangle`), as the shader does.
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn tile<V: Vector, const NV: usize, const F: bool>(
    (first, diag): (bool, bool),
    rows: Range<usize>,
    (lhs, (rhs, stride)): Panels<V::Elem>,
    tile: &mut [V::Elem],
) {
    let kc = lhs.len() / E;
    assert!(
        stride >= E
            && (kc == 0 || rhs.len() >= (kc - 1) * stride + E)
            && rows.end <= E
            && rows.start.is_multiple_of(4)
            && rows.len().is_multiple_of(4)
            && tile.len() == rows.len() * E,
        "packed panels"
    );
    let at = Strip::<V> {
        first,
        kc,
        lhs: lhs.as_ptr(),
        rhs: rhs.as_ptr(),
        stride,
        // Row r of the tile at (r - rows.start) · 64: `wrapping_sub` only forms the
        // address, every access adds r >= rows.start back.
        tile: tile.as_mut_ptr().wrapping_sub(rows.start * E),
    };
    for r0 in rows.step_by(4) {
        // The first register holding a column >= r0 (on a diagonal tile), then groups of NV
        // registers, the last one narrower when fewer are left.
        let mut c0 = if diag { r0 / V::LANES * V::LANES } else { 0 };
        while c0 < E {
            let left = (E - c0) / V::LANES;
            // SAFETY: rows r0..r0 + 4 within `rows` (checked above: multiples of 4) and
            // columns c0..c0 + regs · LANES <= 64.
            match left.min(NV) {
                1 => at.rows4::<1, F>(r0, c0),
                2 => at.rows4::<2, F>(r0, c0),
                3 => at.rows4::<3, F>(r0, c0),
                _ => at.rows4::<4, F>(r0, c0),
            }
            c0 += left.min(NV).min(4) * V::LANES;
        }
    }
}

/// The panels and the tile of one [`tile`] call, as pointers.
struct Strip<V: Vector> {
    first: bool,
    kc: usize,
    lhs: *const V::Elem,
    rhs: *const V::Elem,
    /// Values from one right row to the next.
    stride: usize,
    tile: *mut V::Elem,
}

impl<V: Vector> Strip<V> {
    /// Tile rows `r0..r0 + 4`, columns `c0..c0 + R · LANES`, over the block's rows.
    ///
    /// # Safety
    /// The CPU has `V`'s features; rows `r0..r0 + 4` and those columns lie inside the rows
    /// of the tile `tile` holds (row r at `tile + r · 64`);
    /// the left panel holds `kc` rows of 64 values, the right one `kc` rows `stride` apart.
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn rows4<const R: usize, const F: bool>(&self, r0: usize, c0: usize) {
        let (lp, rp, tp) = (self.lhs, self.rhs, self.tile);
        // SAFETY (every load and store below): rows r0..r0 + 4 and columns
        // c0..c0 + R · LANES address inside the tile's rows (the caller's promise); row
        // k < kc of the left panel is `k · 64 + 0..64`, inside its kc × 64 values, and of
        // the right one `k · stride + 0..64`, inside its (kc − 1) · stride + 64.
        let mut acc = [[V::zero(); R]; 4];
        if !self.first {
            for (rr, a) in acc.iter_mut().enumerate() {
                for (v, a) in a.iter_mut().enumerate() {
                    *a = V::load(tp.wrapping_add((r0 + rr) * E + c0 + v * V::LANES));
                }
            }
        }
        for k in 0..self.kc {
            let y = rp.add(k * self.stride + c0);
            let ys: [V; R] = std::array::from_fn(|v| V::load(y.add(v * V::LANES)));
            let x = lp.add(k * E + r0);
            for (rr, a) in acc.iter_mut().enumerate() {
                let xv = V::splat(*x.add(rr));
                for (a, &yv) in a.iter_mut().zip(&ys) {
                    *a = V::madd::<F>(xv, yv, *a);
                }
            }
        }
        for (rr, a) in acc.iter().enumerate() {
            for (v, a) in a.iter().enumerate() {
                a.store(tp.wrapping_add((r0 + rr) * E + c0 + v * V::LANES));
            }
        }
    }
}

/// `syrk_block::scalar` of one shader thread (`src`: its rows, gathered, and their left
/// values `s · w` laid out as the scores, or the scores themselves for unit weights): registers of
/// columns by the 8 rows of the blocks, up to `G` registers at a time (fewer for the last
/// columns, so no register runs past the row of blocks), columns read straight from the
/// rows (lanes past the padded width read as 0 and touch no memory; lanes past the blocks
/// are not stored).
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn block<V: Vector<Elem = f32>, const G: usize, const F: bool>(
    (src, lefts): (&Rows, &[f32]),
    i0: usize,
    acc: &mut [f32],
) {
    let cols = acc.len() / BLOCK;
    let words = src.len() * src.width;
    assert!(
        acc.len() == BLOCK * cols && src.scores.len() >= words && lefts.len() >= words,
        "one row of blocks"
    );
    let src = (src, lefts);
    let mut c0 = 0;
    while c0 < cols {
        // Registers left; four (on AVX-512) as two passes of two rather than three and one.
        let regs = (cols - c0).div_ceil(V::LANES);
        // SAFETY: `block_pass` reads and writes within the rows and `acc` (checked above).
        let g = match regs.min(G) {
            1 => block_pass::<V, 1, F>(src, i0, c0, acc),
            2 => block_pass::<V, 2, F>(src, i0, c0, acc),
            _ if regs == 4 => block_pass::<V, 2, F>(src, i0, c0, acc),
            _ => block_pass::<V, 3, F>(src, i0, c0, acc),
        };
        c0 += g * V::LANES;
    }
}

/// Columns `c0..c0 + R · LANES` of [`block`] (those within the blocks stored); returns R.
///
/// # Safety
/// The CPU has `V`'s features; `acc` holds 8 rows of `acc.len() / 8` columns and `src` its
/// rows' `width` values each.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn block_pass<V: Vector<Elem = f32>, const R: usize, const F: bool>(
    (src, lefts): (&Rows, &[f32]),
    i0: usize,
    c0: usize,
    acc: &mut [f32],
) -> usize {
    let (width, lanes) = (src.width, V::LANES);
    let cols = acc.len() / BLOCK;
    let ap = acc.as_mut_ptr();
    // Lanes of each register that hold columns of the rows, and that hold blocks.
    let have: [usize; R] =
        std::array::from_fn(|g| width.saturating_sub(i0 + c0 + g * lanes).min(lanes));
    let keep: [usize; R] = std::array::from_fn(|g| cols.saturating_sub(c0 + g * lanes).min(lanes));
    // Rows of the blocks that hold columns of the rows (the others' left value is 0).
    let rows_have = width.saturating_sub(i0).min(BLOCK);
    // Every register's lanes and every block row hold columns of the rows (all but the
    // last columns of a width that is no multiple of the lanes): the loop without the
    // partial loads' copies and the rows' tests, which kept the compiler from holding the
    // accumulators in registers (they went through the stack every row, 2.8 cycles a
    // vector multiply-add on AVX2).
    let full = have.iter().all(|&h| h == lanes) && rows_have == BLOCK;
    // SAFETY: as `block_rows` requires (the caller's promise, and `full` as computed).
    let a = if full {
        block_rows::<V, R, F, true>((src, lefts), i0, c0, have, rows_have)
    } else {
        block_rows::<V, R, F, false>((src, lefts), i0, c0, have, rows_have)
    };
    for (r, a) in a.iter().enumerate() {
        for (g, &a) in a.iter().enumerate() {
            // SAFETY: lanes stored have c0 + g · lanes + l < cols (`keep`): entry
            // r · cols + that < 8 · cols words of `acc` (the caller's promise).
            let p = ap.wrapping_add(r * cols + c0 + g * lanes);
            if keep[g] == lanes {
                a.store(p);
            } else {
                a.store_first(p, keep[g]);
            }
        }
    }
    R
}

/// The accumulators of [`block_pass`]'s registers over every row of `src`, from 0. `FULL`:
/// every lane of every register and every block row holds columns of the rows (`have`
/// all `LANES`, `rows_have` 8), so no load is partial and no block row is 0.
///
/// # Safety
/// As [`block_pass`]; `have` and `rows_have` as it computes them.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn block_rows<V: Vector<Elem = f32>, const R: usize, const F: bool, const FULL: bool>(
    (src, lefts): (&Rows, &[f32]),
    i0: usize,
    c0: usize,
    have: [usize; R],
    rows_have: usize,
) -> [[V; R]; BLOCK] {
    let (width, n, lanes) = (src.width, src.len(), V::LANES);
    let (sp, lp) = (src.scores.as_ptr(), lefts.as_ptr());
    let mut a = [[V::zero(); R]; BLOCK];
    for k in 0..n {
        // SAFETY: register g reads columns i0 + c0 + g · lanes + 0..have[g] < width of
        // row k < n only, inside the rows' n · width words (the caller's promise);
        // `wrapping_add` forms the address of a register that reads nothing without
        // claiming it is in bounds.
        let row = sp.wrapping_add(k * width + i0 + c0);
        let ys: [V; R] = std::array::from_fn(|g| {
            let p = row.wrapping_add(g * lanes);
            if FULL || have[g] == lanes {
                V::load(p)
            } else {
                V::load_first(p, have[g])
            }
        });
        // `syrk_pack::left`, `s · w` as the gather rounded it, one row of the blocks at a
        // time just before its use (all eight at once would hold eight more registers
        // beside the accumulators).
        let left = lp.wrapping_add(k * width + i0);
        for (rr, a) in a.iter_mut().enumerate() {
            // SAFETY: column i0 + rr < width of row k < n (`rows_have`).
            let x = if FULL || rr < rows_have { *left.add(rr) } else { 0.0 };
            let xv = V::splat(x);
            for (a, &y) in a.iter_mut().zip(&ys) {
                *a = V::madd::<F>(xv, y, *a);
            }
        }
    }
    a
}

/// [`tile`] on AVX-512: four registers per row (float32: the tile's 64 columns; float64:
/// half of them).
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn tile_avx512<T: Lanes, const F: bool>(at: (bool, bool), k: Rs, p: Panels<T>, t: &mut [T]) {
    tile::<T::Wide, 4, F>(at, k, p, t)
}

/// [`tile`] on AVX2: two registers (16 float32 or 8 float64 columns) per row, sixteen
/// registers in all.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn tile_avx2<T: Lanes, const F: bool>(at: (bool, bool), k: Rs, p: Panels<T>, t: &mut [T]) {
    tile::<T::Narrow, 2, F>(at, k, p, t)
}

/// [`block`] on AVX-512: up to 48 columns (three registers, 24 accumulators) per block
/// row.
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(unsafe_code)]
unsafe fn block_avx512<const F: bool>(s: (&Rows, &[f32]), i0: usize, a: &mut [f32]) {
    block::<__m512, 3, F>(s, i0, a)
}

/// [`block`] on AVX2: one block's 8 columns (one register) per block row.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(unsafe_code)]
unsafe fn block_avx2<const F: bool>(s: (&Rows, &[f32]), i0: usize, a: &mut [f32]) {
    block::<__m256, 1, F>(s, i0, a)
}

/// [`tile`]'s call `tile[r][c] = fma(lhs[k][r], rhs[k][c], tile[r][c])` for r in `rows`
/// (from 0 on the `first` block; `diag`: a diagonal tile) with the vector kernels of
/// `level`, which must come from `Level::at_most_detected`; false, having done nothing, at
/// a level without them.
pub(super) fn run_tile<T: Lanes, const F: bool>(
    level: Level,
    at: (bool, bool),
    rows: Rs,
    panels: Panels<T>,
    out: &mut [T],
) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: `Level::at_most_detected` returns `Avx512` only when the CPU has AVX-512F,
    // AVX2 and FMA, and `Avx2` only when it has AVX2 and FMA: all each function enables;
    // `tile` checks the slices' lengths and the rows.
    unsafe {
        match level {
            Level::Avx512 => tile_avx512::<T, F>(at, rows, panels, out),
            Level::Avx2 => tile_avx2::<T, F>(at, rows, panels, out),
            _ => return false,
        }
    }
    true
}

/// [`block`]'s call for one shader thread's rows `src` (blocks from column `i0`) into
/// `acc`, with the vector kernels of `level` (from `Level::at_most_detected`); false,
/// having done nothing, at a level without them.
pub(super) fn run_block<const F: bool>(
    level: Level,
    src: (&Rows, &[f32]),
    i0: usize,
    acc: &mut [f32],
) -> bool {
    #[allow(unsafe_code)]
    // SAFETY: as in `run_tile`; `block` checks the slices' lengths.
    unsafe {
        match level {
            Level::Avx512 => block_avx512::<F>(src, i0, acc),
            Level::Avx2 => block_avx2::<F>(src, i0, acc),
            _ => return false,
        }
    }
    true
}
