//! Exact power-of-two scaling of the empirical Fisher matrix's inputs, so that float32
//! products neither underflow (scores or weights near or below 1e-38 lose bits, or vanish)
//! nor overflow.
//!
//! `F = sum_i w_i g_i g_i^T / sum_i w_i` is bilinear in the columns of the scores and
//! homogeneous in the weights: scaling column j by 2^a_j and every weight by 2^b scales
//! F_jk by 2^(a_j + a_k) and leaves the weighted mean unchanged, and in binary floating point
//! such a scaling commutes with every rounding as long as no value leaves the normal range.
//! The exponents are chosen once on the host from the whole input (the largest |score| of each
//! column, the largest weight), before any chunk is cut, so every device and the host kernel
//! see the same scaled data and results stay bit-identical whatever the devices. They are 0 —
//! the data is used as given, bit for bit as before — unless a column's or the weights' range
//! is out of the safe window; the scaled path unscales in float64, which is exact.

/// Scores and weights whose largest magnitude lies in `[2^-LIMIT, 2^LIMIT]` are used as
/// given: every weighted product of two such values then lies in [2^-120, 2^120], far from
/// float32's subnormals (below 2^-126) and, summed over up to 2^7 rows, from its overflow.
const LIMIT: i32 = 40;

/// Largest exponent of a power of two with `2^e <= v`, for finite `v > 0` (subnormals too).
fn exponent(v: f32) -> i32 {
    let v = f64::from(v);
    // f64 holds every float32 (subnormals included) as a normal number: its exponent field
    // is exact.
    ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// 2^e as f64 (exact for |e| <= 1022).
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// The exponent that brings `max` (the largest magnitude of a set of values, >= 0) into
/// [1, 2), or 0 when `max` is zero or already within the safe window up to `hi`.
fn needed(max: f32, hi: i32) -> i32 {
    if max == 0.0 {
        return 0;
    }
    let e = exponent(max);
    if (-LIMIT..=hi).contains(&e) {
        0
    } else {
        -e
    }
}

/// How a call's scores and weights are scaled: 2^column[j] per column, 2^weights for every
/// weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scaling {
    pub columns: Vec<i32>,
    pub weights: i32,
}

impl Scaling {
    /// Chooses the exponents for row-major (N, `p`) `scores` and optional `weights`, all
    /// finite (weights >= 0).
    #[cfg(test)]
    pub fn choose(scores: &[f32], p: usize, weights: Option<&[f32]>) -> Scaling {
        let n = scores.len() / p.max(1);
        let maxima: Vec<f32> = super::scan::column_maxima(scores, p)
            .into_iter()
            .map(f32::from_bits)
            .collect();
        Scaling::from_maxima(&maxima, n, weights)
    }

    /// Chooses the exponents from the largest |score| of every column of `n` rows (finite)
    /// and the optional weights: what [`Scaling::choose`] computes from the scores
    /// themselves, for scores whose maxima were found where they live.
    pub fn from_maxima(col_max: &[f32], n: usize, weights: Option<&[f32]>) -> Scaling {
        let w_max = weights.map_or(1.0, |w| w.iter().fold(0.0f32, |m, &v| m.max(v)));
        let weights = needed(w_max, LIMIT);
        // With the weights in [2^-40, 2^41) and columns below 2^hi, one chunk's float32 sum of
        // N products stays below 2^(41 + 2 hi + 2 + log2 N) <= 2^126.
        let w_top = if weights == 0 {
            exponent(w_max.max(1.0)) + 1
        } else {
            1
        };
        let rows = usize::BITS as i32 - n.max(1).leading_zeros() as i32;
        let hi = ((126 - w_top - rows - 2) / 2).min(LIMIT);
        Scaling {
            columns: col_max.iter().map(|&m| needed(m, hi)).collect(),
            weights,
        }
    }

    /// Whether the data is used as given.
    pub fn is_identity(&self) -> bool {
        self.weights == 0 && self.columns.iter().all(|&a| a == 0)
    }

    /// The scaled scores (exact: every scaled value is representable, or so small beside its
    /// column's largest that the float32 product would lose it anyway).
    pub fn scores(&self, scores: &[f32], p: usize) -> Vec<f32> {
        let factors: Vec<f64> = self.columns.iter().map(|&a| pow2(a)).collect();
        let mut out = scores.to_vec();
        for row in out.chunks_exact_mut(p) {
            for (v, &f) in row.iter_mut().zip(&factors) {
                *v = (f64::from(*v) * f) as f32;
            }
        }
        out
    }

    /// The scaled weights.
    pub fn weights(&self, weights: &[f32]) -> Vec<f32> {
        let f = pow2(self.weights);
        weights.iter().map(|&v| (f64::from(v) * f) as f32).collect()
    }

    /// Undoes the column scaling of a row-major `p` x `p` float64 matrix in place (exact:
    /// float64 holds the products of any three float32 values in its normal range).
    pub fn unscale(&self, matrix: &mut [f64], p: usize) {
        for (i, row) in matrix.chunks_exact_mut(p).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v *= pow2(-(self.columns[i] + self.columns[j]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_are_exact_for_normals_and_subnormals() {
        assert_eq!(exponent(1.0), 0);
        assert_eq!(exponent(1.5), 0);
        assert_eq!(exponent(0.5), -1);
        assert_eq!(exponent(f32::MAX), 127);
        assert_eq!(exponent(f32::MIN_POSITIVE), -126);
        assert_eq!(exponent(f32::from_bits(1)), -149);
        assert_eq!(pow2(-149) as f32, f32::from_bits(1));
    }

    #[test]
    fn ordinary_data_is_used_as_given() {
        let scores = [1.0f32, -3.0, 1e-6, 2e5, 0.0, 7.0];
        let s = Scaling::choose(&scores, 3, Some(&[0.5, 2.0]));
        assert!(s.is_identity(), "{s:?}");
        assert!(Scaling::choose(&[0.0; 6], 3, None).is_identity());
    }

    #[test]
    fn tiny_and_huge_columns_and_weights_are_brought_near_one() {
        let scores = [1e-25f32, 1.0, 3e30, 2e-25, 2.0, 1e30];
        let s = Scaling::choose(&scores, 3, Some(&[1e-45, 1e-45]));
        assert_eq!(s.weights, 149);
        assert_eq!(s.columns[1], 0);
        let scaled = s.scores(&scores, 3);
        for j in [0, 2] {
            let m = scaled[j].abs().max(scaled[3 + j].abs());
            assert!((1.0..2.0).contains(&m), "column {j}: {m}");
        }
        assert_eq!(s.weights(&[1e-45]), vec![1.0]);
        // Unscaling undoes exactly 2^(a_i + a_j).
        let mut m = vec![1.0f64; 9];
        s.unscale(&mut m, 3);
        assert_eq!(m[0], pow2(-2 * s.columns[0]));
        assert_eq!(m[2], pow2(-(s.columns[0] + s.columns[2])));
    }
}
