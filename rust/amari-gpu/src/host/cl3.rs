//! The host twin of the static Cl(3,0) product of `shaders/geometric_cl3.wgsl`. The shader
//! writes each output blade as one expression, `a[0]*b[k] ± a[1]*b[1^k] ± … ± a[7]*b[7^k]`
//! (i in order, the Cayley table's sign as `+` or `-`), with no `fma`: every product is
//! rounded, then the sums left to right. That is what runs here, on [`LANES`] items at once
//! (the items of a block transposed into blade-major registers), so the host and Mesa's
//! lavapipe/llvmpipe agree bit for bit. A driver that contracts `x*y + z` into one fused
//! operation (SPIR-V lets it, and hardware GPUs may) rounds differently; that is a property
//! of the shader on that driver, which the host cannot know, and docs/host.md says so.

use rayon::prelude::*;

use super::simd::{dispatch, Task};

/// Items computed together (one AVX2 vector per blade; AVX-512 runs two halves).
const LANES: usize = 8;
/// Items per rayon task: 64 KiB of operands and output, a few L2-sized pieces per thread.
const GRAIN: usize = 2048;
/// Blades of Cl(3,0).
const W: usize = 8;

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
const NEG: [[bool; W]; W] = {
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

/// The Cl(3,0) geometric product of the static shader on the host.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cl3Product;

impl Cl3Product {
    /// Runs items `range` (inputs: `a` and `b`, 8 words per item) into `output`.
    pub fn run(&self, inputs: &[&[f32]], range: std::ops::Range<usize>, output: &mut [f32]) {
        assert_eq!(output.len(), range.len() * W, "output of the chunk's items");
        let a = &inputs[0][range.start * W..range.end * W];
        let b = &inputs[1][range.start * W..range.end * W];
        output
            .par_chunks_mut(GRAIN * W)
            .zip(a.par_chunks(GRAIN * W))
            .zip(b.par_chunks(GRAIN * W))
            .for_each(|((out, a), b)| dispatch(Block { a, b, out }));
    }
}

/// One rayon task's items.
struct Block<'a> {
    a: &'a [f32],
    b: &'a [f32],
    out: &'a mut [f32],
}

/// Items of `x` (up to [`LANES`]) transposed to blade-major lanes.
#[inline(always)]
fn load(x: &[f32]) -> [[f32; LANES]; W] {
    let mut t = [[0.0; LANES]; W];
    for (l, item) in x.chunks_exact(W).enumerate() {
        for k in 0..W {
            t[k][l] = item[k];
        }
    }
    t
}

/// Output blade `k` on every lane: the shader's expression, products rounded, sums in order.
#[inline(always)]
fn blade(k: usize, a: &[[f32; LANES]; W], b: &[[f32; LANES]; W]) -> [f32; LANES] {
    let mut acc = [0.0f32; LANES];
    for l in 0..LANES {
        acc[l] = a[0][l] * b[k][l];
    }
    for i in 1..W {
        let (x, y) = (&a[i], &b[i ^ k]);
        if NEG[k][i] {
            for l in 0..LANES {
                acc[l] -= x[l] * y[l];
            }
        } else {
            for l in 0..LANES {
                acc[l] += x[l] * y[l];
            }
        }
    }
    acc
}

impl Task for Block<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let Block { a, b, out } = self;
        for ((out, a), b) in out
            .chunks_mut(LANES * W)
            .zip(a.chunks(LANES * W))
            .zip(b.chunks(LANES * W))
        {
            let (ta, tb) = (load(a), load(b));
            let r: [[f32; LANES]; W] = std::array::from_fn(|k| blade(k, &ta, &tb));
            for (l, item) in out.chunks_exact_mut(W).enumerate() {
                for k in 0..W {
                    item[k] = r[k][l];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expression of the shader, written out for one item (blade 0 and 3 as in
    /// `geometric_cl3.wgsl`).
    #[test]
    fn signs_match_the_shader_text() {
        // r0 = a0.x*b0.x + a0.y*b0.y + a0.z*b0.z - a0.w*b0.w + a1.x*b1.x - a1.y*b1.y
        //      - a1.z*b1.z - a1.w*b1.w
        let r0 = [false, false, false, true, false, true, true, true];
        // r3 = a0.x*b0.w + a0.y*b0.z - a0.z*b0.y + a0.w*b0.x + a1.x*b1.w - a1.y*b1.z
        //      + a1.z*b1.y + a1.w*b1.x
        let r3 = [false, false, true, false, false, true, false, false];
        assert_eq!(NEG[0], r0);
        assert_eq!(NEG[3], r3);
    }

    #[test]
    fn odd_counts_match_one_item_at_a_time() {
        let n = 2 * GRAIN + 13;
        let a: Vec<f32> = (0..n * W).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..n * W).map(|i| (i as f32 * 0.91).cos()).collect();
        let mut out = vec![0.0; (n - 5) * W];
        Cl3Product.run(&[&a, &b], 5..n, &mut out);
        for item in 5..n {
            let (x, y) = (&a[item * W..][..W], &b[item * W..][..W]);
            for k in 0..W {
                let mut acc = x[0] * y[k];
                for i in 1..W {
                    let p = x[i] * y[i ^ k];
                    acc = if NEG[k][i] { acc - p } else { acc + p };
                }
                assert_eq!(out[(item - 5) * W + k].to_bits(), acc.to_bits());
            }
        }
    }
}
