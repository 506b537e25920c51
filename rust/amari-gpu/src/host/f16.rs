//! float16 storage on the host: values widened to float32 (exact) before a float32 kernel
//! runs and its results rounded once to float16 (IEEE round-to-nearest-even) after, as the
//! WGSL float16 kernels do at their loads and stores. With F16C (x86-64 at the AVX2 level and
//! above, when the CPU has it) eight values convert per instruction (`vcvtph2ps`,
//! `vcvtps2ph` with round-to-nearest-even); otherwise [`to_f32`] and [`to_f16`] convert one
//! value at a time to the same bits. Values ride two to a word (see `crate::dtype`).

use super::simd::Level;

/// float16 `bits` as float32: exact (every float16 value is a float32 value), NaNs kept
/// quiet with their payload's top bits.
pub fn to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exp = u32::from(bits >> 10) & 0x1f;
    let mant = u32::from(bits) & 0x3ff;
    let magnitude = match exp {
        // Zero or subnormal: mant 2^-24, exact in float32.
        0 => (mant as f32 * (1.0 / 16_777_216.0)).to_bits(),
        // Infinity, or a NaN made quiet as F16C does.
        0x1f if mant == 0 => 0x7f80_0000,
        0x1f => 0x7fc0_0000 | (mant << 13),
        _ => ((exp + 112) << 23) | (mant << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// `x` rounded to float16 to nearest, ties to even (IEEE's default and F16C's mode 0):
/// past 65504 (from 65520 on) to infinity, below 2^-14 onto the subnormal grid of 2^-24,
/// NaNs quiet with the top bits of their payload (as `vcvtps2ph` gives them).
pub fn to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        return sign | 0x7e00 | ((abs >> 13) & 0x3ff) as u16;
    }
    // 65520 = 65504 + half an ulp of 65504 rounds up (to even), to infinity.
    if abs >= 0x477f_f000 {
        return sign | 0x7c00;
    }
    if abs < 0x3880_0000 {
        // Below 2^-14: the subnormal grid. |x| 2^24 rounded to an integer (ties to even)
        // is the result's bits; the product is exact and f32's rounding to an integer at
        // 2^23 magnitude is done by adding and subtracting 2^23... which only holds below
        // 2^23, as here (|x| 2^24 < 2^10).
        let scaled = f32::from_bits(abs) * 16_777_216.0;
        let rounded = (scaled + 8_388_608.0) - 8_388_608.0;
        return sign | rounded as u16;
    }
    // Normal: drop 13 mantissa bits, rounding to nearest, ties to even; a carry out of the
    // mantissa steps the exponent, as it should (up to infinity, excluded above).
    let odd = (abs >> 13) & 1;
    let rounded = abs + 0x0fff + odd;
    sign | (((rounded >> 13) - (112 << 10)) & 0x7fff) as u16
}

/// Whether [`widen`] and [`narrow`] at `level` use F16C: at AVX2 and above, on a CPU that has
/// it (every one with AVX2 has shipped with it, but it is checked).
pub fn has_f16c(level: Level) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        level.has_avx2() && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = level;
        false
    }
}

/// `out[i]` = float16 value `i` of `words` (two per word) as float32, at `level`.
pub fn widen(level: Level, words: &[f32], out: &mut [f32]) {
    let bits: &[u16] = bytemuck::cast_slice(words);
    let bits = &bits[..out.len()];
    #[cfg(target_arch = "x86_64")]
    if has_f16c(level) {
        // SAFETY: `has_f16c` found F16C on this CPU (and AVX, which AVX2 implies), all that
        // `widen_f16c` needs; it reads and writes only within its two slices.
        #[allow(unsafe_code)]
        unsafe {
            widen_f16c(bits, out)
        };
        return;
    }
    let _ = level;
    for (o, &b) in out.iter_mut().zip(bits) {
        *o = to_f32(b);
    }
}

/// Float16 value `i` of `words` (two per word) = `values[i]` rounded once, at `level`.
pub fn narrow(level: Level, values: &[f32], words: &mut [f32]) {
    let bits: &mut [u16] = bytemuck::cast_slice_mut(words);
    let bits = &mut bits[..values.len()];
    #[cfg(target_arch = "x86_64")]
    if has_f16c(level) {
        // SAFETY: as in `widen`: F16C (and AVX) were detected on this CPU; the function
        // stays within its slices.
        #[allow(unsafe_code)]
        unsafe {
            narrow_f16c(values, bits)
        };
        return;
    }
    let _ = level;
    for (b, &v) in bits.iter_mut().zip(values) {
        *b = to_f16(v);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
fn widen_f16c(bits: &[u16], out: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
    let whole = out.len() / 8 * 8;
    for (o, b) in out[..whole].chunks_exact_mut(8).zip(bits.chunks_exact(8)) {
        // SAFETY: `b` holds 8 u16s (16 bytes, unaligned loads allowed) and `o` 8 f32s.
        #[allow(unsafe_code)]
        unsafe {
            let h = _mm_loadu_si128(b.as_ptr().cast::<__m128i>());
            _mm256_storeu_ps(o.as_mut_ptr(), _mm256_cvtph_ps(h));
        }
    }
    for (o, &b) in out[whole..].iter_mut().zip(&bits[whole..]) {
        *o = to_f32(b);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
fn narrow_f16c(values: &[f32], bits: &mut [u16]) {
    use std::arch::x86_64::{
        __m128i, _mm256_cvtps_ph, _mm256_loadu_ps, _mm_storeu_si128, _MM_FROUND_TO_NEAREST_INT,
    };
    let whole = values.len() / 8 * 8;
    for (b, v) in bits[..whole]
        .chunks_exact_mut(8)
        .zip(values.chunks_exact(8))
    {
        // SAFETY: `v` holds 8 f32s and `b` 8 u16s (16 bytes, unaligned stores allowed).
        #[allow(unsafe_code)]
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(v.as_ptr()));
            _mm_storeu_si128(b.as_mut_ptr().cast::<__m128i>(), h);
        }
    }
    for (b, &v) in bits[whole..].iter_mut().zip(&values[whole..]) {
        *b = to_f16(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every 997th float32 bit pattern and every one near float16's boundaries (subnormals,
    /// the normal range's ends, ties, infinities, NaNs), both signs.
    fn samples() -> Vec<f32> {
        let mut bits: Vec<u32> = (0..u32::MAX / 997).map(|k| k * 997).collect();
        for edge in [
            0u32,
            0x3300_0000,
            0x3380_0000,
            0x3880_0000,
            0x477f_e000,
            0x477f_f000,
            0x7f80_0000,
            0x7fc0_0000,
        ] {
            bits.extend(edge.saturating_sub(0x4000)..edge.saturating_add(0x4000));
        }
        let positive: Vec<f32> = bits.into_iter().map(f32::from_bits).collect();
        positive.iter().flat_map(|&x| [x, -x]).collect()
    }

    #[test]
    fn the_scalar_conversion_rounds_to_nearest_even() {
        // Ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 (even: 1); 1 + 3 2^-11 goes up.
        assert_eq!(to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(to_f16(65504.0), 0x7bff);
        assert_eq!(to_f16(65519.99), 0x7bff);
        assert_eq!(to_f16(65520.0), 0x7c00);
        assert_eq!(to_f16(f32::INFINITY), 0x7c00);
        assert_eq!(to_f16(-f32::INFINITY), 0xfc00);
        assert_eq!(to_f16(f32::NAN), 0x7e00);
        assert_eq!(to_f16(-0.0), 0x8000);
        // Subnormals: 2^-24 is the smallest; half of it ties to 0 (even), more goes up.
        assert_eq!(to_f16(2f32.powi(-24)), 0x0001);
        assert_eq!(to_f16(2f32.powi(-25)), 0x0000);
        assert_eq!(to_f16(1.5 * 2f32.powi(-25)), 0x0001);
        assert_eq!(to_f16(3.0 * 2f32.powi(-25)), 0x0002);
        assert_eq!(to_f16(2f32.powi(-14) * (1.0 - 2f32.powi(-12))), 0x0400);
        for bits in 0..=u16::MAX {
            let x = to_f32(bits);
            if !x.is_nan() {
                assert_eq!(to_f16(x), bits, "{bits:#06x} round trip");
            }
        }
    }

    #[test]
    fn f16c_and_the_scalar_conversion_give_the_same_bits() {
        if !has_f16c(Level::detect()) {
            // The comparison needs F16C; the scalar conversion is checked above.
            eprintln!("no F16C on this CPU");
            return;
        }
        let values = samples();
        let mut words = vec![0.0f32; values.len() / 2];
        let mut scalar = words.clone();
        narrow(Level::detect(), &values, &mut words);
        narrow(Level::Portable, &values, &mut scalar);
        let (hw, sw): (&[u16], &[u16]) =
            (bytemuck::cast_slice(&words), bytemuck::cast_slice(&scalar));
        for ((x, h), s) in values.iter().zip(hw).zip(sw) {
            assert_eq!(h, s, "{:#010x}", x.to_bits());
        }
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let words: &[f32] = bytemuck::cast_slice(&all);
        let (mut hw, mut sw) = (vec![0.0f32; all.len()], vec![0.0f32; all.len()]);
        widen(Level::detect(), words, &mut hw);
        widen(Level::Portable, words, &mut sw);
        for ((b, h), s) in all.iter().zip(hw).zip(sw) {
            assert_eq!(h.to_bits(), s.to_bits(), "{b:#06x}");
        }
    }
}
