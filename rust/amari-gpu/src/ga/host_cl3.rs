//! The Cl(3,0) geometric product on the host, as one chain per output blade:
//! `a[0]*b[k] ± a[1]*b[1^k] ± … ± a[7]*b[7^k]` (i in order, the Cayley table's sign).
//!
//! Two kernels compute exactly that chain. The static shader `shaders/geometric_cl3.wgsl`
//! writes it as one expression with no `fma` (every product rounded, then the sums left to
//! right): [`Cl3Product`] is its host twin, so the host and Mesa's lavapipe/llvmpipe agree
//! bit for bit. (A driver that contracts `x*y + z` into one fused operation, which SPIR-V
//! allows and hardware GPUs may do, rounds that shader differently: a property of the shader
//! on that driver, which the host cannot know.) The generated Cl(3,0) geometric product
//! (`ga::codegen`) writes the same chain as `fma` steps, which `ga::host` runs through
//! [`run_chains`] with the devices' `fma` rounding.
//!
//! On AVX2 a block of 8 items is loaded as 8 rows, transposed in registers (so each blade of
//! the 8 items is one vector), the 8 chains run on whole vectors, and the result is
//! transposed back: three 8 x 8 transposes and 64 multiply-adds per 8 items, the rest of the
//! time is memory traffic. Elsewhere the same chains run one item at a time.

use std::ops::Range;
use std::sync::Arc;

use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

use super::host_program::Step;

/// Items computed together on AVX2 (one vector per blade).
#[cfg(target_arch = "x86_64")]
const LANES: usize = 8;
/// Items per rayon task: 64 KiB of operands and output, a few L2-sized pieces per thread.
const GRAIN: usize = 2048;
/// Blades of Cl(3,0).
const W: usize = 8;

/// Whether the term `a[i] * b[j]` enters blade `i ^ j` with a minus sign in Cl(3,0) (every
/// basis vector squares to +1, so only the reordering sign counts).
const fn negative(i: usize, j: usize) -> bool {
    let mut swaps = 0;
    let mut a = i >> 1;
    while a != 0 {
        swaps += (a & j).count_ones();
        a >>= 1;
    }
    swaps % 2 == 1
}

/// `NEG[k][i]`: the sign of the term `a[i] * b[i ^ k]` of output blade `k`.
const NEG: [[bool; W]; W] = {
    let mut t = [[false; W]; W];
    let mut k = 0;
    while k < W {
        let mut i = 0;
        while i < W {
            t[k][i] = negative(i, i ^ k);
            i += 1;
        }
        k += 1;
    }
    t
};

/// Whether `steps` are exactly the Cl(3,0) chains [`run_chains`] computes: output blade k
/// from `a[i] * b[i ^ k]`, i = 0..8 in order, signs of the Cayley table, the first a product.
pub fn is_cl3_chain(steps: &[Step]) -> bool {
    steps.len() == W * W
        && steps.iter().enumerate().all(|(n, s)| {
            let (k, i) = (n / W, n % W);
            (s.k as usize, s.i as usize, s.j as usize, s.neg, s.first)
                == (k, i, i ^ k, NEG[k][i], i == 0)
        })
}

/// The Cl(3,0) geometric product of the static shader on the host.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cl3Product;

impl HostImpl for Cl3Product {
    /// Runs items `range` (inputs: `a` and `b`, 8 words per item) into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        assert_eq!(output.len(), range.len() * W, "output of the chunk's items");
        let a = &inputs[0][range.start * W..range.end * W];
        let b = &inputs[1][range.start * W..range.end * W];
        run_chains(a, b, output, false, streams(inputs[0].len().saturating_mul(12)));
    }

    /// The static shader has no `fma`: unchanged.
    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}

/// Whether a call that moves `bytes` (its operands and its output) streams its output past
/// the caches: when they outgrow the last-level cache, the output would not be read from
/// there anyway, and a non-temporal store saves the read of every output line before it is
/// written (a third of a product's traffic).
pub fn streams(bytes: usize) -> bool {
    bytes > crate::host::cpu::last_level_cache_bytes()
}

/// `out[n] = a[n] b[n]` for rows of 8 words on the current rayon pool, each output blade one
/// chain in Cayley order: products and sums rounded apart, or (`fused`) the chain's further
/// terms as fused multiply-adds; `stream` writes whole blocks with non-temporal stores (same
/// words, see [`streams`]).
pub fn run_chains(a: &[f32], b: &[f32], out: &mut [f32], fused: bool, stream: bool) {
    out.par_chunks_mut(GRAIN * W)
        .zip(a.par_chunks(GRAIN * W))
        .zip(b.par_chunks(GRAIN * W))
        .for_each(|((out, a), b)| {
            #[cfg(target_arch = "x86_64")]
            let whole = if crate::host::simd::Level::detect().has_avx2() {
                let whole = out.len() / (LANES * W) * (LANES * W);
                // SAFETY: `Level::has_avx2` is true only after
                // `is_x86_feature_detected!` found AVX2 and FMA on this CPU, which is all the
                // target-feature function needs; its own memory accesses are in bounds (see
                // `avx2::blocks`).
                #[allow(unsafe_code)]
                unsafe {
                    if fused {
                        avx2::blocks::<true>(&a[..whole], &b[..whole], &mut out[..whole], stream);
                    } else {
                        avx2::blocks::<false>(&a[..whole], &b[..whole], &mut out[..whole], stream);
                    }
                }
                whole
            } else {
                0
            };
            #[cfg(not(target_arch = "x86_64"))]
            let whole = 0;
            let (a, b, out) = (&a[whole..], &b[whole..], &mut out[whole..]);
            if fused {
                one_by_one::<true>(a, b, out);
            } else {
                one_by_one::<false>(a, b, out);
            }
        });
}

/// The chains of each item in turn (the portable path, and the last items of a task).
fn one_by_one<const FUSED: bool>(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, x), y) in out
        .chunks_exact_mut(W)
        .zip(a.chunks_exact(W))
        .zip(b.chunks_exact(W))
    {
        for k in 0..W {
            let mut acc = x[0] * y[k];
            for i in 1..W {
                let (xi, yj) = (if NEG[k][i] { -x[i] } else { x[i] }, y[i ^ k]);
                acc = if FUSED {
                    xi.mul_add(yj, acc)
                } else {
                    acc + xi * yj
                };
            }
            o[k] = acc;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use crate::ga::host_cl3::{NEG, W};

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

    /// Every whole block of 8 items of `a` and `b` into `out` (all three hold the same
    /// number of words, a multiple of 64); `stream`: with non-temporal stores where `out` is
    /// 16-byte aligned (every block then is: blocks are 256 bytes).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn blocks<const FUSED: bool>(a: &[f32], b: &[f32], out: &mut [f32], stream: bool) {
        debug_assert!(a.len() == out.len() && b.len() == out.len() && out.len().is_multiple_of(64));
        let align = out.as_ptr() as usize % 32;
        let stream = stream && align.is_multiple_of(16);
        let mut at = 0;
        while at + 64 <= out.len() {
            let (x, y) = (transpose(rows(a, at)), transpose(rows(b, at)));
            let mut r = [_mm256_setzero_ps(); W];
            for k in 0..W {
                let mut acc = _mm256_mul_ps(x[0], y[k]);
                for i in 1..W {
                    let (xi, yj) = (x[i], y[i ^ k]);
                    acc = match (FUSED, NEG[k][i]) {
                        (true, false) => _mm256_fmadd_ps(xi, yj, acc),
                        // fma(-x, y, acc): the negated product added with one rounding.
                        (true, true) => _mm256_fnmadd_ps(xi, yj, acc),
                        (false, false) => _mm256_add_ps(acc, _mm256_mul_ps(xi, yj)),
                        (false, true) => _mm256_sub_ps(acc, _mm256_mul_ps(xi, yj)),
                    };
                }
                r[k] = acc;
            }
            let o = transpose(r);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expression of the shader, written out for one item (blade 0 and 3 as in
    /// `geometric_cl3.wgsl`).
    #[test]
    fn signs_match_the_shader_text() {
        // r0 = a0.x*b0.x + a0.y*b0.y + a0.z*b0.z - a0.w*b0.w + a1.x*b1.x - a1.y*b1.y
        //      - a1.z*b1.z - a1.w*b1.w
        let r0 = [false, false, false, true, false, true, true, true];
        // r3 = a0.x*b0.w + a0.y*b0.z - a0.z*b0.y + a0.w*b0.x + a1.x*b1.w - a1.y*b1.z
        //      + a1.z*b1.y + a1.w*b1.x
        let r3 = [false, false, true, false, false, true, false, false];
        assert_eq!(NEG[0], r0);
        assert_eq!(NEG[3], r3);
    }

    #[test]
    fn the_generated_cl3_product_is_these_chains() {
        use crate::ga::algebra::Algebra;
        use crate::ga::host_program::Program;
        use crate::ga::operation::Operation;
        let Program::Products(stages) = Program::new(&Algebra::CL3, Operation::Geometric) else {
            panic!("a product");
        };
        assert!(is_cl3_chain(&stages[0].steps));
        let Program::Products(outer) = Program::new(&Algebra::CL3, Operation::Outer) else {
            panic!("a product");
        };
        assert!(!is_cl3_chain(&outer[0].steps));
    }

    #[test]
    fn odd_counts_match_one_item_at_a_time() {
        let n = 2 * GRAIN + 13;
        let a: Vec<f32> = (0..n * W).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..n * W).map(|i| (i as f32 * 0.91).cos()).collect();
        let mut out = vec![0.0; (n - 5) * W];
        Cl3Product.run(&[&a, &b], 5..n, &mut out);
        let mut fused = vec![0.0; (n - 5) * W];
        run_chains(&a[5 * W..], &b[5 * W..], &mut fused, true, false);
        // Streamed stores write the same words, at either alignment of the output.
        for offset in [0, 4] {
            let mut buf = vec![0.0f32; (n - 5) * W + offset];
            let streamed = &mut buf[offset..];
            run_chains(&a[5 * W..], &b[5 * W..], streamed, true, true);
            assert!(streamed.iter().zip(&fused).all(|(s, f)| s.to_bits() == f.to_bits()));
        }
        for item in 5..n {
            let (x, y) = (&a[item * W..][..W], &b[item * W..][..W]);
            for k in 0..W {
                let (mut acc, mut chain) = (x[0] * y[k], x[0] * y[k]);
                for i in 1..W {
                    let p = x[i] * y[i ^ k];
                    acc = if NEG[k][i] { acc - p } else { acc + p };
                    let xi = if NEG[k][i] { -x[i] } else { x[i] };
                    chain = xi.mul_add(y[i ^ k], chain);
                }
                assert_eq!(out[(item - 5) * W + k].to_bits(), acc.to_bits());
                assert_eq!(fused[(item - 5) * W + k].to_bits(), chain.to_bits());
            }
        }
    }
}
