//! The Cayley table of Cl(3,0) as the host's Cl(3,0) product kernels read it: which terms
//! of each output blade's chain enter with a minus sign.

/// Blades of Cl(3,0).
pub(super) const W: usize = 8;

/// Whether the term `a[i] * b[j]` enters blade `i ^ j` with a minus sign in Cl(3,0) (every
/// basis vector squares to +1, so only the reordering sign counts).
const fn negative(i: usize, j: usize) -> bool {
    let mut swaps = 0;
    let mut a = i >> 1;
    while a != 0 {
        swaps += (a & j).count_ones();
        a >>= 1;
    }
    swaps % 2 == 1
}

/// `NEG[k][i]`: the sign of the term `a[i] * b[i ^ k]` of output blade `k`.
pub(super) const NEG: [[bool; W]; W] = {
    let mut t = [[false; W]; W];
    let mut k = 0;
    while k < W {
        let mut i = 0;
        while i < W {
            t[k][i] = negative(i, i ^ k);
            i += 1;
        }
        k += 1;
    }
    t
};

