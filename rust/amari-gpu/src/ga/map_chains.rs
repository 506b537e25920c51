//! The chains of the sandwich map (`ga::sandwich_map`) on the host, in any dtype the family
//! computes in (`T: Real`): each output blade `k` the chain `acc = fma(M[k][i], x_i, acc)` over
//! the non-zero `M[k][i]` in increasing blade index `i`, from −0.0 (+0.0 where there is none),
//! on [`LANES`] rows at once. The float32 map's AVX-512 and AVX2 kernels (`ga::map_groups`,
//! rows of 1 to 16 blades) compute the same chains their own way.

use rayon::prelude::*;

use crate::host::arith::Real;
use crate::host::simd::{dispatch_at, Level, Task};

/// Items computed together, one per SIMD lane (two AVX2 vectors, one AVX-512 vector).
const LANES: usize = 16;
/// Items per rayon task (the float32 AVX-512 path's too).
pub(super) const GRAIN: usize = 2048;

/// The non-zero entries of `m` (NaN included, −0.0 not) as `(i, M[k][i])` per output blade
/// `k`, and where each blade's run starts.
pub(super) struct Chains<T> {
    terms: Vec<(usize, T)>,
    starts: Vec<usize>,
}

/// The chains of `m`, `w × w` values of `T` as words, each visiting the columns in `order`
/// (increasing blade index: the columns in order for rows of every blade, see `ga::blades`).
pub(super) fn chains<T: Real>(m: &[f32], w: usize, order: &[usize]) -> Chains<T> {
    let mut terms = Vec::new();
    let mut starts = Vec::with_capacity(w + 1);
    for k in 0..w {
        starts.push(terms.len());
        terms.extend(
            order
                .iter()
                .map(|&i| (i, T::read(m, k * w + i)))
                .filter(|&(_, v)| v.nonzero()),
        );
    }
    starts.push(terms.len());
    Chains { terms, starts }
}

/// `out[n] = M x[n]` by `chains` for rows of `w` values of `T` (as words, 1 to 64 values), on
/// the current rayon pool at `level`.
pub(super) fn run_chains<T: Real>(
    chains: &Chains<T>,
    x: &[f32],
    out: &mut [f32],
    (w, fused): (usize, bool),
    level: Level,
) {
    let row = w * T::WORDS;
    out.par_chunks_mut(GRAIN * row)
        .zip(x.par_chunks(GRAIN * row))
        .for_each(|(out, x)| {
            // Registers for the next power of two of blades; rows of `w` values.
            macro_rules! blades {
                ($($n:literal)*) => {
                    match (w.next_power_of_two(), fused) {
                        $(
                            ($n, true) => dispatch_at(level, Apply::<T, $n, true> { chains, x, out, w }),
                            ($n, false) => dispatch_at(level, Apply::<T, $n, false> { chains, x, out, w }),
                        )*
                        _ => unreachable!("1 to 64 blades"),
                    }
                };
            }
            blades!(1 2 4 8 16 32 64)
        });
}

struct Apply<'a, T, const W: usize, const F: bool> {
    chains: &'a Chains<T>,
    x: &'a [f32],
    out: &'a mut [f32],
    /// Values per row (at most `W`).
    w: usize,
}

impl<T: Real, const W: usize, const F: bool> Task for Apply<'_, T, W, F> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let Apply { chains, x, out, w } = self;
        let row = w * T::WORDS;
        let mut sx = [[T::ZERO; LANES]; W];
        let mut sr = [[T::ZERO; LANES]; W];
        for (x, out) in x.chunks(LANES * row).zip(out.chunks_mut(LANES * row)) {
            // Blade-major lanes: every fma below runs on LANES items at once. The lanes of a
            // short last block past its items keep the previous block's words and are not
            // stored.
            for (l, item) in x.chunks_exact(row).enumerate() {
                for (k, lanes) in sx.iter_mut().enumerate().take(w) {
                    lanes[l] = T::read(item, k);
                }
            }
            for (k, res) in sr.iter_mut().enumerate().take(w) {
                let terms = &chains.terms[chains.starts[k]..chains.starts[k + 1]];
                // From −0.0, the first fma is the product itself (x + −0.0 = x for every x).
                let mut acc = [if terms.is_empty() { T::ZERO } else { T::NEG_ZERO }; LANES];
                for &(i, m) in terms {
                    let xi = &sx[i % W];
                    (0..LANES).for_each(|l| acc[l] = T::madd::<F>(m, xi[l], acc[l]));
                }
                *res = acc;
            }
            for (l, item) in out.chunks_exact_mut(row).enumerate() {
                for (k, lanes) in sr.iter().enumerate().take(w) {
                    T::write(item, k, lanes[l]);
                }
            }
        }
    }
}
