//! The host max-plus micro-kernels, one per SIMD level and element type (float32 and
//! float64, one body for both): an `MR` × `NR` tile of accumulators held in registers,
//! walked over k in order (from −inf, or continuing a tile of the k before), on a packed
//! left panel (`MR` values per k step) and a packed right strip (`NR` values per k step;
//! see `host_pack`). Each accumulator takes `s = a + b` only when `s > acc`, exactly the
//! shader's `mx`, so every level computes the same bits: the vector `max(s, acc)`
//! instructions return their second operand when the comparison is false, NaN included.
//! Each level also has shorter tiles (multiples of its row quantum up to `MR`), so that the
//! last panel of a share of rows computes no more padded rows than the quantum needs.

use std::marker::PhantomData;

use super::host_pack::mx;
use super::scalar::Scalar;
use crate::host::simd::Level;

/// An element type with micro-kernels: its tiles' column counts (two vectors of its lanes
/// at AVX-512 and AVX2; the portable tile's columns) and the kernels themselves.
pub trait Lanes: Scalar {
    /// Columns of the AVX-512, AVX2 and portable tiles.
    const COLUMNS: [usize; 3];
    /// The portable tile (the portable height, `COLUMNS[2]` columns).
    fn portable(panel: &[Self], strip: &[Self], acc: &mut [Self]);
    /// An AVX-512 tile of `MR` rows.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    unsafe fn avx512<const MR: usize>(panel: &[Self], strip: &[Self], acc: &mut [Self]);
    /// An AVX2 tile of `MR` rows.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    unsafe fn avx2<const MR: usize>(panel: &[Self], strip: &[Self], acc: &mut [Self]);
}

/// [`Lanes`] for one element type: `$tile` is the name of its kernels in the `avx512` and
/// `avx2` modules, `$columns` its tiles' columns.
macro_rules! lanes {
    ($t:ty, $tile:ident, $columns:expr) => {
        impl Lanes for $t {
            const COLUMNS: [usize; 3] = $columns;
            fn portable(panel: &[$t], strip: &[$t], acc: &mut [$t]) {
                portable::<$t, { PORTABLE.0 }, { $columns[2] }>(panel, strip, acc)
            }
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            unsafe fn avx512<const MR: usize>(panel: &[$t], strip: &[$t], acc: &mut [$t]) {
                // SAFETY: the caller guarantees the features the kernel is compiled for.
                unsafe { avx512::$tile::<MR>(panel, strip, acc) }
            }
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            unsafe fn avx2<const MR: usize>(panel: &[$t], strip: &[$t], acc: &mut [$t]) {
                // SAFETY: the caller guarantees the features the kernel is compiled for.
                unsafe { avx2::$tile::<MR>(panel, strip, acc) }
            }
        }
    };
}

// float32: 16 and 8 lanes (strips of 32 and 16 columns); the portable tile 8 wide.
lanes!(f32, tile_f32, [32, 16, 8]);
// float64: 8 and 4 lanes (strips of 16 and 8 columns); the portable tile 4 wide.
lanes!(f64, tile_f64, [16, 8, 4]);

/// A level's micro-kernel and its tile, for elements of type `T`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kernel<T> {
    level: Level,
    /// Rows of a tile (of a packed left panel).
    pub mr: usize,
    /// Columns of a tile (of a packed right strip).
    pub nr: usize,
    /// Rows of the shortest tile: every tile height is a multiple of it, up to `mr`.
    pub quantum: usize,
    element: PhantomData<T>,
}

/// Rows and row quantum of the AVX-512 tiles: 12 rows of two vectors (24 of the 32
/// registers); shorter tiles of 8 and 4 rows (16 and 8 accumulators still cover the max's
/// latency).
const AVX512: (usize, usize) = (12, 4);
/// Rows and row quantum of the AVX2 tiles: 6 rows of two vectors (12 of the 16 registers);
/// shorter tiles of 4 and 2 rows.
const AVX2: (usize, usize) = (6, 2);
/// Rows of the portable tile (vectorised by the compiler for SSE2 or NEON); one height.
const PORTABLE: (usize, usize) = (4, 4);

impl<T: Lanes> Kernel<T> {
    /// The kernel of `level`.
    pub fn at(level: Level) -> Kernel<T> {
        let ((mr, quantum), nr) = match level {
            Level::Avx512 => (AVX512, T::COLUMNS[0]),
            Level::Avx2 => (AVX2, T::COLUMNS[1]),
            Level::Portable | Level::Neon => (PORTABLE, T::COLUMNS[2]),
        };
        Kernel {
            level,
            mr,
            nr,
            quantum,
            element: PhantomData,
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
    pub fn tile(&self, height: usize, panel: &[T], strip: &[T], acc: &mut [T]) {
        match self.level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Level::Avx512` is only built by `Level::detect` (or lowered from it)
            // after `is_x86_feature_detected!` found AVX-512F, AVX2 and FMA, all that the
            // target-feature functions need; they read and write through slices only.
            #[allow(unsafe_code)]
            Level::Avx512 => unsafe {
                match height {
                    12 => T::avx512::<12>(panel, strip, acc),
                    8 => T::avx512::<8>(panel, strip, acc),
                    _ => T::avx512::<4>(panel, strip, acc),
                }
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above: `Level::Avx2` or wider means AVX2 and FMA were detected.
            #[allow(unsafe_code)]
            Level::Avx2 => unsafe {
                match height {
                    6 => T::avx2::<6>(panel, strip, acc),
                    4 => T::avx2::<4>(panel, strip, acc),
                    _ => T::avx2::<2>(panel, strip, acc),
                }
            },
            _ => T::portable(panel, strip, acc),
        }
    }
}

/// The portable kernel: plain loops the compiler vectorises across the tile's columns (a
/// 4 × 8 float32 or 4 × 4 float64 tile is eight SSE2 or NEON registers of accumulators, so
/// none spill).
fn portable<T: Scalar, const MR: usize, const NR: usize>(panel: &[T], strip: &[T], acc: &mut [T]) {
    let mut t = [[T::NEG_INFINITY; NR]; MR];
    for (row, src) in t.iter_mut().zip(acc.chunks_exact(NR)) {
        row.copy_from_slice(src);
    }
    for (ak, bk) in panel.chunks_exact(MR).zip(strip.chunks_exact(NR)) {
        let Ok(bk) = <&[T; NR]>::try_from(bk) else {
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

/// An x86-64 kernel of `MR` rows of two `$lanes`-lane accumulators of `$t` (a strip of 2 ×
/// `$lanes` columns), written once for both vector widths and element types: `$max(s, acc)` is
/// `s > acc ? s : acc` lane by lane (its second operand when the comparison is false, NaN
/// included), which is the shader's `mx(acc, s)` exactly.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_tile {
    ($name:ident, $t:ty, $features:literal, $lanes:literal, $set1:ident, $load:ident,
     $store:ident, $add:ident, $max:ident) => {
        /// `panel` (k × MR) by `strip` (k × 2 lanes) into `acc` (MR × 2 lanes),
        /// continuing from what `acc` holds, k in order.
        #[target_feature(enable = $features)]
        pub(super) fn $name<const MR: usize>(panel: &[$t], strip: &[$t], acc: &mut [$t]) {
            const NR: usize = 2 * $lanes;
            // K steps ahead of the one it computes that the tile prefetches its strip:
            // about L3's latency in steps of 24 cycles (a 12-row AVX-512 tile's step).
            const PREFETCH_STEPS: usize = 16;
            let mut lo = [$set1(<$t>::NEG_INFINITY); MR];
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
                // The strip's row PREFETCH_STEPS ahead, into L1: the first tile of a k block
                // reads its block of the strip from L3 (packed `b` outgrows L2), and the
                // hardware prefetchers alone left it waiting (5% of the tile's rate on the
                // Xeon). A prefetch never faults, past the end of the strip too.
                let ahead = bk.as_ptr().wrapping_add(PREFETCH_STEPS * NR);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add($lanes).cast());
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

/// The AVX2 kernels: 8 float32 or 4 float64 lanes, a strip of two vectors.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    x86_tile!(tile_f32, f32, "avx2,fma", 8, _mm256_set1_ps, _mm256_loadu_ps,
        _mm256_storeu_ps, _mm256_add_ps, _mm256_max_ps);
    x86_tile!(tile_f64, f64, "avx2,fma", 4, _mm256_set1_pd, _mm256_loadu_pd,
        _mm256_storeu_pd, _mm256_add_pd, _mm256_max_pd);
}

/// The AVX-512 kernels: 16 float32 or 8 float64 lanes, a strip of two vectors; the strip's
/// two vectors are loaded once per k step and each panel value broadcast once.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    x86_tile!(tile_f32, f32, "avx512f,avx2,fma", 16, _mm512_set1_ps, _mm512_loadu_ps,
        _mm512_storeu_ps, _mm512_add_ps, _mm512_max_ps);
    x86_tile!(tile_f64, f64, "avx512f,avx2,fma", 8, _mm512_set1_pd, _mm512_loadu_pd,
        _mm512_storeu_pd, _mm512_add_pd, _mm512_max_pd);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level's every tile height of `T` against the shader's rule, k = 5 steps: terms
    /// with NaN (−inf + inf), ties of ±0 in both orders, +inf.
    fn same_terms_as_the_shader_rule<T: Lanes>(small: impl Fn(usize) -> T) {
        let inf = T::INFINITY;
        let levels = Level::available().into_iter().map(Kernel::<T>::at);
        let tiles = levels.flat_map(|kernel| {
            let heights = (kernel.quantum..=kernel.mr).step_by(kernel.quantum);
            heights.map(move |mr| (kernel, mr))
        });
        for (kernel, mr) in tiles {
            let level = kernel.level;
            let nr = kernel.nr;
            let k = 5;
            let mut panel = vec![T::ZERO; k * mr];
            let mut strip = vec![T::ZERO; k * nr];
            let one = small(9);
            let a_col = [-inf, T::ZERO, -T::ZERO, one, inf];
            let b_col = [inf, -T::ZERO, T::ZERO, -one, -inf];
            for kk in 0..k {
                for r in 0..mr {
                    panel[kk * mr + r] = if r % 2 == 0 { a_col[kk] } else { -a_col[kk] };
                }
                for l in 0..nr {
                    strip[kk * nr + l] = if l % 3 == 0 { b_col[kk] } else { small(l) };
                }
            }
            let mut acc = vec![T::NEG_INFINITY; mr * nr];
            kernel.tile(mr, &panel, &strip, &mut acc);
            for r in 0..mr {
                for l in 0..nr {
                    let mut want = T::NEG_INFINITY;
                    for kk in 0..k {
                        want = mx(want, panel[kk * mr + r] + strip[kk * nr + l]);
                    }
                    let got = acc[r * nr + l];
                    let at = format!("{:?} {level:?} height {mr} ({r}, {l})", T::DTYPE);
                    let bits = |v: T| T::words(&[v]).iter().map(|w| w.to_bits()).collect();
                    let (got, want): (Vec<u32>, Vec<u32>) = (bits(got), bits(want));
                    assert_eq!(got, want, "{at}");
                }
            }
        }
    }

    #[test]
    fn every_level_takes_the_same_terms_as_the_shader_rule() {
        same_terms_as_the_shader_rule::<f32>(|l| (l as f32) - 8.0);
        same_terms_as_the_shader_rule::<f64>(|l| (l as f64) - 8.0);
    }
}
