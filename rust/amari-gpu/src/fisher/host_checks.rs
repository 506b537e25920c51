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
}

impl FlagRows {
    /// Whether `row` passes for certain (the shader's `clears`).
    fn clears(&self, row: &[f32]) -> bool {
        let mut sum = 0.0f32;
        for v in row {
            let bits = v.to_bits();
            let magnitude = bits & 0x7fff_ffff;
            if magnitude >= 0x7f80_0000 {
                return false;
            }
            match self.rule {
                Rule::Positive if bits >> 31 != 0 || magnitude == 0 => return false,
                Rule::Probabilities => {
                    if bits >> 31 != 0 && magnitude != 0 {
                        return false;
                    }
                    sum += *v;
                }
                _ => {}
            }
        }
        if self.rule != Rule::Probabilities {
            return true;
        }
        let scale = sum.max(1.0);
        let slack = self.k as f32 * scale * 1.192_092_9e-7 + scale * 9.536_743e-7;
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
        FlagRows { k, rule }.run(&[rows], 0..rows.len() / k, &mut out);
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
}
