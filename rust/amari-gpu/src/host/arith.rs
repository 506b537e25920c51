//! How the devices a host kernel must agree with evaluate WGSL's `fma`. WGSL does not
//! require `fma(a, b, c)` to be fused: its accuracy is that of `a * b + c`. Hardware GPUs
//! compile it to their fused multiply-add (one rounding); Mesa's CPU drivers (lavapipe and
//! llvmpipe, measured with LLVM 15 on an AVX2+FMA machine) evaluate a product and a sum (two
//! roundings). So the host kernels take the mode of the devices they run beside, and a
//! device's mode is measured, not assumed (see [`FmaMode::from_probe`]).

/// How `fma(a, b, c)` rounds on the devices the host must reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FmaMode {
    /// One rounding: IEEE fusedMultiplyAdd (hardware GPUs; `f32::mul_add`).
    #[default]
    Fused,
    /// Two roundings, `RN(RN(a * b) + c)` (Mesa lavapipe and llvmpipe).
    Separate,
}

impl FmaMode {
    /// The operands of a probe: `fma(PROBE[0], PROBE[1], PROBE[2])` is −2⁻⁴⁶ when fused and
    /// 0 when rounded twice.
    pub const PROBE: [f32; 3] = [1.0 + f32::EPSILON, 1.0 - f32::EPSILON, -1.0];

    /// The mode a device's result of the probe reveals, or `None` for neither value.
    pub fn from_probe(result: f32) -> Option<FmaMode> {
        if result == -(f32::EPSILON * f32::EPSILON) {
            Some(FmaMode::Fused)
        } else if result == 0.0 {
            Some(FmaMode::Separate)
        } else {
            None
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            FmaMode::Fused => "fused",
            FmaMode::Separate => "separate",
        }
    }
}

/// `fma(x, y, acc)` as a device of mode `FUSED` computes it.
#[inline(always)]
pub fn madd<const FUSED: bool>(x: f32, y: f32, acc: f32) -> f32 {
    if FUSED {
        x.mul_add(y, acc)
    } else {
        x * y + acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
