//! The blades a sandwich by one rotor is restricted to (`sandwich(r, x, blades=...)`): rows
//! `x` hold only the coefficients of the named blades, column `j` being blade `blades[j]` in
//! the caller's order, and the result holds the same blades. Its map is the sub-matrix of the
//! rotor's map `M` (`ga::sandwich_map`) on those rows and columns, refused when `M` takes a
//! named blade out of the set (a non-zero, or NaN, entry `M[k][i]`, `i` named, `k` not).

use super::algebra::Algebra;
use crate::error::{Error, Result};
use crate::host::arith::Real;

/// Distinct blade indices of an algebra, in the caller's order (at most 64, as blades).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Blades {
    len: u8,
    order: [u8; 64],
}

impl Blades {
    /// `blades` checked against `algebra`: at least one, each in `0..algebra.blades()`, no
    /// two the same; the error names the argument and the offending entry.
    pub fn new(algebra: &Algebra, blades: &[i64]) -> Result<Blades> {
        let w = algebra.blades();
        if blades.is_empty() {
            return Err(Error::invalid(
                "blades",
                format!("expected at least one blade index in 0..{w} of {}, got none", algebra.label()),
            ));
        }
        let mut order = [0u8; 64];
        let mut seen = 0u64;
        for (j, &b) in blades.iter().enumerate() {
            let Some(index) = usize::try_from(b).ok().filter(|&b| b < w) else {
                return Err(Error::invalid(
                    "blades",
                    format!(
                        "expected blade indices in 0..{w} of {} (bitmask order), got {b} at \
                         position {j}",
                        algebra.label()
                    ),
                ));
            };
            if seen >> index & 1 == 1 {
                return Err(Error::invalid(
                    "blades",
                    format!("expected distinct blade indices, got {b} twice (position {j})"),
                ));
            }
            seen |= 1 << index;
            order[j] = index as u8;
        }
        Ok(Blades {
            len: blades.len() as u8,
            order,
        })
    }

    /// Every blade of `algebra` in bitmask order (the dense rows' layout).
    pub fn all(algebra: &Algebra) -> Blades {
        let w = algebra.blades();
        Blades {
            len: w as u8,
            order: std::array::from_fn(|i| if i < w { i as u8 } else { 0 }),
        }
    }

    /// How many blades (the rows' width in values).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there are none (never, for a checked set).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The blade of each column, in order.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.order[..self.len()].iter().map(|&b| usize::from(b))
    }

    /// The columns in increasing blade index: the order every chain of the map visits them,
    /// so a row's chain is the dense one without the steps of blades not named.
    pub fn ascending(&self) -> Vec<usize> {
        let mut columns: Vec<usize> = (0..self.len()).collect();
        columns.sort_by_key(|&j| self.order[j]);
        columns
    }

    /// The column holding blade `blade`, if it is named.
    pub fn column(&self, blade: usize) -> Option<usize> {
        self.indices().position(|b| b == blade)
    }

    /// For kernel ids: the blades joined by `_`.
    pub fn name(&self) -> String {
        self.indices().map(|b| b.to_string()).collect::<Vec<_>>().join("_")
    }

    /// The `k × k` sub-matrix (row-major, `S[j][l] = M[blades[j]][blades[l]]`) of `m`, the
    /// `w × w` map of values of `T` as words, or the error naming the first named blade
    /// (in column order) that `M` sends outside the set, and where.
    pub fn restrict<T: Real + std::fmt::Display>(&self, m: &[f32], w: usize) -> Result<Vec<f32>> {
        for (l, i) in self.indices().enumerate() {
            if let Some(k) = (0..w).find(|&k| self.column(k).is_none() && T::read(m, k * w + i).nonzero()) {
                return Err(Error::invalid(
                    "blades",
                    format!(
                        "expected blades that the rotor keeps x within, but it maps blade {i} \
                         (blades[{l}]) into blade {k}, which is not named (its map has entry \
                         {} there): name blade {k} too, or whole grades the rotor preserves",
                        T::read(m, k * w + i)
                    ),
                ));
            }
        }
        let k = self.len();
        let mut sub = vec![0.0f32; k * k * T::WORDS];
        for (j, row) in self.indices().enumerate() {
            for (l, col) in self.indices().enumerate() {
                T::write(&mut sub, j * k + l, T::read(m, row * w + col));
            }
        }
        Ok(sub)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blades_are_checked() {
        let pga = Algebra::new(3, 0, 1).unwrap();
        let text = |b: &[i64]| Blades::new(&pga, b).map_or_else(|e| e.to_string(), |b| b.name());
        assert_eq!(text(&[14, 7, 11]), "14_7_11");
        assert!(text(&[]).contains("at least one"));
        assert!(text(&[1, 16]).contains("got 16 at position 1"), "{}", text(&[1, 16]));
        assert!(text(&[-1]).contains("got -1 at position 0"));
        assert!(text(&[3, 5, 3]).contains("got 3 twice (position 2)"));
        assert_eq!(Blades::all(&pga).name(), (0..16).map(|i| i.to_string()).collect::<Vec<_>>().join("_"));
    }

    /// The sub-matrix keeps the caller's order; a leak names the blade it reaches.
    #[test]
    fn the_sub_matrix_is_the_named_rows_and_columns() {
        let w = 4;
        let mut m: Vec<f32> = (0..16).map(|v| v as f32 + 1.0).collect();
        // Blades 1 and 3 map only into each other.
        for (k, i) in [(0, 1), (2, 1), (0, 3), (2, 3)] {
            m[k * w + i] = if (k, i) == (0, 3) { -0.0 } else { 0.0 };
        }
        let alg = Algebra::new(2, 0, 0).unwrap();
        let b = Blades::new(&alg, &[3, 1]).unwrap();
        let sub = b.restrict::<f32>(&m, w).unwrap();
        assert_eq!(sub, vec![m[15], m[13], m[7], m[5]]);
        m[2 * w + 3] = f32::NAN;
        let error = b.restrict::<f32>(&m, w).unwrap_err().to_string();
        assert!(error.contains("maps blade 3 (blades[0]) into blade 2"), "{error}");
        let mut m64 = vec![0.0f32; 2 * 16];
        f64::write(&mut m64, 2 * w + 1, 1e-300);
        let error = b.restrict::<f64>(&m64, w).unwrap_err().to_string();
        assert!(error.contains("maps blade 1 (blades[1]) into blade 2"), "{error}");
    }
}
