//! `normalize` as `ga::codegen_normalize` generates it, in float32 and float64 by the same
//! steps ([`NormFloat`] holds what differs: the bit layout and the clamps): scale the row by the power of two just above
//! its largest entering |x_k| (two exact products by powers of two), take ⟨y ỹ⟩₀ as the
//! generated sum of squares, s = sqrt(|n2|), then each result as (f_k / s) 2^a 2^b with
//! x_k = f_k 2^ev (`frexp`, read from the bits) and a + b = ev + e, never forming x_k 2^e:
//! a null component (the e4-blades of Cl(3,0,1)) far larger than tiny entering ones would
//! overflow there although its quotient is finite. Rows that are zero or null are kept.
//! Rows with a NaN or an infinite entry (in any blade, entering the norm or not) never reach
//! that arithmetic: see [`non_finite_row`].
//!
//! Bounds (float32; float64's in [`NormFloat::A`]): f_k / s lies in [2^-4, 2^75), so its
//! product by 2^a (a clamped to [-122, 52]) is exact and normal, and the product by 2^b
//! rounds once or overflows. Results in the normal
//! range are therefore those of (x_k 2^e) / s bit for bit (correctly rounded quotients of
//! the scaled row); a result in the subnormal range is rounded twice (the quotient, then to
//! the subnormal grid) and is within 2^-149 of the exact quotient instead of 2^-150. Devices
//! that flush subnormals (WGSL allows it; many hardware GPUs do) flush such inputs and
//! results, which the host does not; lavapipe and llvmpipe keep them (tested). Powers of two are applied by multiplication, as the
//! WGSL does, not `ldexp`: Mesa computes `ldexp` as two products, which rounds twice into
//! the subnormals (the float64 WGSL's `ldexp(1, k)` only builds normal powers of two, which
//! two products give exactly). `frexp` is read from the bits, as the float32 WGSL does (the
//! float64 one finds it by comparisons, see `ga::codegen_normalize`): Mesa's misreads subnormals.
//!
//! The generated `n2 = y0 * y0 + y1 * y1 - ...` is plain WGSL arithmetic, which a driver may
//! contract into fused multiply-adds (WGSL allows it). Mesa's CPU drivers evaluate it as
//! written, one rounding per product and per sum, left to right ([`FmaMode::Separate`]), and
//! round `sqrt` and the division correctly: the host matches them bit for bit (tested). A
//! hardware GPU's compiler may contract the sum in an order of its own, and its `sqrt` and
//! division are approximations (WGSL allows 2.5 ULP for division): with
//! [`FmaMode::Fused`] the host contracts the chain as `fma(±y_k, y_k, ... fma(y0, y0,
//! y1 * y1))`, a best guess, so `normalize` is not promised bit-identical to hardware GPUs.

use std::ops::Div;

use crate::host::arith::Real;
use crate::kernel::FmaMode;

/// What `normalize` needs of a float type beyond [`Real`]: its bit layout (the exact powers
/// of two and `frexp` are built from it) and the few functions of the row's arithmetic.
pub trait NormFloat: Real + PartialOrd + Div<Output = Self> {
    /// Fraction bits (23, 52).
    const MANT: u32;
    /// Exponent bias (127, 1023): normal exponents are `1 - BIAS ..= BIAS`.
    const BIAS: i32;
    /// The clamp of the first power of two of [`scaled_quotient`]: f / s lies in
    /// [2^-4, 2^(BIAS - 52)) (f32: s ≥ 2^-74.5, the root of the least subnormal; f64: s ≥
    /// 2^-537), so (f / s) 2^a is exact and normal for `a` in it.
    const A: (i32, i32);
    /// The quiet NaN every NaN result of `normalize` is, bit for bit, on every device kind
    /// (0x7fc00000, 0x7ff8000000000000): IEEE arithmetic would pass on whichever operand's
    /// payload and sign the compiler happened to put first (and x86's inf / inf is the
    /// negative "indefinite" NaN, ARM's the positive one).
    const QNAN: Self;
    /// The bits, widened to 64.
    fn bits(self) -> u64;
    /// The value of `bits` (its low `32 * WORDS`).
    fn of_bits(bits: u64) -> Self;
    /// |self|.
    fn abs(self) -> Self;
    /// The correctly rounded square root.
    fn sqrt(self) -> Self;
    /// The larger of two non-NaN values.
    fn max(self, other: Self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// Whether the value is neither infinite nor NaN.
    fn is_finite(self) -> bool;
}

macro_rules! norm_float {
    ($t:ty, $bits:ty, $mant:literal, $bias:literal, $a:expr, $nan:literal) => {
        impl NormFloat for $t {
            const MANT: u32 = $mant;
            const BIAS: i32 = $bias;
            const A: (i32, i32) = $a;
            const QNAN: $t = <$t>::from_bits($nan);
            fn bits(self) -> u64 {
                u64::from(self.to_bits())
            }
            fn of_bits(bits: u64) -> $t {
                // Only the type's own bits are ever passed (the narrowing keeps them).
                <$t>::from_bits(bits as $bits)
            }
            fn abs(self) -> $t {
                <$t>::abs(self)
            }
            fn sqrt(self) -> $t {
                <$t>::sqrt(self)
            }
            fn max(self, other: $t) -> $t {
                <$t>::max(self, other)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}

norm_float!(f32, u32, 23, 127, (-122, 52), 0x7fc0_0000);
norm_float!(f64, u64, 52, 1023, (-1018, 486), 0x7ff8_0000_0000_0000);

/// 2^k for 1 - BIAS ≤ k ≤ BIAS, exactly (the generated `pow2`).
pub fn pow2<T: NormFloat>(k: i32) -> T {
    debug_assert!((1 - T::BIAS..=T::BIAS).contains(&k), "2^{k} is not normal");
    T::of_bits(((k + T::BIAS) as u64) << T::MANT)
}

/// `frexp` as the generated `split` computes it: `(f, e)` with `x = f 2^e` and
/// 0.5 ≤ |f| < 1 for finite non-zero `x` (a subnormal is first scaled by 2^64, exactly);
/// `e` is -(BIAS + 63) for ±0 and BIAS + 2 for inf and NaN, which the callers keep apart
/// (the float64 WGSL's `split` gives other exponents there, never used either).
pub fn split<T: NormFloat>(x: T) -> (T, i32) {
    let field = u64::from(2 * T::BIAS as u32 + 1);
    let sub = (x.bits() >> T::MANT) & field == 0;
    let bits = if sub { x * pow2(64) } else { x }.bits();
    let fract = T::of_bits((bits & !(field << T::MANT)) | (((T::BIAS - 1) as u64) << T::MANT));
    let exp = ((bits >> T::MANT) & field) as i32 - (T::BIAS - 1);
    (fract, exp - if sub { 64 } else { 0 })
}

/// `v 2^e / s` as the generated `scaled_quotient` computes it (see the module's doc).
#[inline]
pub fn scaled_quotient<T: NormFloat>(v: T, e: i32, s: T) -> T {
    if !v.is_finite() || !s.is_finite() || v == T::ZERO {
        return v / s;
    }
    let (f, ev) = split(v);
    let n = ev + e;
    let a = n.clamp(T::A.0, T::A.1);
    f / s * pow2(a) * pow2((n - a).clamp(1 - T::BIAS, T::BIAS))
}

/// The generated `n2`: Σ sign_k y_k² over the entering blades in ascending order, as
/// written (`Separate`) or contracted (`Fused`, see the module's doc).
#[inline]
pub fn norm2<T: NormFloat>(y: &[T], signs: &[i8], fma: FmaMode) -> T {
    let mut terms = signs
        .iter()
        .zip(y)
        .filter(|(&s, _)| s != 0)
        .map(|(&s, &v)| (if s < 0 { -v } else { v }, v));
    let Some((x0, y0)) = terms.next() else {
        return T::ZERO;
    };
    if fma == FmaMode::Separate {
        return terms.fold(x0 * y0, |acc, (x, v)| T::madd::<false>(x, v, acc));
    }
    let Some((x1, y1)) = terms.next() else {
        return x0 * y0;
    };
    let mut acc = T::madd::<true>(x0, y0, x1 * y1);
    for (x, v) in terms {
        acc = T::madd::<true>(x, v, acc);
    }
    acc
}

/// `normalize` of a row holding a NaN or an infinity, as the generated kernel selects it:
/// any NaN makes the whole row [`NormFloat::QNAN`]; otherwise each infinite entry becomes
/// that NaN and each finite one 0 with its sign (x / |x| with |x| = inf). `None` for a
/// finite row. The rule covers every blade, null ones included: max() and the sum of
/// squares would otherwise drop a NaN beside zeros (the row kept as it is) or one in a null
/// blade.
pub fn non_finite_row<T: NormFloat>(x: &[T]) -> Option<impl Iterator<Item = T> + '_> {
    let nan = x.iter().any(|v| v.is_nan());
    if !nan && x.iter().all(|v| v.is_finite()) {
        return None;
    }
    let sign = 1u64 << (32 * T::WORDS - 1);
    Some(x.iter().map(move |&v| {
        if nan || !v.is_finite() {
            T::QNAN
        } else {
            T::of_bits(v.bits() & sign)
        }
    }))
}

/// One row of `normalize` into `out` (same length as `x`).
pub fn normalize_row<T: NormFloat>(x: &[T], signs: &[i8], out: &mut [T], fma: FmaMode) {
    if let Some(special) = non_finite_row(x) {
        for (r, v) in out.iter_mut().zip(special) {
            *r = v;
        }
        return;
    }
    let mut mx = T::ZERO;
    for (&v, &s) in x.iter().zip(signs) {
        if s != 0 {
            mx = mx.max(v.abs());
        }
    }
    let e = -split(mx).1;
    let e1 = e.clamp(1 - T::BIAS, 64);
    let (p1, p2): (T, T) = (pow2(e1), pow2((e - e1).clamp(1 - T::BIAS, T::BIAS)));
    // Only the entering blades are scaled (the others' squares are not summed).
    let mut y = [T::ZERO; 64];
    for ((t, &v), &s) in y.iter_mut().zip(x).zip(signs) {
        if s != 0 {
            *t = v * p1 * p2;
        }
    }
    let n2 = norm2(&y[..x.len()], signs, fma);
    let s = n2.abs().sqrt();
    let keep = mx == T::ZERO || s == T::ZERO;
    for (r, &v) in out.iter_mut().zip(x) {
        *r = if keep { v } else { scaled_quotient(v, e, s) };
    }
}

/// `normalize` of the rows in `x` (the engine's words, values of `T::WORDS` words each)
/// into `out`, one row of values at a time on the stack (float64 words need not be
/// aligned for `f64`).
pub fn normalize_rows<T: NormFloat>(x: &[f32], signs: &[i8], out: &mut [f32], fma: FmaMode) {
    let w = signs.len();
    let (mut row, mut res) = ([T::ZERO; 64], [T::ZERO; 64]);
    for (words, dest) in x
        .chunks_exact(w * T::WORDS)
        .zip(out.chunks_exact_mut(w * T::WORDS))
    {
        for (k, v) in row[..w].iter_mut().enumerate() {
            *v = T::read(words, k);
        }
        normalize_row(&row[..w], signs, &mut res[..w], fma);
        for (k, &v) in res[..w].iter().enumerate() {
            T::write(dest, k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_matches_frexp() {
        for x in [
            1.0f32,
            0.5,
            0.75,
            3.0,
            1e-40,
            f32::MIN_POSITIVE,
            f32::MAX,
            1.4e-45,
        ] {
            let (f, e) = split(x);
            assert!((0.5..1.0).contains(&f), "{x}: {f}");
            assert_eq!(f64::from(f) * 2f64.powi(e), f64::from(x), "{x}");
            assert_eq!(split(-x), (-f, e), "{x}");
        }
        assert_eq!(split(0.0f32).1, -190);
        assert_eq!(split(f32::INFINITY).1, 129);
        assert_eq!(pow2::<f32>(-126), f32::MIN_POSITIVE);
        assert_eq!(pow2::<f32>(127), 2f32.powi(127));
    }

    #[test]
    fn float64_split_and_powers_of_two_are_exact() {
        for x in [1.0f64, 0.75, 3.0, 1e-310, f64::MIN_POSITIVE, f64::MAX, 5e-324] {
            let (f, e) = split(x);
            assert!((0.5..1.0).contains(&f), "{x}: {f}");
            // In two exact steps: 2^e alone may be subnormal or past the range.
            let back = if e > 0 {
                f * 2f64.powi(e - 1) * 2.0
            } else {
                f * 2f64.powi(e + 200) * 2f64.powi(-200)
            };
            assert_eq!(back, x, "{x}");
            assert_eq!(split(-x), (-f, e), "{x}");
        }
        assert_eq!(split(0.0f64).1, -1086);
        assert_eq!(split(f64::NAN).1, 1025);
        assert_eq!(pow2::<f64>(-1022), f64::MIN_POSITIVE);
        assert_eq!(pow2::<f64>(1023), 2f64.powi(1023));
        // A large null component beside tiny entering ones (Cl(2,0,1)) stays finite.
        let signs = [1i8, 1, 1, 1, 0, 0, 0, 0];
        let x = [1e-300f64, 1e-300, 1e-300, 1e-300, 2e300, 2.0, 2.0, 2.0];
        let mut out = [0.0f64; 8];
        normalize_row(&x, &signs, &mut out, FmaMode::Separate);
        assert!((out[0] - 0.5).abs() <= 1e-15, "{out:?}");
        assert_eq!(out[4], f64::INFINITY);
        assert!((out[5] / 1e300 - 1.0).abs() <= 1e-15, "{out:?}");
    }

    #[test]
    fn quotients_in_the_normal_range_are_those_of_the_scaled_row() {
        // (v 2^e) / s, rounded once, wherever v 2^e and the quotient are normal.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..200_000 {
            let v = f32::from_bits(((next() as u32) & 0xbfff_ffff) | 0x0080_0000);
            let e = (next() % 120) as i32 - 60;
            let s = 0.5 + (next() % 1_000_000) as f32 / 500_000.0;
            let want = (f64::from(v) * 2f64.powi(e)) as f32 / s;
            if want.is_normal() && (f64::from(v) * 2f64.powi(e)).abs() >= 1e-37 {
                let got = scaled_quotient(v, e, s);
                assert_eq!(got.to_bits(), want.to_bits(), "{v:e} 2^{e} / {s}");
            }
        }
    }

    #[test]
    fn a_large_null_component_beside_tiny_entering_ones_stays_finite() {
        // Cl(2,0,1): the blades of e1, e2 enter the norm, those with the null e3 (bit 2) do
        // not. Tiny entering parts make e = 126: 2 x 2^126 overflows, 2 / |x| does not.
        let signs = [1i8, 1, 1, 1, 0, 0, 0, 0];
        let x = [1e-38f32, 1e-38, 1e-38, 1e-38, 2.0, 2.0, 2.0, 2.0];
        let mut out = [0.0f32; 8];
        normalize_row(&x, &signs, &mut out, FmaMode::Separate);
        let norm = 2e-38f64;
        for (k, (&r, &v)) in out.iter().zip(&x).enumerate() {
            let want = f64::from(v) / norm;
            assert!(r.is_finite(), "blade {k}: {r}");
            assert!(
                (f64::from(r) - want).abs() <= 1e-6 * want,
                "blade {k}: {r} vs {want}"
            );
        }
        // A quotient past f32::MAX is inf, as IEEE division would give it.
        assert_eq!(scaled_quotient(f32::MAX, 100, 0.75), f32::INFINITY);
        assert_eq!(scaled_quotient(-f32::MAX, 400, 0.75), f32::NEG_INFINITY);
        // One far below the subnormals is ±0.
        assert_eq!(scaled_quotient(1e-45f32, -300, 0.75).to_bits(), 0);
        assert_eq!(
            scaled_quotient(-1e-45f32, -300, 0.75).to_bits(),
            (-0.0f32).to_bits()
        );
    }

    #[test]
    fn a_nan_anywhere_makes_the_row_nan_and_an_infinity_its_entry_nan() {
        // Cl(2,0,1): blades 4..8 are null. A NaN among zeros once left the row as it was
        // (the max over |x| dropped it), one in a null blade stood alone.
        let signs = [1i8, 1, 1, 1, 0, 0, 0, 0];
        let mut out = [1.0f32; 8];
        for (k, v) in [(3, f32::NAN), (6, -f32::NAN)] {
            for base in [0.0f32, 1.5] {
                let mut x = [base; 8];
                x[k] = v;
                normalize_row(&x, &signs, &mut out, FmaMode::Separate);
                assert!(
                    out.iter().all(|r| r.to_bits() == f32::QNAN.to_bits()),
                    "{x:?}: {out:?}"
                );
            }
        }
        let x = [
            -1.0f32,
            f32::INFINITY,
            0.0,
            -0.0,
            2.0,
            f32::NEG_INFINITY,
            3.0,
            4.0,
        ];
        normalize_row(&x, &signs, &mut out, FmaMode::Fused);
        let nan = f32::QNAN;
        let want = [-0.0f32, nan, 0.0, -0.0, 0.0, nan, 0.0, 0.0];
        for (k, (r, w)) in out.iter().zip(want).enumerate() {
            assert_eq!(r.to_bits(), w.to_bits(), "blade {k}: {out:?}");
        }
        assert!(non_finite_row(&[1.0, f32::MAX, f32::MIN_POSITIVE]).is_none());
    }

    #[test]
    fn subnormal_quotients_are_within_one_unit_of_the_grid() {
        for k in 0..2000u32 {
            let v = 1.0 + k as f32 / 2000.0;
            let s = 1.0 + (k * 7919 % 2000) as f32 / 2000.0;
            let got = scaled_quotient(v, -140, s);
            let exact = f64::from(v) * 2f64.powi(-140) / f64::from(s);
            assert!(
                (f64::from(got) - exact).abs() <= 2f64.powi(-149),
                "{v} / {s}"
            );
        }
    }
}
