//! The host twin of `shaders/fisher_checks.wgsl`: per chunk of rows and run of its rows, the
//! first row that breaks a rule or that a float32 check cannot clear for certain. Only a
//! hint (the host's exact checks decide, on gathered rows, whenever a row is flagged), but
//! computed as the shader computes it, so a chunk flags the same rows on every device kind
//! whose float32 sum is IEEE's.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use crate::kernel::FmaMode;
use crate::kernel::HostImpl;

/// Runs of rows per chunk, each its own word of the partial (`SLICES` in the shader).
pub const CHECK_SLICES: usize = 16;

/// No row flagged in a run.
pub const NONE: u32 = u32::MAX;

/// What a row must satisfy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Finite, >= 0, summing to 1 within the categorical tolerance.
    Probabilities,
    /// Finite and > 0.
    Positive,
    /// Finite.
    Finite,
}

impl Rule {
    /// The rule's number in the shader.
    pub fn code(self) -> u32 {
        match self {
            Rule::Probabilities => 0,
            Rule::Positive => 1,
            Rule::Finite => 2,
        }
    }
}

/// The host twin of `fisher::flag_kernel`.
#[derive(Debug, Clone, Copy)]
pub struct FlagRows {
    /// Words per row.
    pub k: usize,
    /// The rule.
    pub rule: Rule,
    /// Whether the rows hold float64 values (two words each, the low one first).
    pub wide: bool,
}

/// The float64 magnitude of words `high` (sign cleared) and `low` as a float32 truncated
/// toward zero: 0 below float32's normal range, -1 above its range (the shader's
/// `wide_value`).
fn wide_value(high: u32, low: u32) -> f32 {
    let e = (high >> 20) as i32 - 896;
    if e >= 255 {
        return -1.0;
    }
    if e <= 0 {
        return 0.0;
    }
    f32::from_bits(((e as u32) << 23) | ((high & 0xf_ffff) << 3) | (low >> 29))
}

impl FlagRows {
    /// Whether `row` passes for certain (the shader's `clears`).
    fn clears(&self, row: &[f32]) -> bool {
        let mut sum = 0.0f32;
        let wide = usize::from(self.wide);
        for v in row.chunks_exact(1 + wide) {
            let bits = v[wide].to_bits();
            let magnitude = bits & 0x7fff_ffff;
            let (zero, value) = if self.wide {
                if magnitude >= 0x7ff0_0000 {
                    return false;
                }
                let low = v[0].to_bits();
                (magnitude == 0 && low == 0, wide_value(magnitude, low))
            } else if magnitude >= 0x7f80_0000 {
                return false;
            } else {
                (magnitude == 0, v[0])
            };
            match self.rule {
                Rule::Positive if bits >> 31 != 0 || zero => return false,
                Rule::Probabilities => {
                    if (bits >> 31 != 0 && !zero) || value < 0.0 {
                        return false;
                    }
                    sum += value;
                }
                _ => {}
            }
        }
        if self.rule != Rule::Probabilities {
            return true;
        }
        let scale = sum.max(1.0);
        let slack = self.k as f32 * scale * 1.192_092_9e-7
            + scale * 9.536_743e-7
            + wide as f32 * scale * 2.384_185_8e-7;
        (sum - 1.0).abs() <= 1e-3f32 - slack
    }
}

impl HostImpl for FlagRows {
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        let k = self.k.max(1);
        let rows = &inputs[0][range.start * k..range.end * k];
        let n = range.len();
        let (base, extra) = (n / CHECK_SLICES, n % CHECK_SLICES);
        output.par_iter_mut().enumerate().for_each(|(slice, out)| {
            let start = slice * base + slice.min(extra);
            let end = start + base + usize::from(slice < extra);
            let first = (start..end).find(|&r| !self.clears(&rows[r * k..(r + 1) * k]));
            *out = f32::from_bits(first.map_or(NONE, |r| r as u32));
        });
    }

    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(rule: Rule, k: usize, rows: &[f32]) -> Vec<u32> {
        let mut out = vec![0.0f32; CHECK_SLICES];
        FlagRows {
            k,
            rule,
            wide: false,
        }
        .run(&[rows], 0..rows.len() / k, &mut out);
        out.into_iter().map(f32::to_bits).collect()
    }

    #[test]
    fn each_rule_flags_the_rows_that_break_it() {
        // 16 rows of 2: one per run, so run r reports row r or nothing.
        let mut probs = vec![0.5f32; 32];
        probs[2] = 1.0; // row 1: 1 + -0 sums to 1, and -0 is >= 0: passes
        probs[3] = -0.0;
        probs[5] = f32::NAN; // row 2
        probs[8] = -1e-30; // row 4: negative
        probs[12] = 0.5004; // row 6: sum 1.0004, clear of the tolerance: passes
        probs[14] = 0.502; // row 7: sum 1.002
        let got = flags(Rule::Probabilities, 2, &probs);
        let want: Vec<u32> = (0..16)
            .map(|r| if [2, 4, 7].contains(&r) { r } else { NONE })
            .collect();
        assert_eq!(got, want);

        let mut var = vec![1.0f32; 16];
        var[3] = 0.0;
        var[5] = -2.0;
        var[9] = f32::INFINITY;
        var[11] = f32::from_bits(1); // subnormal: positive, passes
        let got = flags(Rule::Positive, 1, &var);
        assert_eq!(got[3], 3);
        assert_eq!(got[5], 5);
        assert_eq!(got[9], 9);
        assert_eq!(got.iter().filter(|&&v| v != NONE).count(), 3);

        let got = flags(Rule::Finite, 1, &var);
        assert_eq!(got.iter().filter(|&&v| v != NONE).count(), 1);
    }

    #[test]
    fn sums_near_the_tolerance_are_flagged_for_the_exact_check() {
        // 1 + 0.000999 is within 1e-3 but not by more than the slack of 1000 terms.
        let mut row = vec![0.0f32; 1000];
        row[0] = 1.000_999;
        assert_eq!(flags(Rule::Probabilities, 1000, &row)[0], 0);
        row[0] = 1.0;
        assert_eq!(flags(Rule::Probabilities, 1000, &row)[0], NONE);
    }

    fn wide_flags(rule: Rule, k: usize, rows: &[f64]) -> Vec<u32> {
        let mut out = vec![0.0f32; CHECK_SLICES];
        let words = crate::dtype::f64_words(rows);
        let flag = FlagRows {
            k: 2 * k,
            rule,
            wide: true,
        };
        flag.run(&[words], 0..rows.len() / k, &mut out);
        out.into_iter().map(f32::to_bits).collect()
    }

    #[test]
    fn float64_rows_are_judged_as_float64_values() {
        // 16 rows of 2 float64 values: run r reports row r or nothing.
        let mut probs = vec![0.5f64; 32];
        probs[2] = 1.0; // row 1: 1 + -0: passes
        probs[3] = -0.0;
        probs[5] = f64::NAN; // row 2
        probs[8] = -1e-300; // row 4: negative (below float32's range, still negative)
        probs[12] = 0.5004; // row 6: passes
        probs[14] = 0.502; // row 7: sum 1.002
        probs[18] = 1e300; // row 9: beyond float32's range
        probs[20] = 0.5 + 1e-12; // row 10: passes (a float64 difference below float32's)
        probs[22] = 1e-300; // row 11: 0.5 + tiny: 0.5 short of 1
        let got = wide_flags(Rule::Probabilities, 2, &probs);
        let want: Vec<u32> = (0..16)
            .map(|r| if [2, 4, 7, 9, 11].contains(&r) { r } else { NONE })
            .collect();
        assert_eq!(got, want);

        let mut var = vec![1.0f64; 16];
        var[3] = 0.0;
        var[4] = -0.0;
        var[5] = -2.0;
        var[9] = f64::INFINITY;
        var[11] = 1e-310; // subnormal: positive, passes
        var[12] = 1e300; // beyond float32's range: positive and finite, passes
        let got = wide_flags(Rule::Positive, 1, &var);
        let flagged: Vec<u32> = got.iter().copied().filter(|&v| v != NONE).collect();
        assert_eq!(flagged, vec![3, 4, 5, 9]);
        let got = wide_flags(Rule::Finite, 1, &var);
        assert_eq!(got.iter().filter(|&&v| v != NONE).count(), 1);
    }

    #[test]
    fn truncated_float64_values_bound_the_value_from_below() {
        // float32's normal range: truncated, within 2^-23 below; under it, 0 (1.17e-38 is).
        for v in [1.0f64, 0.1, 1.0 / 3.0, 1e-30, 3e38, 1.18e-38, 2.0f64.powi(-126)] {
            let bits = v.to_bits();
            let got = wide_value((bits >> 32) as u32, bits as u32);
            assert!(f64::from(got) <= v && f64::from(got) >= v * (1.0 - 2f64.powi(-23)), "{v:e}");
        }
        assert_eq!(wide_value((1.17e-38f64.to_bits() >> 32) as u32, 0), 0.0);
        assert_eq!(wide_value((1e-39f64.to_bits() >> 32) as u32, 0), 0.0);
        assert_eq!(wide_value((1e39f64.to_bits() >> 32) as u32, 0), -1.0);
    }
}
