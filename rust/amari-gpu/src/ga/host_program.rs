//! The geometric-algebra kernels as data: for one (algebra, operation), the list of fused
//! multiply-add steps the WGSL generator (`ga::codegen`) writes as `fma` chains, taken from
//! the same term lists (`ga::operation`) in the same order. A product output starts with
//! `(±x) * y` and adds every further term with `fma(±x, y, acc)`, exactly like the
//! generated `var rK = ...; rK = fma(...);` lines; an output with no term is `0.0`.

use super::algebra::Algebra;
use super::operation::{linear_terms, norm_signs, product_terms, sandwich_terms, Operation, Term};

/// Where a stage reads a factor from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The first operand (`a`, or the rotor of a sandwich).
    A,
    /// The second operand.
    B,
    /// The temporaries written by the previous stage.
    T,
}

/// One term: `out[k] = (±x[i]) * y[j]` when `first`, else `fma(±x[i], y[j], out[k])`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Output blade.
    pub k: u8,
    /// Blade of the left factor.
    pub i: u8,
    /// Blade of the right factor.
    pub j: u8,
    /// Whether the left factor is negated (the generator writes `-x`).
    pub neg: bool,
    /// Whether this is the output's first term (a product, not a fused multiply-add).
    pub first: bool,
}

/// One chain of products: `dest[k]` from factors of `left` and `right`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Source of the left factors.
    pub left: Source,
    /// Source of the right factors.
    pub right: Source,
    /// Whether the stage writes the temporaries (else the result).
    pub to_temporaries: bool,
    /// Outputs of the stage.
    pub outputs: usize,
    /// Steps in the generated order (by output blade, then left blade).
    pub steps: Vec<Step>,
    /// Outputs with no term, which hold 0.0.
    pub zeros: Vec<u8>,
}

/// What one generated kernel computes per item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// Bilinear products, in one stage or two (the sandwich).
    Products(Vec<Stage>),
    /// `out[k] = ±x[i]` (or 0.0 where the map has no source blade).
    Linear(Vec<Option<(u8, bool)>>),
    /// `normalize`, with the signs of ⟨x x̃⟩₀ (0 where a blade does not enter).
    Normalize(Vec<i8>),
    /// The sandwich by one rotor: `x` times the map bound in the rotor's place
    /// (`ga::sandwich_map`).
    SandwichMap,
}

fn stage(terms: &[Term], outputs: usize, left: Source, right: Source, temps: bool) -> Stage {
    let mut steps = Vec::with_capacity(terms.len());
    let mut zeros = Vec::new();
    for k in 0..outputs {
        let mut first = true;
        for t in terms.iter().filter(|t| t.k == k) {
            steps.push(Step {
                k: k as u8,
                i: t.i as u8,
                j: t.j as u8,
                neg: t.sign < 0,
                first,
            });
            first = false;
        }
        if first {
            zeros.push(k as u8);
        }
    }
    Stage {
        left,
        right,
        to_temporaries: temps,
        outputs,
        steps,
        zeros,
    }
}

impl Program {
    /// The program of `op` in `algebra` (the operation must have passed
    /// [`Operation::check`]).
    pub fn new(algebra: &Algebra, op: Operation) -> Program {
        let blades = algebra.blades();
        match op {
            Operation::Geometric | Operation::Outer | Operation::Inner | Operation::Scalar => {
                let terms = product_terms(algebra, op);
                let outputs = op.output_words(algebra);
                Program::Products(vec![stage(&terms, outputs, Source::A, Source::B, false)])
            }
            Operation::Sandwich => {
                let (first, second) = sandwich_terms(algebra);
                Program::Products(vec![
                    stage(&first, blades, Source::A, Source::B, true),
                    stage(&second, blades, Source::T, Source::A, false),
                ])
            }
            Operation::Normalize => Program::Normalize(norm_signs(algebra)),
            _ => {
                let terms = linear_terms(algebra, op);
                Program::Linear(
                    (0..blades)
                        .map(|k| {
                            terms
                                .iter()
                                .find(|t| t.1 == k)
                                .map(|&(i, _, sign)| (i as u8, sign < 0))
                        })
                        .collect(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_terms_open_each_output_and_empty_outputs_are_zero() {
        let cl3 = Algebra::CL3;
        let Program::Products(stages) = Program::new(&cl3, Operation::Outer) else {
            panic!("outer is a product");
        };
        let s = &stages[0];
        assert_eq!(s.steps.len(), 27);
        for k in 0..8u8 {
            let firsts = s.steps.iter().filter(|t| t.k == k && t.first).count();
            assert_eq!(firsts, 1, "blade {k}");
        }
        assert!(s.zeros.is_empty());
        let pga = Algebra::new(3, 0, 1).unwrap();
        let Program::Linear(map) = Program::new(&pga, Operation::GradeProjection(0b100)) else {
            panic!("projection is linear");
        };
        assert_eq!(map.iter().filter(|m| m.is_some()).count(), 6);
    }
}
