//! `normalize` as `ga::codegen` generates it: scale the row by the power of two just above
//! its largest entering |x_k| (WGSL `frexp`/`ldexp`, exact), take ⟨y ỹ⟩₀ as the generated
//! sum of squares, then `y / sqrt(|n2|)`, keeping the row when it is zero or null.
//!
//! The generated `n2 = y0 * y0 + y1 * y1 - ...` is plain WGSL arithmetic, which a driver may
//! contract into fused multiply-adds (WGSL allows it). Mesa's CPU drivers evaluate it as
//! written, one rounding per product and per sum, left to right ([`FmaMode::Separate`]), and
//! round `sqrt` and the division correctly: the host matches them bit for bit (tested). A
//! hardware GPU's compiler may contract the sum in an order of its own, and its `sqrt` and
//! division are approximations (WGSL allows 2.5 ULP for division): with
//! [`FmaMode::Fused`] the host contracts the chain as `fma(±y_k, y_k, ... fma(y0, y0,
//! y1 * y1))`, a best guess, so `normalize` is not promised bit-identical to hardware GPUs.

use super::arith::FmaMode;

/// The exponent `frexp` gives: `x = f 2^e` with 0.5 ≤ |f| < 1; 0 for 0 (and for the
/// non-finite values WGSL leaves undefined).
pub fn frexp_exp(x: f32) -> i32 {
    let bits = x.to_bits() & 0x7fff_ffff;
    let biased = (bits >> 23) as i32;
    if bits == 0 || biased == 0xff {
        0
    } else if biased == 0 {
        -117 - bits.leading_zeros() as i32
    } else {
        biased - 126
    }
}

/// `x 2^e`, correctly rounded (exact unless the result is subnormal).
pub fn ldexp(x: f32, e: i32) -> f32 {
    (f64::from(x) * 2f64.powi(e)) as f32
}

/// The generated `n2`: Σ sign_k y_k² over the entering blades in ascending order, as
/// written (`Separate`) or contracted (`Fused`, see the module's doc).
#[inline]
pub fn norm2(y: &[f32], signs: &[i8], fma: FmaMode) -> f32 {
    let mut terms = signs
        .iter()
        .zip(y)
        .filter(|(&s, _)| s != 0)
        .map(|(&s, &v)| (if s < 0 { -v } else { v }, v));
    let Some((x0, y0)) = terms.next() else {
        return 0.0;
    };
    if fma == FmaMode::Separate {
        return terms.fold(x0 * y0, |acc, (x, v)| acc + x * v);
    }
    let Some((x1, y1)) = terms.next() else {
        return x0 * y0;
    };
    let mut acc = x0.mul_add(y0, x1 * y1);
    for (x, v) in terms {
        acc = x.mul_add(v, acc);
    }
    acc
}

/// One row of `normalize` into `out` (same length as `x`).
pub fn normalize_row(x: &[f32], signs: &[i8], out: &mut [f32], fma: FmaMode) {
    let mut mx = 0.0f32;
    for (&v, &s) in x.iter().zip(signs) {
        if s != 0 {
            mx = mx.max(v.abs());
        }
    }
    let e = -frexp_exp(mx);
    let e1 = e.min(64);
    let e2 = e - e1;
    let mut y = [0.0f32; 64];
    for (t, &v) in y.iter_mut().zip(x) {
        *t = ldexp(ldexp(v, e1), e2);
    }
    let n2 = norm2(&y[..x.len()], signs, fma);
    let s = n2.abs().sqrt();
    let keep = mx == 0.0 || s == 0.0;
    for ((r, &v), &t) in out.iter_mut().zip(x).zip(&y) {
        *r = if keep { v } else { t / s };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frexp_matches_its_definition() {
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
            let e = frexp_exp(x);
            let f = f64::from(x) / 2f64.powi(e);
            assert!((0.5..1.0).contains(&f), "{x}: {e} gives {f}");
        }
        assert_eq!(frexp_exp(0.0), 0);
    }

    #[test]
    fn scaling_is_exact_and_rounds_once_into_subnormals() {
        assert_eq!(ldexp(3.0, -2), 0.75);
        assert_eq!(ldexp(1.5, -149), f32::from_bits(2));
        assert_eq!(ldexp(f32::from_bits(1), 149), 1.0);
    }
}
