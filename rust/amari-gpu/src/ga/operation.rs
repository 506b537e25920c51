//! The geometric-algebra operations and, for each, the terms it is made of in a given
//! algebra: products are bilinear (out_k += sign · a_i · b_j), the unary maps but `normalize`
//! send each blade to ± one blade. Zero terms (a factor squaring to 0, a grade that is
//! dropped) never appear, so the generated code never computes them.

use super::algebra::{grade, Algebra};
use super::blades::Blades;
use crate::dtype::Dtype;
use crate::error::{Error, Result};

/// One operation on multivectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Geometric product a b.
    Geometric,
    /// Outer (wedge) product a ∧ b.
    Outer,
    /// Left contraction a ⌋ b (the inner product).
    Inner,
    /// Scalar product ⟨a b⟩₀: one word per item.
    Scalar,
    /// Sandwich r x r̃ (rotor application).
    Sandwich,
    /// Sandwich by one rotor of rows holding only the named blades' coefficients (column `j`
    /// blade `j` of the set), into rows of the same blades (`ga::blades`).
    SandwichBlades(Blades),
    /// Reverse x̃.
    Reverse,
    /// Grade involution x̂.
    GradeInvolution,
    /// Sum of the grade-k parts of x for the set bits k of the mask.
    GradeProjection(u8),
    /// x / sqrt(|⟨x x̃⟩₀|), rows with ⟨x x̃⟩₀ = 0 unchanged.
    Normalize,
    /// x I⁻¹ in a non-degenerate algebra; the right complement in a degenerate one.
    Dual,
}

/// A product term: `out[k] += sign * a[i] * b[j]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// Blade of the left factor.
    pub i: usize,
    /// Blade of the right factor.
    pub j: usize,
    /// Blade of the result.
    pub k: usize,
    /// +1 or −1.
    pub sign: i8,
}

impl Operation {
    /// The operation named `name` (the Python method name); `grades` is the grade mask of
    /// a projection and must be 0 for every other operation.
    pub fn parse(name: &str, grades: u32) -> Result<Operation> {
        let op = match name {
            "geometric_product" => Operation::Geometric,
            "outer_product" => Operation::Outer,
            "inner_product" => Operation::Inner,
            "scalar_product" => Operation::Scalar,
            "sandwich" => Operation::Sandwich,
            "reverse" => Operation::Reverse,
            "grade_involution" => Operation::GradeInvolution,
            "grade_projection" => {
                let mask = u8::try_from(grades)
                    .map_err(|_| Error::invalid("k", format!("grade mask {grades:#b} too wide")))?;
                return Ok(Operation::GradeProjection(mask));
            }
            "normalize" => Operation::Normalize,
            "dual" => Operation::Dual,
            other => {
                return Err(Error::invalid(
                    "operation",
                    format!("unknown geometric-algebra operation {other:?}"),
                ))
            }
        };
        Ok(op)
    }

    /// Name used in kernel ids (the Python method name; projections carry their mask).
    pub fn name(&self) -> String {
        match self {
            Operation::Geometric => "geometric_product".into(),
            Operation::Outer => "outer_product".into(),
            Operation::Inner => "inner_product".into(),
            Operation::Scalar => "scalar_product".into(),
            Operation::Sandwich => "sandwich".into(),
            Operation::SandwichBlades(blades) => format!("sandwich_blades{}", blades.name()),
            Operation::Reverse => "reverse".into(),
            Operation::GradeInvolution => "grade_involution".into(),
            Operation::GradeProjection(mask) => format!("grade_projection{mask:07b}"),
            Operation::Normalize => "normalize".into(),
            Operation::Dual => "dual".into(),
        }
    }

    /// Names of the operands, as the Python API calls them.
    pub fn operands(&self) -> &'static [&'static str] {
        match self {
            Operation::Geometric | Operation::Outer | Operation::Inner | Operation::Scalar => {
                &["a", "b"]
            }
            Operation::Sandwich | Operation::SandwichBlades(_) => &["r", "x"],
            _ => &["x"],
        }
    }

    /// Words per item of the result.
    pub fn output_words(&self, algebra: &Algebra) -> usize {
        match self {
            Operation::Scalar => 1,
            Operation::SandwichBlades(blades) => blades.len(),
            _ => algebra.blades(),
        }
    }

    /// Values per row of operand `slot`: the algebra's blades, the named ones for the rows
    /// of a sandwich on blades.
    pub fn input_words(&self, slot: usize, algebra: &Algebra) -> usize {
        match (self, slot) {
            (Operation::SandwichBlades(blades), 1) => blades.len(),
            _ => algebra.blades(),
        }
    }

    /// The blades the rows hold: the named ones of a sandwich on blades, else all of them.
    pub fn blades(&self, algebra: &Algebra) -> Blades {
        match self {
            Operation::SandwichBlades(blades) => *blades,
            _ => Blades::all(algebra),
        }
    }

    /// Checks the operation against the algebra (a projection's grades must exist).
    pub fn check(&self, algebra: &Algebra) -> Result<()> {
        if let Operation::GradeProjection(mask) = *self {
            let n = algebra.dimension();
            if mask == 0 || u32::from(mask) >> (n + 1) != 0 {
                return Err(Error::invalid(
                    "k",
                    format!(
                        "expected grades in 0..={n} of {}, got mask {mask:#b}",
                        algebra.label()
                    ),
                ));
            }
        }
        if let Operation::SandwichBlades(blades) = self {
            if let Some(b) = blades.indices().find(|&b| b >= algebra.blades()) {
                return Err(Error::invalid(
                    "blades",
                    format!("expected blade indices in 0..{} of {}, got {b}", algebra.blades(), algebra.label()),
                ));
            }
        }
        Ok(())
    }

    /// Whether the family has a kernel of this operation in `dtype`: every operation in
    /// float32 and float64; in float16 (storage, float32 arithmetic, one rounding per result)
    /// all but the scalar product (every algebra has 2 to 64 blades, an even count, so its
    /// rows pack whole into words). An error naming `dtype` otherwise.
    pub fn check_dtype(&self, dtype: Dtype) -> Result<()> {
        match (self, dtype) {
            (_, Dtype::F32 | Dtype::F64) => Ok(()),
            // One value per row cannot be packed two to a word row by row.
            (Operation::SandwichBlades(blades), Dtype::F16) if blades.len() % 2 == 1 => {
                Err(Error::invalid(
                    "blades",
                    format!(
                        "expected an even number of blades in float16: float16 packs two \
                         values to a 4-byte word, so rows of {} values would split words; \
                         compute in float32 (dtype=np.float32) or name one more blade",
                        blades.len()
                    ),
                ))
            }
            (Operation::Scalar, Dtype::F16) => Err(Error::invalid(
                "dtype",
                "scalar_product computes in float32 and float64: its result has one value per \
                 row and float16 packs two values to a 4-byte word, so a chunk's rows would \
                 split words; got float16",
            )),
            (_, Dtype::F16) => Ok(()),
        }
    }
}

/// The non-zero terms of a product operation, ordered by result blade, then left blade:
/// the order the generated code sums them in.
pub fn product_terms(algebra: &Algebra, op: Operation) -> Vec<Term> {
    let blades = algebra.blades();
    let mut terms = Vec::new();
    for k in 0..blades {
        for i in 0..blades {
            let j = i ^ k;
            let keep = match op {
                Operation::Geometric => true,
                Operation::Outer => i & j == 0,
                Operation::Inner => i & !j == 0,
                Operation::Scalar => k == 0,
                _ => unreachable!("{op:?} is not a product"),
            };
            let (sign, _) = algebra.product(i, j);
            if keep && sign != 0 {
                terms.push(Term { i, j, k, sign });
            }
        }
    }
    terms
}

/// The two stages of the sandwich r x r̃: t = r x, then t r̃ with the reverse's signs
/// folded into the second stage's terms (so r is read once, never reversed in memory).
pub fn sandwich_terms(algebra: &Algebra) -> (Vec<Term>, Vec<Term>) {
    let first = product_terms(algebra, Operation::Geometric);
    let second = first
        .iter()
        .map(|t| Term {
            sign: t.sign * algebra.reverse_sign(t.j),
            ..*t
        })
        .collect();
    (first, second)
}

/// For the signed-permutation maps: `out[k] = sign * x[i]` as `(i, k, sign)`; blades that
/// are absent from the result are absent from the list.
pub fn linear_terms(algebra: &Algebra, op: Operation) -> Vec<(usize, usize, i8)> {
    let full = algebra.pseudoscalar();
    (0..algebra.blades())
        .filter_map(|i| match op {
            Operation::Reverse => Some((i, i, algebra.reverse_sign(i))),
            Operation::GradeInvolution => Some((i, i, algebra.involution_sign(i))),
            Operation::GradeProjection(mask) => (mask >> grade(i) & 1 == 1).then_some((i, i, 1)),
            Operation::Dual if algebra.is_degenerate() => {
                // Right complement: e_i ∧ dual(e_i) = I, which needs no metric.
                Some((i, i ^ full, algebra.product(i, i ^ full).0))
            }
            Operation::Dual => {
                // e_i I⁻¹ with I⁻¹ = I / (I I) = (I I) I, as I I = ±1.
                let (ii, _) = algebra.product(full, full);
                let (sign, k) = algebra.product(i, full);
                Some((i, k, sign * ii))
            }
            _ => unreachable!("{op:?} is not a signed permutation"),
        })
        .collect()
}

/// The signs of ⟨x x̃⟩₀ = Σ_i s_i x_i²; 0 where blade i squares to 0.
pub fn norm_signs(algebra: &Algebra) -> Vec<i8> {
    (0..algebra.blades())
        .map(|i| algebra.product(i, i).0 * algebra.reverse_sign(i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_counts_drop_zero_terms() {
        let cl3 = Algebra::CL3;
        assert_eq!(product_terms(&cl3, Operation::Geometric).len(), 64);
        assert_eq!(product_terms(&cl3, Operation::Outer).len(), 27);
        assert_eq!(product_terms(&cl3, Operation::Inner).len(), 27);
        assert_eq!(product_terms(&cl3, Operation::Scalar).len(), 8);
        // PGA: the 8 x 8 pairs of blades that both hold e4 (which squares to 0) vanish.
        let pga = Algebra::new(3, 0, 1).unwrap();
        assert_eq!(product_terms(&pga, Operation::Geometric).len(), 256 - 64);
    }

    #[test]
    fn duals_map_the_pseudoscalar_to_a_scalar() {
        let cl3 = Algebra::CL3;
        // e123 I⁻¹ = 1; 1 I⁻¹ = −e123.
        let dual = linear_terms(&cl3, Operation::Dual);
        assert!(dual.contains(&(7, 0, 1)) && dual.contains(&(0, 7, -1)));
        let pga = Algebra::new(3, 0, 1).unwrap();
        for (i, k, sign) in linear_terms(&pga, Operation::Dual) {
            let (wedge, full) = pga.product(i, k);
            assert_eq!((wedge * sign, full), (1, 15), "e_{i} ∧ dual(e_{i}) = I");
        }
    }

    #[test]
    fn euclidean_norms_are_sums_of_squares() {
        assert!(norm_signs(&Algebra::new(6, 0, 0).unwrap())
            .iter()
            .all(|&s| s == 1));
        let sta = Algebra::new(1, 3, 0).unwrap();
        assert_eq!(norm_signs(&sta)[..4], [1, 1, -1, -1]);
    }
}
