//! `fma` as the devices a host kernel must agree with evaluate it ([`madd`], by
//! `kernel::FmaMode`): WGSL does not require `fma(a, b, c)` to be fused, so the host kernels
//! take the mode of the devices they run beside.

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
    }
}
