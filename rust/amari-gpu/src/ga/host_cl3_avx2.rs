//! The AVX2 blocks of the host's Cl(3,0) product (`ga::host_cl3`): 8 items loaded as 8
//! rows, transposed in registers so each blade of the 8 items is one vector, the 8 chains
//! run on whole vectors and the result transposed back; float32 rows, or float16 rows
//! widened by F16C at the load and rounded once at the store.

use std::arch::x86_64::*;

use super::cl3_table::{NEG, W};

/// A block function at two levels from one body: `$name` with `$features`, and `$wide` with
/// `$wide_features` (AVX-512VL), where 32 vector registers hold the 16 transposed operand
/// vectors and the chains without spilling them to the stack. The same intrinsics, so the
/// same operations and the same bits at both.
macro_rules! at_levels {
    (
        $(#[$doc:meta])*
        $name:ident / $wide:ident ($features:literal, $wide_features:literal)
        |$a:ident, $b:ident, $out:ident, $stream:ident| $body:block
    ) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub(super) fn $name<const FUSED: bool>(
            $a: &[f32],
            $b: &[f32],
            $out: &mut [f32],
            $stream: bool,
        ) $body

        $(#[$doc])*
        #[target_feature(enable = $wide_features)]
        pub(super) fn $wide<const FUSED: bool>(
            $a: &[f32],
            $b: &[f32],
            $out: &mut [f32],
            $stream: bool,
        ) $body
    };
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

at_levels! {
/// Every whole block of 8 items of `a` and `b` into `out` (all three hold the same
/// number of words, a multiple of 64); `stream`: with non-temporal stores where `out` is
/// 16-byte aligned (every block then is: blocks are 256 bytes).
    blocks / blocks_vl ("avx2,fma", "avx512f,avx512vl,avx2,fma") |a, b, out, stream| {
    debug_assert!(a.len() == out.len() && b.len() == out.len() && out.len().is_multiple_of(64));
    let align = out.as_ptr() as usize % 32;
    let stream = stream && align.is_multiple_of(16);
    let mut at = 0;
    while at + 64 <= out.len() {
        let (x, y) = (transpose(rows(a, at)), transpose(rows(b, at)));
        let o = transpose(chains::<FUSED>(&x, &y));
        let dst = &mut out[at..at + 64];
        if stream {
            store_streaming(dst, &o, align == 0);
            at += 64;
            continue;
        }
        for (row, v) in o.iter().enumerate() {
            // SAFETY: `dst` holds 64 floats (bounds-checked above), so each unaligned
            // 8-float store at 8·row, row < 8, is inside it.
            #[allow(unsafe_code)]
            unsafe {
                _mm256_storeu_ps(dst.as_mut_ptr().add(8 * row), *v)
            };
        }
        at += 64;
    }
    if stream {
        // Non-temporal stores are weakly ordered: fence them before the caller (or
        // another thread, once the task joins) reads the output.
        _mm_sfence();
    }
}
}

/// `fn chains<const FUSED: bool>(x: &[V; W], y: &[V; W]) -> [V; W]`: the 8 chains on
/// blade-major vectors (`x[i]`: blade i of the block's items) of type `V`, with `features`
/// and that width's intrinsics (`mul`, `fmadd`, `fnmadd`, `add`, `sub`): one body for the
/// AVX2 blocks here and the AVX-512 ones (`ga::host_cl3_avx512`), the same operations lane
/// by lane, hence the same bits.
macro_rules! cl3_chains {
    ($features:literal, $v:ty, $mul:ident, $fmadd:ident, $fnmadd:ident, $add:ident, $sub:ident) => {
        /// The 8 chains on blade-major vectors (`x[i]`: blade i of the block's items).
        #[inline]
        #[target_feature(enable = $features)]
        fn chains<const FUSED: bool>(x: &[$v; W], y: &[$v; W]) -> [$v; W] {
            std::array::from_fn(|k| {
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
                acc
            })
        }
    };
}
pub(super) use cl3_chains;

cl3_chains!("avx2,fma", __m256, _mm256_mul_ps, _mm256_fmadd_ps, _mm256_fnmadd_ps, _mm256_add_ps, _mm256_sub_ps);

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
    blocks_f16 / blocks_f16_vl ("avx2,fma,f16c", "avx512f,avx512vl,avx2,fma,f16c") |a, b, out, stream| {
    debug_assert!(a.len() == out.len() && b.len() == out.len() && out.len().is_multiple_of(32));
    let stream = stream && (out.as_ptr() as usize).is_multiple_of(16);
    let mut at = 0;
    while at + 32 <= out.len() {
        let (x, y) = (transpose(half_rows(a, at)), transpose(half_rows(b, at)));
        let o = transpose(chains::<FUSED>(&x, &y));
        let dst = &mut out[at..at + 32];
        for (row, &v) in o.iter().enumerate() {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
            // SAFETY: `dst` holds 32 words (bounds-checked above), so the 16 bytes at
            // word 4·row, row < 8, are inside it; a streaming store is taken only when
            // `out` (hence `dst`, 128 bytes a block, and every row) is 16-byte aligned.
            #[allow(unsafe_code)]
            unsafe {
                let p = dst.as_mut_ptr().add(4 * row).cast::<__m128i>();
                if stream {
                    _mm_stream_si128(p, h);
                } else {
                    _mm_storeu_si128(p, h);
                }
            }
        }
        at += 32;
    }
    if stream {
        // Non-temporal stores are weakly ordered: fenced as in `blocks`.
        _mm_sfence();
    }
}
}

/// The 8 rows `o` into `dst` (64 floats, 16-byte aligned; 32-byte aligned if `wide`)
/// with non-temporal stores.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn store_streaming(dst: &mut [f32], o: &[__m256; 8], wide: bool) {
    let dst = &mut dst[..64];
    let p = dst.as_mut_ptr();
    for (row, &v) in o.iter().enumerate() {
        // SAFETY: `dst` holds 64 floats (bounds-checked above), so the 8 floats at 8·row,
        // row < 8, are inside it; `blocks` checked `p` is 16-byte aligned (32 if `wide`)
        // and 8·row floats are 32·row bytes, so every address keeps that alignment, as
        // the aligned streaming stores require.
        #[allow(unsafe_code)]
        unsafe {
            let at = p.add(8 * row);
            if wide {
                _mm256_stream_ps(at, v);
            } else {
                _mm_stream_ps(at, _mm256_castps256_ps128(v));
                _mm_stream_ps(at.add(4), _mm256_extractf128_ps::<1>(v));
            }
        }
    }
}
