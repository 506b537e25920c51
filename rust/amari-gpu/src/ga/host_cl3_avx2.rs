//! The AVX2 blocks of the host's Cl(3,0) product (`ga::host_cl3`): 8 items loaded as 8
//! rows, transposed in registers so each blade of the 8 items is one vector, the 8 chains
//! run on whole vectors and the result transposed back; float32 rows, or float16 rows
//! widened by F16C at the load and rounded once at the store. float64 rows run the same
//! chains on blocks of 4 items (two 4 x 4 transposes of doubles per operand and result).
//! Every result vector is written through `host::simd::Stores` (non-temporal for outputs
//! larger than the last-level cache).

use std::arch::x86_64::*;

use super::cl3_table::{NEG, W};
use crate::host::simd::{prefetch, Stores};

/// A block function at two levels from one body: `$name` with `$features`, and `$wide` with
/// `$wide_features` (AVX-512VL), where 32 vector registers hold the 16 transposed operand
/// vectors and the chains without spilling them to the stack. The same intrinsics, so the
/// same operations and the same bits at both. `$pipelined` is true at the wide level only
/// (see [`next_block`]).
macro_rules! at_levels {
    (
        $(#[$doc:meta])*
        $name:ident / $wide:ident ($features:literal, $wide_features:literal)
        |$a:ident, $b:ident, $out:ident, $stream:ident, $pipelined:ident| $body:block
    ) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub(super) fn $name<const FUSED: bool>(
            $a: &[f32],
            $b: &[f32],
            $out: &mut [f32],
            $stream: bool,
        ) {
            let $pipelined = false;
            $body
        }

        $(#[$doc])*
        #[target_feature(enable = $wide_features)]
        pub(super) fn $wide<const FUSED: bool>(
            $a: &[f32],
            $b: &[f32],
            $out: &mut [f32],
            $stream: bool,
        ) {
            let $pipelined = true;
            $body
        }
    };
}

/// The operands of the block at word `at` of a loop over blocks of `len` words each: the
/// ones `load` gave ahead of it (`ahead`, taken), or loaded now. Software-pipelined
/// (`pipelined`: the next block's loaded and transposed before this block's results are,
/// as `host_cl3_avx512::each_block`, why there) with the 32 vector registers of AVX-512VL;
/// in program order with AVX2's 16, where the next block's 16 transposed vectors beside
/// this block's spill to the stack: a float16 product of 2^20 rows on the 2-vCPU Zen 3 VM
/// of `docs/benchmarks.md`, 3.92 -> 3.55 ms a call (alternating processes, six rounds).
#[inline(always)]
fn next_block<T>(ahead: &mut Option<T>, load: impl Fn(usize) -> T, at: usize) -> T {
    ahead.take().unwrap_or_else(|| load(at))
}

/// Eight rows of eight floats to eight columns (`out[k]` holds word k of every row).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn transpose(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// Eight consecutive rows of `x` from word `at` on.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn rows(x: &[f32], at: usize) -> [__m256; 8] {
    let x = &x[at..at + 64];
    // SAFETY: `x` holds 64 floats (the slice above is bounds-checked), so each unaligned
    // 8-float load at 8r, r < 8, is inside it.
    #[allow(unsafe_code)]
    std::array::from_fn(|r| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * r)) })
}

/// Words ahead of the block being loaded from which every block here and in
/// `host_cl3_avx512` asks for its operands' rows (4 KiB): on the 2-core AVX-512 virtual
/// machine of `docs/benchmarks.md` the hardware prefetchers alone left these loops waiting
/// on memory, a third more CPU time per call at 2^20 rows (float16 and float32 alike).
pub(super) const PREFETCH_WORDS: usize = 1024;

at_levels! {
/// Every whole block of 8 items of `a` and `b` into `out` (all three hold the same
/// number of words, a multiple of 64); `stream`: with non-temporal stores (`Stores`).
    blocks / blocks_vl ("avx2,fma", "avx512f,avx512vl,avx2,fma") |a, b, out, stream, pipelined| {
    debug_assert!(a.len() == out.len() && b.len() == out.len() && out.len().is_multiple_of(64));
    let stores = Stores::new(out, stream);
    let load = |at: usize| {
        prefetch(a, at + PREFETCH_WORDS, 64);
        prefetch(b, at + PREFETCH_WORDS, 64);
        (transpose(rows(a, at)), transpose(rows(b, at)))
    };
    let mut at = 0;
    let mut ahead = None;
    while at + 64 <= out.len() {
        let (x, y) = next_block(&mut ahead, load, at);
        let r = chains::<FUSED>(&x, &y);
        ahead = (pipelined && at + 128 <= out.len()).then(|| load(at + 64));
        for (row, &v) in transpose(r).iter().enumerate() {
            stores.m256(out, at + 8 * row, v);
        }
        at += 64;
    }
    stores.finish();
}
}

/// `fn name<const FUSED: bool>(x: &[V; W], y: &[V; W]) -> [V; W]`: the 8 chains on
/// blade-major vectors (`x[i]`: blade i of the block's items) of type `V`, with `features`
/// and that width's intrinsics (`mul`, `fmadd`, `fnmadd`, `add`, `sub`): one body for the
/// AVX2 blocks here (float32 and float64) and the AVX-512 ones (`ga::host_cl3_avx512`), the
/// same operations lane by lane, hence the same bits.
macro_rules! cl3_chains {
    ($name:ident, $features:literal, $v:ty, $mul:ident, $fmadd:ident, $fnmadd:ident, $add:ident, $sub:ident) => {
        /// The 8 chains on blade-major vectors (`x[i]`: blade i of the block's items).
        #[inline]
        #[target_feature(enable = $features)]
        fn $name<const FUSED: bool>(x: &[$v; W], y: &[$v; W]) -> [$v; W] {
            // Plain loops (unrolled), not `array::from_fn`'s closure, which the compiler
            // may leave out of line: 8 calls a block, the vectors through the stack.
            let mut r = *x;
            for k in 0..W {
                let mut acc = $mul(x[0], y[k]);
                for i in 1..W {
                    let (xi, yj) = (x[i], y[i ^ k]);
                    acc = match (FUSED, NEG[k][i]) {
                        (true, false) => $fmadd(xi, yj, acc),
                        // fma(-x, y, acc): the negated product added with one rounding.
                        (true, true) => $fnmadd(xi, yj, acc),
                        (false, false) => $add(acc, $mul(xi, yj)),
                        (false, true) => $sub(acc, $mul(xi, yj)),
                    };
                }
                r[k] = acc;
            }
            r
        }
    };
}
pub(super) use cl3_chains;

cl3_chains!(chains, "avx2,fma", __m256, _mm256_mul_ps, _mm256_fmadd_ps, _mm256_fnmadd_ps, _mm256_add_ps, _mm256_sub_ps);
cl3_chains!(
    chains_f64,
    "avx2,fma",
    __m256d,
    _mm256_mul_pd,
    _mm256_fmadd_pd,
    _mm256_fnmadd_pd,
    _mm256_add_pd,
    _mm256_sub_pd
);

/// Eight consecutive float16 rows of `x` (4 words each) from word `at` on, each widened
/// to float32 as it is loaded (`vcvtph2ps`, exact).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn half_rows(x: &[f32], at: usize) -> [__m256; 8] {
    let x = &x[at..at + 32];
    // SAFETY: `x` holds 32 words (the slice above is bounds-checked), so each unaligned
    // 16-byte load at word 4r, r < 8, is inside it.
    #[allow(unsafe_code)]
    std::array::from_fn(|r| unsafe {
        _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(4 * r).cast::<__m128i>()))
    })
}

at_levels! {
/// [`blocks`] in float16 storage: every whole block of 8 items (32 words) of `a` and `b`
/// into `out` (all three the same number of words, a multiple of 32), the rows widened
/// in registers and each result rounded once at the store (`vcvtps2ph`, to nearest, ties
/// to even, as `host::f16::narrow` rounds); `stream`: non-temporal stores where `out` is
/// 16-byte aligned (every 16-byte row then is).
    blocks_f16 / blocks_f16_vl ("avx2,fma,f16c", "avx512f,avx512vl,avx2,fma,f16c") |a, b, out, stream, pipelined| {
    debug_assert!(a.len() == out.len() && b.len() == out.len() && out.len().is_multiple_of(32));
    let stores = Stores::new(out, stream);
    let load = |at: usize| {
        prefetch(a, at + PREFETCH_WORDS, 32);
        prefetch(b, at + PREFETCH_WORDS, 32);
        (transpose(half_rows(a, at)), transpose(half_rows(b, at)))
    };
    let mut at = 0;
    let mut ahead = None;
    while at + 32 <= out.len() {
        let (x, y) = next_block(&mut ahead, load, at);
        let r = chains::<FUSED>(&x, &y);
        ahead = (pipelined && at + 64 <= out.len()).then(|| load(at + 32));
        for (row, &v) in transpose(r).iter().enumerate() {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
            stores.m128(out, at + 4 * row, _mm_castsi128_ps(h));
        }
        at += 32;
    }
    stores.finish();
}
}

/// Four rows of four doubles to four columns (`out[k]` holds value k of every row); its own
/// inverse.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn transpose4(r: [__m256d; 4]) -> [__m256d; 4] {
    // (r0[0], r1[0], r0[2], r1[2]), (r0[1], r1[1], r0[3], r1[3]), the same of rows 2 and 3.
    let t0 = _mm256_unpacklo_pd(r[0], r[1]);
    let t1 = _mm256_unpackhi_pd(r[0], r[1]);
    let t2 = _mm256_unpacklo_pd(r[2], r[3]);
    let t3 = _mm256_unpackhi_pd(r[2], r[3]);
    [
        _mm256_permute2f128_pd::<0x20>(t0, t2),
        _mm256_permute2f128_pd::<0x20>(t1, t3),
        _mm256_permute2f128_pd::<0x31>(t0, t2),
        _mm256_permute2f128_pd::<0x31>(t1, t3),
    ]
}

/// Blades `4h..4h + 4` of the four float64 rows of `x` from word `at` on (16 words a row),
/// blade-major: `out[j]` holds blade `4h + j` of the four items.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn f64_blades(x: &[f32], at: usize, h: usize) -> [__m256d; 4] {
    let x = &x[at..at + 64];
    // SAFETY: `x` holds 64 words (the slice above is bounds-checked) and `h` < 2, so each
    // unaligned 32-byte load at word 16m + 8h, m < 4, is inside it; `_mm256_loadu_pd`
    // needs no alignment.
    #[allow(unsafe_code)]
    let row = |m: usize| unsafe { _mm256_loadu_pd(x.as_ptr().add(16 * m + 8 * h).cast::<f64>()) };
    transpose4([row(0), row(1), row(2), row(3)])
}

/// The 8 blades of the block of four float64 items at word `at` of `x`, blade-major.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn f64_block(x: &[f32], at: usize) -> [__m256d; W] {
    let (lo, hi) = (f64_blades(x, at, 0), f64_blades(x, at, 1));
    [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
}

at_levels! {
/// [`blocks`] in float64: every whole block of 4 items (64 words, 16 per item) of `a` and
/// `b` into `out` (all three the same number of words, a multiple of 64), the same chains on
/// four float64 lanes; `stream`: with non-temporal stores (`Stores`).
    blocks_f64 / blocks_f64_vl ("avx2,fma", "avx512f,avx512vl,avx2,fma") |a, b, out, stream, _pipelined| {
    debug_assert!(a.len() == out.len() && b.len() == out.len() && out.len().is_multiple_of(64));
    let stores = Stores::new(out, stream);
    let mut at = 0;
    while at + 64 <= out.len() {
        prefetch(a, at + PREFETCH_WORDS, 64);
        prefetch(b, at + PREFETCH_WORDS, 64);
        let (x, y) = (f64_block(a, at), f64_block(b, at));
        let r = chains_f64::<FUSED>(&x, &y);
        let lo = transpose4([r[0], r[1], r[2], r[3]]);
        let hi = transpose4([r[4], r[5], r[6], r[7]]);
        for m in 0..4 {
            stores.m256(out, at + 16 * m, _mm256_castpd_ps(lo[m]));
            stores.m256(out, at + 16 * m + 8, _mm256_castpd_ps(hi[m]));
        }
        at += 64;
    }
    stores.finish();
}
}

#[cfg(test)]
mod tests {
    use super::super::host_cl3::{run_chains, Storage};
    use super::*;
    use crate::dtype::{read_f64, write_f64};
    use crate::host::simd::{force_level, Level};

    /// Rows of `n` items of `storage`'s words, values in every magnitude the tests need:
    /// ordinary ones, large ones whose products overflow to infinity, an infinity.
    fn rows(n: usize, storage: Storage, seed: u64) -> Vec<f32> {
        let mut v = crate::sample::uniform_f32(n * W, seed);
        for (i, x) in v.iter_mut().enumerate() {
            *x *= [1.0, 3e30, 1.0 / 4096.0][i / W % 3];
        }
        if n > 7 {
            v[7 * W + 2] = f32::INFINITY;
        }
        match storage {
            Storage::F64 => {
                let mut words = vec![0.0f32; 2 * v.len()];
                let scale = |i: usize| if i / W % 3 == 1 { 1e270 } else { 1.0 };
                for (i, &x) in v.iter().enumerate() {
                    write_f64(&mut words, i, f64::from(x) * scale(i));
                }
                words
            }
            _ => v,
        }
    }

    /// Each output blade's chain of one item written out in `T`: a product, then the
    /// signed terms in order, fused or not.
    fn chain<T: crate::host::arith::Real>(x: &[T], y: &[T], k: usize, fused: bool) -> T {
        let mut acc = x[0] * y[k];
        for i in 1..W {
            let xi = if NEG[k][i] { -x[i] } else { x[i] };
            acc = if fused {
                T::madd::<true>(xi, y[i ^ k], acc)
            } else {
                T::madd::<false>(xi, y[i ^ k], acc)
            };
        }
        acc
    }

    /// float32 and float64 rows at the detected level, AVX2 and the portable one, streamed
    /// or not, into outputs 64-byte aligned and offset by 1, 2, 4 and 8 words (streaming
    /// then takes 16- and 32-byte pieces, or ordinary stores), at 1 item, a block's tail and
    /// more than a task: every word the item's chains, bit for bit.
    #[test]
    fn streamed_rows_are_the_chains_at_every_level_alignment_and_count() {
        for storage in [Storage::F32, Storage::F64] {
            let words = storage.words();
            for n in [1, 3, 5, 9, 4099] {
                let (a, b) = (rows(n, storage, 5), rows(n, storage, 6));
                for fused in [false, true] {
                    let mut want = vec![0.0f32; n * words];
                    for m in 0..n {
                        let (x, y) = (&a[m * words..][..words], &b[m * words..][..words]);
                        let o = &mut want[m * words..][..words];
                        for k in 0..W {
                            if storage == Storage::F64 {
                                let wide = |v: &[f32]| (0..W).map(|j| read_f64(v, j)).collect::<Vec<_>>();
                                write_f64(o, k, chain(&wide(x), &wide(y), k, fused));
                            } else {
                                o[k] = chain(x, y, k, fused);
                            }
                        }
                    }
                    for level in [None, Some(Level::Avx2), Some(Level::Portable)] {
                        for stream in [false, true] {
                            for offset in [0, 1, 2, 4, 8] {
                                let mut buf = vec![0.0f32; n * words + 32];
                                let start = (64 - buf.as_ptr() as usize % 64) % 64 / 4 + offset;
                                let out = &mut buf[start..start + n * words];
                                force_level(level);
                                run_chains(&a, &b, out, storage, fused, stream);
                                force_level(None);
                                let same = out.iter().zip(&want).all(|(o, w)| o.to_bits() == w.to_bits());
                                assert!(same, "{storage:?} n {n} fused {fused} {level:?} stream {stream} offset {offset}");
                            }
                        }
                    }
                }
            }
        }
    }
}
