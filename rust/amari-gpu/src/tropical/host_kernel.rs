//! The host max-plus micro-kernels, one per SIMD level: an `MR` × `NR` tile of
//! accumulators held in registers, walked over k in order (from −inf, or continuing a tile
//! of the k before), on a packed left panel
//! (`MR` words per k step) and a packed right strip (`NR` words per k step; see
//! `host_pack`). Each accumulator takes `s = a + b` only when `s > acc`, exactly the
//! shader's `mx`, so every level computes the same bits: the vector `max(s, acc)`
//! instructions return their second operand when the comparison is false, NaN included.
//! Each level also has shorter tiles (multiples of its row quantum up to `MR`), so that the
//! last panel of a share of rows computes no more padded rows than the quantum needs.

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
    /// Rows of the shortest tile: every tile height is a multiple of it, up to `mr`.
    pub quantum: usize,
}

/// Tile of the AVX-512 kernel: 12 rows of two 16-lane vectors (24 of the 32 registers);
/// shorter tiles of 8 and 4 rows (16 and 8 accumulators still cover the max's latency).
const AVX512: (usize, usize, usize) = (12, 32, 4);
/// Tile of the AVX2 kernel: 6 rows of two 8-lane vectors (12 of the 16 registers); shorter
/// tiles of 4 and 2 rows.
const AVX2: (usize, usize, usize) = (6, 16, 2);
/// Tile of the portable kernel (vectorised by the compiler for SSE2 or NEON); one height.
const PORTABLE: (usize, usize, usize) = (4, 8, 4);

impl Kernel {
    /// The kernel of `level`.
    pub fn at(level: Level) -> Kernel {
        let (mr, nr, quantum) = match level {
            Level::Avx512 => AVX512,
            Level::Avx2 => AVX2,
            Level::Portable | Level::Neon => PORTABLE,
        };
        Kernel {
            level,
            mr,
            nr,
            quantum,
        }
    }

    /// The height of the tile that takes `rows` rows (at most `mr`): the shortest tile
    /// height that holds them.
    pub fn height(&self, rows: usize) -> usize {
        rows.clamp(1, self.mr).next_multiple_of(self.quantum)
    }

    /// One tile of `height` rows (a height of [`Kernel::height`]): `panel` (k × height) by
    /// `strip` (k × nr) into `acc` (height × nr), continuing from what `acc` holds (−inf to
    /// start a product; the tile of the k before, to walk k in blocks, which changes
    /// nothing in the order).
    pub fn tile(&self, height: usize, panel: &[f32], strip: &[f32], acc: &mut [f32]) {
        match self.level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Level::Avx512` is only built by `Level::detect` (or lowered from it)
            // after `is_x86_feature_detected!` found AVX-512F, AVX2 and FMA, all that the
            // target-feature functions need; they read and write through slices only.
            #[allow(unsafe_code)]
            Level::Avx512 => unsafe {
                match height {
                    12 => avx512::tile::<12>(panel, strip, acc),
                    8 => avx512::tile::<8>(panel, strip, acc),
                    _ => avx512::tile::<4>(panel, strip, acc),
                }
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above: `Level::Avx2` or wider means AVX2 and FMA were detected.
            #[allow(unsafe_code)]
            Level::Avx2 => unsafe {
                match height {
                    6 => avx2::tile::<6>(panel, strip, acc),
                    4 => avx2::tile::<4>(panel, strip, acc),
                    _ => avx2::tile::<2>(panel, strip, acc),
                }
            },
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
        let levels = Level::available().into_iter().map(Kernel::at);
        let tiles = levels.flat_map(|kernel| {
            let heights = (kernel.quantum..=kernel.mr).step_by(kernel.quantum);
            heights.map(move |mr| (kernel, mr))
        });
        for (kernel, mr) in tiles {
            let level = kernel.level;
            let nr = kernel.nr;
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
            kernel.tile(mr, &panel, &strip, &mut acc);
            for r in 0..mr {
                for l in 0..nr {
                    let mut want = f32::NEG_INFINITY;
                    for kk in 0..k {
                        want = mx(want, panel[kk * mr + r] + strip[kk * nr + l]);
                    }
                    let got = acc[r * nr + l];
                    let at = format!("{level:?} height {mr} ({r}, {l})");
                    assert_eq!(got.to_bits(), want.to_bits(), "{at}");
                }
            }
        }
    }
}
