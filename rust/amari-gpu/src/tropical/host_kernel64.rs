//! The host max-plus micro-kernels in float64, one per SIMD level: the float32 kernels'
//! structure (`host_kernel`) on 8-lane (AVX-512) and 4-lane (AVX2) vectors of f64. An `MR`
//! × `NR` tile of accumulators in registers is walked over k in order on a packed left panel
//! and a packed right strip (`host_pack`); each accumulator takes `s = a + b` only when
//! `s > acc` (the shader's `mx`: the vector `max(s, acc)` returns its second operand when the
//! comparison is false, NaN included), so every level computes the same bits.

use super::host_pack::mx;
use crate::host::simd::Level;

/// A level's float64 micro-kernel and its tile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kernel64 {
    level: Level,
    /// Rows of a tile (of a packed left panel).
    pub mr: usize,
    /// Columns of a tile (of a packed right strip).
    pub nr: usize,
}

/// Tile of the AVX-512 kernel: 12 rows of two 8-lane vectors (24 of the 32 registers).
const AVX512: (usize, usize) = (12, 16);
/// Tile of the AVX2 kernel: 6 rows of two 4-lane vectors (12 of the 16 registers).
const AVX2: (usize, usize) = (6, 8);
/// Tile of the portable kernel (vectorised by the compiler for SSE2 or NEON).
const PORTABLE: (usize, usize) = (4, 4);

impl Kernel64 {
    /// The kernel of `level`.
    pub fn at(level: Level) -> Kernel64 {
        let (mr, nr) = match level {
            Level::Avx512 => AVX512,
            Level::Avx2 => AVX2,
            Level::Portable | Level::Neon => PORTABLE,
        };
        Kernel64 { level, mr, nr }
    }

    /// One tile: `panel` (k × mr) by `strip` (k × nr) into `acc` (mr × nr), continuing
    /// from what `acc` holds.
    pub fn tile(&self, panel: &[f64], strip: &[f64], acc: &mut [f64]) {
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

/// The portable kernel: plain loops the compiler vectorises across the tile's columns.
fn portable<const MR: usize, const NR: usize>(panel: &[f64], strip: &[f64], acc: &mut [f64]) {
    let mut t = [[f64::NEG_INFINITY; NR]; MR];
    for (row, src) in t.iter_mut().zip(acc.chunks_exact(NR)) {
        row.copy_from_slice(src);
    }
    for (ak, bk) in panel.chunks_exact(MR).zip(strip.chunks_exact(NR)) {
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

/// An x86-64 float64 kernel of `MR` rows of two `$lanes`-lane accumulators, written once
/// for both vector widths; `$max(s, acc)` is `s > acc ? s : acc` lane by lane.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_tile64 {
    ($features:literal, $lanes:literal, $set1:ident, $load:ident, $store:ident, $add:ident,
     $max:ident) => {
        /// `panel` (k × MR) by `strip` (k × 2 lanes) into `acc` (MR × 2 lanes),
        /// continuing from what `acc` holds, k in order.
        #[target_feature(enable = $features)]
        pub(super) fn tile<const MR: usize>(panel: &[f64], strip: &[f64], acc: &mut [f64]) {
            const NR: usize = 2 * $lanes;
            let mut lo = [$set1(f64::NEG_INFINITY); MR];
            let mut hi = lo;
            for (r, src) in acc.chunks_exact(NR).take(MR).enumerate() {
                // SAFETY: `src` is a chunk of exactly NR = 2 lanes values: the loads at 0
                // and at one lane read a vector each inside it.
                #[allow(unsafe_code)]
                unsafe {
                    lo[r] = $load(src.as_ptr());
                    hi[r] = $load(src.as_ptr().add($lanes));
                }
            }
            for (ak, bk) in panel.chunks_exact(MR).zip(strip.chunks_exact(NR)) {
                // SAFETY: as above, `bk` is a chunk of exactly NR values.
                #[allow(unsafe_code)]
                let (b0, b1) = unsafe { ($load(bk.as_ptr()), $load(bk.as_ptr().add($lanes))) };
                for r in 0..MR {
                    let x = $set1(ak[r]);
                    lo[r] = $max($add(x, b0), lo[r]);
                    hi[r] = $max($add(x, b1), hi[r]);
                }
            }
            for (r, dst) in acc.chunks_exact_mut(NR).take(MR).enumerate() {
                // SAFETY: `dst` is a chunk of exactly NR values: the stores at 0 and at one
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

/// The AVX2 kernel: 4-lane vectors, an 8-column strip.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    x86_tile64!("avx2,fma", 4, _mm256_set1_pd, _mm256_loadu_pd, _mm256_storeu_pd,
        _mm256_add_pd, _mm256_max_pd);
}

/// The AVX-512 kernel: 8-lane vectors, a 16-column strip.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    x86_tile64!("avx512f,avx2,fma", 8, _mm512_set1_pd, _mm512_loadu_pd, _mm512_storeu_pd,
        _mm512_add_pd, _mm512_max_pd);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_takes_the_same_terms_as_the_shader_rule() {
        // k = 5 steps; terms with NaN (−inf + inf), ties of ±0 in both orders, +inf.
        let inf = f64::INFINITY;
        for level in Level::available() {
            let kernel = Kernel64::at(level);
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
                    strip[kk * nr + l] = if l % 3 == 0 { b_col[kk] } else { (l as f64) - 8.0 };
                }
            }
            let mut acc = vec![f64::NEG_INFINITY; mr * nr];
            kernel.tile(&panel, &strip, &mut acc);
            for r in 0..mr {
                for l in 0..nr {
                    let mut want = f64::NEG_INFINITY;
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
