//! Reproducible sample data for tests, benchmarks and examples: the same seed gives the same
//! floats on every machine, so a failure or a figure can be reproduced exactly.

/// The endless SplitMix64 stream seeded with `seed`: the words behind [`uniform_f32`], for
/// samplers that map them to values of their own.
pub fn splitmix64(seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed;
    std::iter::repeat_with(move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// `n` pseudo-random floats in [-1, 1) from SplitMix64 seeded with `seed`.
pub fn uniform_f32(n: usize, seed: u64) -> Vec<f32> {
    splitmix64(seed)
        .take(n)
        .map(|z| ((z >> 40) as f32 / (1u64 << 23) as f32) - 1.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::uniform_f32;

    #[test]
    fn reproducible_and_in_range() {
        let a = uniform_f32(10_000, 7);
        assert_eq!(a, uniform_f32(10_000, 7));
        assert_ne!(a, uniform_f32(10_000, 8));
        assert!(a.iter().all(|x| (-1.0..1.0).contains(x)));
    }
}
