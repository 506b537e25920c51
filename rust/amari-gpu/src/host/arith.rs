//! `fma` as the devices a host kernel must agree with evaluate it ([`madd`], by
//! `kernel::FmaMode`): WGSL does not require `fma(a, b, c)` to be fused, so the host kernels
//! take the mode of the devices they run beside.

/// `fma(x, y, acc)` as a device of mode `FUSED` computes it.
#[inline(always)]
pub fn madd<const FUSED: bool>(x: f32, y: f32, acc: f32) -> f32 {
    <f32 as Real>::madd::<FUSED>(x, y, acc)
}

/// A float type host kernels compute in, read from and written to the engine's 4-byte
/// words (see `crate::dtype`): one kernel body, written once over `T: Real`, serves every
/// dtype, float32 reading its words as it always did.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialEq
    + std::ops::Neg<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Add<Output = Self>
    + 'static
{
    /// +0.0.
    const ZERO: Self;
    /// −0.0.
    const NEG_ZERO: Self;
    /// Words per value.
    const WORDS: usize;
    /// `fma(x, y, acc)` as a device of mode `FUSED` computes it: one rounding (IEEE
    /// fusedMultiplyAdd) or two.
    fn madd<const FUSED: bool>(x: Self, y: Self, acc: Self) -> Self;
    /// Value `index` of `words`.
    fn read(words: &[f32], index: usize) -> Self;
    /// Writes value `index` of `words`.
    fn write(words: &mut [f32], index: usize, value: Self);
    /// Whether the value is neither +0.0 nor −0.0 (NaN included), from its bits.
    fn nonzero(self) -> bool;
}

/// `Real` for a float type of `$words` words per value, read and written by `$read` and
/// `$write`; the arithmetic is the type's own.
macro_rules! real {
    ($t:ty, $words:literal, $read:expr, $write:expr) => {
        impl Real for $t {
            const ZERO: $t = 0.0;
            const NEG_ZERO: $t = -0.0;
            const WORDS: usize = $words;
            #[inline(always)]
            fn madd<const FUSED: bool>(x: $t, y: $t, acc: $t) -> $t {
                if FUSED {
                    x.mul_add(y, acc)
                } else {
                    x * y + acc
                }
            }
            #[inline(always)]
            fn read(words: &[f32], index: usize) -> $t {
                $read(words, index)
            }
            #[inline(always)]
            fn write(words: &mut [f32], index: usize, value: $t) {
                $write(words, index, value)
            }
            #[inline(always)]
            fn nonzero(self) -> bool {
                self.to_bits() << 1 != 0
            }
        }
    };
}

real!(
    f32,
    1,
    |words: &[f32], index: usize| words[index],
    |words: &mut [f32], index: usize, value: f32| words[index] = value
);
real!(f64, 2, crate::dtype::read_f64, crate::dtype::write_f64);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::FmaMode;

    #[test]
    fn the_probe_tells_the_modes_apart() {
        let [a, b, c] = FmaMode::PROBE;
        assert_eq!(
            FmaMode::from_probe(madd::<true>(a, b, c)),
            Some(FmaMode::Fused)
        );
        assert_eq!(
            FmaMode::from_probe(madd::<false>(a, b, c)),
            Some(FmaMode::Separate)
        );
        let [a, b, c] = FmaMode::PROBE_F64;
        assert_eq!(
            FmaMode::from_probe_f64(f64::madd::<true>(a, b, c), f64::EPSILON),
            Some(FmaMode::Fused)
        );
        assert_eq!(
            FmaMode::from_probe_f64(f64::madd::<false>(a, b, c), f64::EPSILON),
            Some(FmaMode::Separate)
        );
        assert_eq!(FmaMode::from_probe_f64(0.5, f64::EPSILON), None);
    }
}
