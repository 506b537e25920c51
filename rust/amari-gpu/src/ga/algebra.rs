//! Clifford algebras Cl(p, q, r) and their multiplication tables. Blades are numbered by
//! bitmask: blade `i` is the product of the basis vectors of the set bits of `i`, in
//! ascending order (1, e1, e2, e12, e3, e13, e23, e123, ... ). The first `p` basis vectors
//! square to +1, the next `q` to −1 and the last `r` to 0.

use crate::error::{Error, Result};

/// A Clifford algebra Cl(p, q, r) with p + q + r between 1 and [`Algebra::MAX_DIMENSION`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Algebra {
    p: u32,
    q: u32,
    r: u32,
}

impl Algebra {
    /// Largest p + q + r: 2⁶ = 64 blades, whose fully unrolled products stay compilable.
    pub const MAX_DIMENSION: u32 = 6;

    /// Cl(3,0): the default algebra of the Python API.
    pub const CL3: Algebra = Algebra { p: 3, q: 0, r: 0 };

    /// Cl(p, q, r), or an invalid-argument error naming what is out of range.
    pub fn new(p: u32, q: u32, r: u32) -> Result<Self> {
        let n = u64::from(p) + u64::from(q) + u64::from(r);
        if n == 0 || n > u64::from(Self::MAX_DIMENSION) {
            return Err(Error::invalid(
                "p + q + r",
                format!(
                    "expected between 1 and {} basis vectors, got p={p}, q={q}, r={r}",
                    Self::MAX_DIMENSION
                ),
            ));
        }
        Ok(Algebra { p, q, r })
    }

    /// Basis vectors squaring to +1, −1 and 0.
    pub fn signature(&self) -> (u32, u32, u32) {
        (self.p, self.q, self.r)
    }

    /// Number of basis vectors, n = p + q + r.
    pub fn dimension(&self) -> u32 {
        self.p + self.q + self.r
    }

    /// Number of blades, 2ⁿ: the f32 words of one multivector.
    pub fn blades(&self) -> usize {
        1 << self.dimension()
    }

    /// Whether some basis vector squares to 0 (r > 0).
    pub fn is_degenerate(&self) -> bool {
        self.r > 0
    }

    /// "Cl(3,0,1)"-style label.
    pub fn label(&self) -> String {
        format!("Cl({},{},{})", self.p, self.q, self.r)
    }

    /// What basis vector `v` (0-based) squares to: 1, −1 or 0.
    pub fn square(&self, v: u32) -> i8 {
        if v < self.p {
            1
        } else if v < self.p + self.q {
            -1
        } else {
            0
        }
    }

    /// The pseudoscalar's blade index (every bit set).
    pub fn pseudoscalar(&self) -> usize {
        self.blades() - 1
    }

    /// Name of blade `i`: "1" for the scalar, else "e" and the 1-based vector indices.
    pub fn blade_name(&self, i: usize) -> String {
        if i == 0 {
            return "1".into();
        }
        let digits: String = (0..self.dimension())
            .filter(|v| i >> v & 1 == 1)
            .map(|v| char::from_digit(v + 1, 10).expect("at most 6 vectors"))
            .collect();
        format!("e{digits}")
    }

    /// Sign and blade of `e_i e_j`: `(sign, k)` with sign 0 when a common vector squares to 0.
    pub fn product(&self, i: usize, j: usize) -> (i8, usize) {
        let mut sign = reorder_sign(i, j);
        let common = i & j;
        for v in 0..self.dimension() {
            if common >> v & 1 == 1 {
                sign *= self.square(v);
            }
        }
        (sign, i ^ j)
    }

    /// Sign of the reverse on blade `i`: (−1)^(g(g−1)/2) for its grade g.
    pub fn reverse_sign(&self, i: usize) -> i8 {
        if grade(i) % 4 < 2 {
            1
        } else {
            -1
        }
    }

    /// Sign of the grade involution on blade `i`: (−1)^g.
    pub fn involution_sign(&self, i: usize) -> i8 {
        if grade(i).is_multiple_of(2) {
            1
        } else {
            -1
        }
    }
}

/// Grade of blade `i`: the number of basis vectors in it.
pub fn grade(i: usize) -> u32 {
    i.count_ones()
}

/// Sign of sorting the vectors of blade `a` followed by those of blade `b` into ascending
/// order: one swap per pair (x in a, y in b) with x > y.
pub fn reorder_sign(a: usize, b: usize) -> i8 {
    let mut swaps = 0;
    let mut a = a >> 1;
    while a != 0 {
        swaps += (a & b).count_ones();
        a >>= 1;
    }
    if swaps % 2 == 0 {
        1
    } else {
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_grades_follow_the_bitmask() {
        let cl3 = Algebra::CL3;
        let names: Vec<String> = (0..8).map(|i| cl3.blade_name(i)).collect();
        assert_eq!(names, ["1", "e1", "e2", "e12", "e3", "e13", "e23", "e123"]);
        assert_eq!(
            (0..8).map(grade).collect::<Vec<_>>(),
            [0, 1, 1, 2, 1, 2, 2, 3]
        );
    }

    #[test]
    fn signatures_decide_the_squares() {
        let sta = Algebra::new(1, 3, 0).unwrap();
        assert_eq!(
            (0..4).map(|v| sta.square(v)).collect::<Vec<_>>(),
            [1, -1, -1, -1]
        );
        let pga = Algebra::new(3, 0, 1).unwrap();
        assert_eq!(pga.product(8, 8), (0, 0));
        assert_eq!(pga.product(1, 8), (1, 9));
        assert_eq!(pga.product(8, 1), (-1, 9));
        assert_eq!(Algebra::CL3.product(7, 7), (-1, 0));
    }

    #[test]
    fn out_of_range_signatures_are_refused() {
        for (p, q, r) in [(0, 0, 0), (7, 0, 0), (3, 3, 1), (0, 0, 7)] {
            let err = Algebra::new(p, q, r).unwrap_err();
            assert!(err.to_string().starts_with("p + q + r"), "{err}");
        }
        assert!(Algebra::new(6, 0, 0).is_ok() && Algebra::new(0, 0, 1).is_ok());
    }
}
