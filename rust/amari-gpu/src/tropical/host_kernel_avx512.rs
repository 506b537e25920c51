//! The AVX-512 max-plus micro-kernel: `MR` rows of two 16-lane accumulators, the packed
//! strip's two vectors loaded once per k step and each panel word broadcast once.
//! `_mm512_max_ps(s, acc)` is `s > acc ? s : acc` lane by lane (its second operand when the
//! comparison is false, NaN included), which is the shader's `mx(acc, s)` exactly.

use std::arch::x86_64::*;

const NR: usize = 32;

/// `panel` (k × MR) by `strip` (k × 32) into `acc` (MR × 32), continuing from what `acc`
/// holds, k in order.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) fn tile<const MR: usize>(panel: &[f32], strip: &[f32], acc: &mut [f32]) {
    let mut lo = [_mm512_setzero_ps(); MR];
    let mut hi = lo;
    for (r, src) in acc.chunks_exact(NR).take(MR).enumerate() {
        // SAFETY: `src` is a chunk of exactly 32 floats: the loads at 0 and 16 read 16
        // floats each inside it.
        #[allow(unsafe_code)]
        unsafe {
            lo[r] = _mm512_loadu_ps(src.as_ptr());
            hi[r] = _mm512_loadu_ps(src.as_ptr().add(16));
        }
    }
    for (ak, bk) in panel.chunks_exact(MR).zip(strip.chunks_exact(NR)) {
        // SAFETY: `bk` is a chunk of exactly NR = 32 floats: the loads at 0 and 16 read 16
        // floats each inside it.
        #[allow(unsafe_code)]
        let (b0, b1) = unsafe {
            (
                _mm512_loadu_ps(bk.as_ptr()),
                _mm512_loadu_ps(bk.as_ptr().add(16)),
            )
        };
        for r in 0..MR {
            let x = _mm512_set1_ps(ak[r]);
            lo[r] = _mm512_max_ps(_mm512_add_ps(x, b0), lo[r]);
            hi[r] = _mm512_max_ps(_mm512_add_ps(x, b1), hi[r]);
        }
    }
    for (r, dst) in acc.chunks_exact_mut(NR).take(MR).enumerate() {
        // SAFETY: `dst` is a chunk of exactly 32 floats: the stores at 0 and 16 write 16
        // floats each inside it.
        #[allow(unsafe_code)]
        unsafe {
            _mm512_storeu_ps(dst.as_mut_ptr(), lo[r]);
            _mm512_storeu_ps(dst.as_mut_ptr().add(16), hi[r]);
        }
    }
}
