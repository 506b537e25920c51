//! Host twins of the passes the empirical Fisher matrix makes over resident scores
//! (`shaders/fisher_resident.wgsl`): the largest magnitude of every column, as bits, and the
//! rows scaled by exact powers of two and padded for the SYRK. Both are integer code, as in
//! the shader, and the scaling gives `(f64(v) * 2^a) as f32` bit for bit (tested below), the
//! numpy path's scaling (`fisher::scale`).

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use crate::kernel::FmaMode;
use crate::kernel::HostImpl;

/// Runs of rows a chunk's column maxima are taken over, each its own `p` words of the
/// partial (`SLICES` in the shader).
pub const COLUMN_SLICES: usize = 16;

/// The host twin of `fisher::resident::column_max_kernel`: per chunk, for each of
/// [`COLUMN_SLICES`] near-equal runs of its rows, the largest `bits & 0x7fff_ffff` of every
/// one of `p` columns (at or above `0x7f80_0000`: a NaN or an infinity).
#[derive(Debug, Clone, Copy)]
pub struct ColumnMax {
    /// Score columns.
    pub p: usize,
}

/// The host twin of `fisher::resident::prepare_kernel`: rows of `p` words scaled by
/// `2^exponent[j]` per column (the exponents are the second input, as i32 bits) and padded
/// with zeros to `width` words.
#[derive(Debug, Clone, Copy)]
pub struct PrepareRows {
    /// Score columns.
    pub p: usize,
    /// Words per prepared row (a multiple of 4, at least `p`).
    pub width: usize,
}

/// `v 2^a` for the float32 bits of a finite `v`, correctly rounded to nearest even, from the
/// integer fields alone (the shader's `scaled`).
pub fn scaled_bits(bits: u32, a: i32) -> u32 {
    let sign = bits & 0x8000_0000;
    let magnitude = bits & 0x7fff_ffff;
    if magnitude == 0 || a == 0 {
        return bits;
    }
    let field = (magnitude >> 23) as i32;
    let (mut m, k) = if field > 0 {
        ((magnitude & 0x7f_ffff) | 0x80_0000, field - 150)
    } else {
        (magnitude & 0x7f_ffff, -149)
    };
    let up = 23 - (31 - m.leading_zeros() as i32);
    m <<= up as u32;
    let biased = k - up + a + 150;
    if biased >= 255 {
        return sign | 0x7f80_0000;
    }
    if biased >= 1 {
        return sign | ((biased as u32) << 23) | (m & 0x7f_ffff);
    }
    let s = (1 - biased) as u32;
    if s > 25 {
        return sign;
    }
    let q = m >> s;
    let rest = m & ((1 << s) - 1);
    let half = 1 << (s - 1);
    let up_one = rest > half || (rest == half && q & 1 == 1);
    sign | (q + u32::from(up_one))
}

impl HostImpl for ColumnMax {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let p = self.p;
        let rows = &inputs[0][range.start * p..range.end * p];
        let n = range.len();
        let (base, extra) = (n / COLUMN_SLICES, n % COLUMN_SLICES);
        output
            .par_chunks_mut(p)
            .enumerate()
            .for_each(|(slice, out)| {
                let start = slice * base + slice.min(extra);
                let end = start + base + usize::from(slice < extra);
                out.fill(0.0);
                for row in rows[start * p..end * p].chunks_exact(p) {
                    for (o, v) in out.iter_mut().zip(row) {
                        let bits = (v.to_bits() & 0x7fff_ffff).max(o.to_bits());
                        *o = f32::from_bits(bits);
                    }
                }
            });
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}

impl HostImpl for PrepareRows {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let (p, width) = (self.p, self.width);
        let rows = &inputs[0][range.start * p..range.end * p];
        let exponents: Vec<i32> = inputs[1][..p].iter().map(|v| v.to_bits() as i32).collect();
        output
            .par_chunks_mut(width)
            .zip(rows.par_chunks(p))
            .for_each(|(out, row)| {
                for ((o, v), &a) in out.iter_mut().zip(row).zip(&exponents) {
                    *o = f32::from_bits(scaled_bits(v.to_bits(), a));
                }
                out[p..].fill(0.0);
            });
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numpy path's scaling (`fisher::scale`).
    fn reference(v: f32, a: i32) -> f32 {
        (f64::from(v) * 2f64.powi(a)) as f32
    }

    fn check(v: f32, a: i32) {
        let got = f32::from_bits(scaled_bits(v.to_bits(), a));
        let want = reference(v, a);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{v:e} * 2^{a}: {got:e} vs {want:e}"
        );
    }

    #[test]
    fn scaling_matches_the_float64_product_rounded_once() {
        let edges = [
            0.0f32,
            -0.0,
            1.0,
            -1.5,
            f32::MAX,
            -f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(3),
            f32::from_bits(0x7f_ffff),
            f32::from_bits(0x80_0001),
            1e-25,
            3e30,
        ];
        for &v in &edges {
            for a in -160..=160 {
                check(v, a);
            }
        }
        // Random bit patterns (every finite one), every exponent the scaling can choose.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let v = f32::from_bits(state as u32);
            if v.is_finite() {
                check(v, (state >> 40) as i32 % 300 - 150);
            }
        }
    }

    #[test]
    fn ties_round_to_even_in_the_subnormal_range() {
        // 3 · 2^-149 halved is 1.5 · 2^-149: rounds to 2 · 2^-149; 5 · 2^-149 halved to 2.
        assert_eq!(scaled_bits(3, -1), 2);
        assert_eq!(scaled_bits(5, -1), 2);
        assert_eq!(scaled_bits(0x8000_0003, -1), 0x8000_0002);
        // Half the smallest subnormal is a tie with 0: to even, 0.
        assert_eq!(scaled_bits(1, -1), 0);
    }

    #[test]
    fn column_maxima_and_prepared_rows() {
        let rows = [1.0f32, -4.0, 0.5, 0.25, f32::NAN, -2.0];
        let mut slices = [0.0f32; 3 * COLUMN_SLICES];
        ColumnMax { p: 3 }.run(&[&rows], 0..2, &mut slices);
        // Two rows: the first two slices take one row each, the others none.
        assert_eq!(&slices[..3], &[1.0, 4.0, 0.5]);
        assert_eq!(slices[3], 0.25);
        assert!(slices[4].to_bits() >= 0x7f80_0000);
        assert_eq!(slices[5], 2.0);
        assert!(slices[6..].iter().all(|&v| v == 0.0));
        let exponents = [1, 0, -1].map(|a: i32| f32::from_bits(a as u32));
        let mut out = [9.0f32; 8];
        let finite = [1.0f32, -4.0, 0.5, 3.0, 2.0, -0.0];
        PrepareRows { p: 3, width: 4 }.run(&[&finite, &exponents], 0..2, &mut out);
        assert_eq!(out, [2.0, -4.0, 0.25, 0.0, 6.0, 2.0, -0.0, 0.0]);
    }
}
