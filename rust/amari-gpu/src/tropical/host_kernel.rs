//! The host max-plus micro-kernels, one per SIMD level: an `MR` × `NR` tile of
//! accumulators held in registers, walked over k in order (from −inf, or continuing a tile
//! of the k before), on a packed left panel
//! (`MR` words per k step) and a packed right strip (`NR` words per k step; see
//! `host_pack`). Each accumulator takes `s = a + b` only when `s > acc`, exactly the
//! shader's `mx`, so every level computes the same bits: the vector `max(s, acc)`
//! instructions return their second operand when the comparison is false, NaN included.

use super::host_pack::mx;
use crate::host::simd::Level;

/// A level's micro-kernel and its tile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kernel {
    level: Level,
    /// Rows of a tile (of a packed left panel).
    pub mr: usize,
    /// Columns of a tile (of a packed right strip).
    pub nr: usize,
}

/// Tile of the AVX-512 kernel: 12 rows of two 16-lane vectors (24 of the 32 registers).
const AVX512: (usize, usize) = (12, 32);
/// Tile of the AVX2 kernel: 6 rows of two 8-lane vectors (12 of the 16 registers).
const AVX2: (usize, usize) = (6, 16);
/// Tile of the portable kernel (vectorised by the compiler for SSE2 or NEON).
const PORTABLE: (usize, usize) = (4, 8);

impl Kernel {
    /// The kernel of `level`.
    pub fn at(level: Level) -> Kernel {
        let (mr, nr) = match level {
            Level::Avx512 => AVX512,
            Level::Avx2 => AVX2,
            Level::Portable | Level::Neon => PORTABLE,
        };
        Kernel { level, mr, nr }
    }

    /// One tile: `panel` (k × mr) by `strip` (k × nr) into `acc` (mr × nr), continuing
    /// from what `acc` holds (−inf to start a product; the tile of the k before, to walk k
    /// in blocks, which changes nothing in the order).
    pub fn tile(&self, panel: &[f32], strip: &[f32], acc: &mut [f32]) {
        match self.level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Level::Avx512` is only built by `Level::detect` (or lowered from it)
            // after `is_x86_feature_detected!` found AVX-512F, AVX2 and FMA, all that the
            // target-feature function needs; it reads and writes through slices only.
            #[allow(unsafe_code)]
            Level::Avx512 => unsafe {
                avx512::tile::<{ AVX512.0 }>(panel, strip, acc)
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above: `Level::Avx2` or wider means AVX2 and FMA were detected.
            #[allow(unsafe_code)]
            Level::Avx2 => unsafe { avx2::tile::<{ AVX2.0 }>(panel, strip, acc) },
            _ => portable::<{ PORTABLE.0 }, { PORTABLE.1 }>(panel, strip, acc),
        }
    }
}

/// The portable kernel: plain loops the compiler vectorises across the tile's columns (a
/// 4 × 8 tile is eight SSE2 or NEON registers of accumulators, so none spill).
fn portable<const MR: usize, const NR: usize>(panel: &[f32], strip: &[f32], acc: &mut [f32]) {
    let mut t = [[f32::NEG_INFINITY; NR]; MR];
    for (row, src) in t.iter_mut().zip(acc.chunks_exact(NR)) {
        row.copy_from_slice(src);
    }
    for (ak, bk) in panel.chunks_exact(MR).zip(strip.chunks_exact(NR)) {
        let Ok(bk) = <&[f32; NR]>::try_from(bk) else {
            continue;
        };
        for (row, &x) in t.iter_mut().zip(ak) {
            for (v, &y) in row.iter_mut().zip(bk) {
                *v = mx(*v, x + y);
            }
        }
    }
    for (dst, row) in acc.chunks_exact_mut(NR).zip(&t) {
        dst.copy_from_slice(row);
    }
}

/// An x86-64 kernel of `MR` rows of two `$lanes`-lane accumulators (a strip of 2 ×
/// `$lanes` columns), written once for both vector widths: `$max(s, acc)` is
/// `s > acc ? s : acc` lane by lane (its second operand when the comparison is false, NaN
/// included), which is the shader's `mx(acc, s)` exactly.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_tile {
    ($name:ident, $features:literal, $lanes:literal, $set1:ident, $load:ident, $store:ident,
     $add:ident, $max:ident) => {
        /// `panel` (k × MR) by `strip` (k × 2 lanes) into `acc` (MR × 2 lanes),
        /// continuing from what `acc` holds, k in order.
        #[target_feature(enable = $features)]
        pub(super) fn $name<const MR: usize>(panel: &[f32], strip: &[f32], acc: &mut [f32]) {
            const NR: usize = 2 * $lanes;
            let mut lo = [$set1(f32::NEG_INFINITY); MR];
            let mut hi = lo;
            for (r, src) in acc.chunks_exact(NR).take(MR).enumerate() {
                // SAFETY: `src` is a chunk of exactly NR = 2 lanes floats: the loads at 0
                // and at one lane read a vector each inside it.
                #[allow(unsafe_code)]
                unsafe {
                    lo[r] = $load(src.as_ptr());
                    hi[r] = $load(src.as_ptr().add($lanes));
                }
            }
            for (ak, bk) in panel.chunks_exact(MR).zip(strip.chunks_exact(NR)) {
                // SAFETY: as above, `bk` is a chunk of exactly NR floats.
                #[allow(unsafe_code)]
                let (b0, b1) = unsafe { ($load(bk.as_ptr()), $load(bk.as_ptr().add($lanes))) };
                for r in 0..MR {
                    let x = $set1(ak[r]);
                    lo[r] = $max($add(x, b0), lo[r]);
                    hi[r] = $max($add(x, b1), hi[r]);
                }
            }
            for (r, dst) in acc.chunks_exact_mut(NR).take(MR).enumerate() {
                // SAFETY: `dst` is a chunk of exactly NR floats: the stores at 0 and at one
                // lane write a vector each inside it.
                #[allow(unsafe_code)]
                unsafe {
                    $store(dst.as_mut_ptr(), lo[r]);
                    $store(dst.as_mut_ptr().add($lanes), hi[r]);
                }
            }
        }
    };
}

/// The AVX2 kernel: 8-lane vectors, a 16-column strip.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    x86_tile!(tile, "avx2,fma", 8, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps,
        _mm256_add_ps, _mm256_max_ps);
}

/// The AVX-512 kernel: 16-lane vectors, a 32-column strip; the strip's two vectors are
/// loaded once per k step and each panel word broadcast once.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    x86_tile!(tile, "avx512f,avx2,fma", 16, _mm512_set1_ps, _mm512_loadu_ps,
        _mm512_storeu_ps, _mm512_add_ps, _mm512_max_ps);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_takes_the_same_terms_as_the_shader_rule() {
        // k = 5 steps; terms with NaN (−inf + inf), ties of ±0 in both orders, +inf.
        let inf = f32::INFINITY;
        for level in Level::available() {
            let kernel = Kernel::at(level);
            let (mr, nr) = (kernel.mr, kernel.nr);
            let k = 5;
            let mut panel = vec![0.0; k * mr];
            let mut strip = vec![0.0; k * nr];
            let a_col = [-inf, 0.0, -0.0, 1.0, inf];
            let b_col = [inf, -0.0, 0.0, -1.0, -inf];
            for kk in 0..k {
                for r in 0..mr {
                    panel[kk * mr + r] = if r % 2 == 0 { a_col[kk] } else { -a_col[kk] };
                }
                for l in 0..nr {
                    strip[kk * nr + l] = if l % 3 == 0 { b_col[kk] } else { (l as f32) - 8.0 };
                }
            }
            let mut acc = vec![f32::NEG_INFINITY; mr * nr];
            kernel.tile(&panel, &strip, &mut acc);
            for r in 0..mr {
                for l in 0..nr {
                    let mut want = f32::NEG_INFINITY;
                    for kk in 0..k {
                        want = mx(want, panel[kk * mr + r] + strip[kk * nr + l]);
                    }
                    let got = acc[r * nr + l];
                    assert_eq!(got.to_bits(), want.to_bits(), "{level:?} ({r}, {l})");
                }
            }
        }
    }
}
