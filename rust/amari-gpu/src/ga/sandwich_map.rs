//! The sandwich `r x r̃` by one rotor `r` for every row `x`, as the linear map it is on `x`:
//! `y_k = Σ_i M[k][i] x_i`. `M` is built once per call on the host from `r` ([`matrix`]),
//! bound whole to every device in place of `r`, and each output blade is one chain of
//! `fma(M[k][i], x_i, acc)` over the non-zero `M[k][i]` in increasing `i`, from `acc = −0.0`
//! (so the first step is the product itself), `+0.0` where no entry is non-zero (the WGSL
//! kernel of `ga::codegen_map` writes the same chain; the host runs it here).
//!
//! `M[k][i] = Σ_{a ≤ b} c · r_a r_b`, the pairs `(a, b)` and `(b, a)` of the two-stage sandwich
//! folded into one integer coefficient `c` first, so terms that cancel for every rotor (the
//! off-grade parts of a versor) are absent instead of rounding to noise. Each `r_a r_b` is
//! exact in float64 (two float32 significands), the sum runs in float64 in `(a, b)` order and
//! is rounded once to float32.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use super::algebra::Algebra;
use super::operation::sandwich_terms;
pub(super) use super::map_chains::GRAIN;
use super::map_chains::{chains, run_chains};
#[cfg(target_arch = "x86_64")]
use super::map_groups;
use crate::host::arith::Real;
use crate::host::simd::Level;

/// One entry `M[k][i]` that some rotor makes non-zero: its terms `(a, b, c)`, `a ≤ b`,
/// `c · r_a r_b`, in `(a, b)` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Output blade.
    pub k: usize,
    /// Input blade.
    pub i: usize,
    /// The terms of the entry.
    pub terms: Vec<(u8, u8, i8)>,
}

/// The entries of `M` for `algebra` that are not zero for every rotor, in `(k, i)` order
/// (made once per algebra and process).
pub fn entries(algebra: &Algebra) -> Arc<Vec<Entry>> {
    static MADE: OnceLock<Mutex<HashMap<Algebra, Arc<Vec<Entry>>>>> = OnceLock::new();
    let mut made = MADE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    made.entry(*algebra)
        .or_insert_with(|| Arc::new(build(algebra)))
        .clone()
}

/// `r x r̃` term by term: `t_m += s1 r_a x_i` (first stage), `y_k += s2 t_m r_b` (second stage,
/// the reverse's sign folded in), so `r_a x_i r_b` enters `y_k` with sign `s1 s2`.
fn build(algebra: &Algebra) -> Vec<Entry> {
    let (first, second) = sandwich_terms(algebra);
    let mut by_middle: Vec<Vec<(usize, usize, i8)>> = vec![Vec::new(); algebra.blades()];
    for t in &second {
        by_middle[t.i].push((t.j, t.k, t.sign));
    }
    let mut coef: BTreeMap<(usize, usize, u8, u8), i32> = BTreeMap::new();
    for t in &first {
        for &(b, k, s2) in &by_middle[t.k] {
            let (lo, hi) = (t.i.min(b) as u8, t.i.max(b) as u8);
            *coef.entry((k, t.j, lo, hi)).or_default() += i32::from(t.sign * s2);
        }
    }
    let mut entries: Vec<Entry> = Vec::new();
    for ((k, i, a, b), c) in coef {
        if c == 0 {
            continue;
        }
        let c = i8::try_from(c).expect("at most two paths per pair of rotor blades");
        match entries.last_mut() {
            Some(e) if (e.k, e.i) == (k, i) => e.terms.push((a, b, c)),
            _ => entries.push(Entry {
                k,
                i,
                terms: vec![(a, b, c)],
            }),
        }
    }
    entries
}

/// `M` of rotor `r` (`algebra.blades()` words), row-major `blades × blades` (`M[k][i]` at
/// `k · blades + i`); entries no rotor reaches are 0.
pub fn matrix(algebra: &Algebra, r: &[f32]) -> Vec<f32> {
    let w = algebra.blades();
    let mut m = vec![0.0f32; w * w];
    for e in entries(algebra).iter() {
        let sum = e.terms.iter().fold(0.0f64, |acc, &(a, b, c)| {
            acc + f64::from(c) * (f64::from(r[a as usize]) * f64::from(r[b as usize]))
        });
        m[e.k * w + e.i] = sum as f32;
    }
    m
}

/// `M` of a float64 rotor `r` (`algebra.blades()` values as words), as float64 words: each
/// entry's terms summed in float64 in `(a, b)` order (products of float64 values are not
/// exact, so this is one rounding per product and per sum, made once on the host).
pub fn matrix_f64(algebra: &Algebra, r: &[f32]) -> Vec<f32> {
    let w = algebra.blades();
    let mut m = vec![0.0f32; 2 * w * w];
    for e in entries(algebra).iter() {
        let sum = e.terms.iter().fold(0.0f64, |acc, &(a, b, c)| {
            let (ra, rb) = (f64::read(r, a as usize), f64::read(r, b as usize));
            acc + f64::from(c) * (ra * rb)
        });
        f64::write(&mut m, e.k * w + e.i, sum);
    }
    m
}

/// [`run`] for float64 rows and map (as words): the same chains in float64, at this CPU's
/// SIMD level.
pub fn run_f64(m: &[f32], x: &[f32], out: &mut [f32], (order, fused): (&[usize], bool)) {
    let w = order.len();
    run_chains::<f64>(&chains(m, w, order), x, out, (w, fused), Level::detect());
}

/// `out[n] = M x[n]` for rows of `order.len()` words (every blade, or those of
/// `sandwich(..., blades=)`, see `ga::blades`), each chain visiting the columns in `order`, on
/// the current rayon pool at SIMD level `level` (or the CPU's, if lower): each output blade
/// one chain, `fused` as the devices round `fma`; `stream`: whole vectors are written with
/// non-temporal stores where `out` is aligned (same words; for outputs that would not stay in
/// the caches anyway).
pub fn run(
    m: &[f32],
    x: &[f32],
    out: &mut [f32],
    (order, fused): (&[usize], bool),
    level: Level,
    stream: bool,
) {
    let w = order.len();
    let level = level.at_most_detected();
    #[cfg(target_arch = "x86_64")]
    if let Some(width) = map_groups::width(w, level) {
        let steps = map_groups::Steps::new(m, w, order, width);
        out.par_chunks_mut(GRAIN * w)
            .zip(x.par_chunks(GRAIN * w))
            .for_each(|(out, x)| {
                // SAFETY: `at_most_detected` returned `Avx512` only after
                // `is_x86_feature_detected!` found AVX-512F, and `Avx2` only after it found
                // AVX2 and FMA, all each kernel needs; their memory accesses are in bounds
                // (see `map_groups`).
                #[allow(unsafe_code)]
                unsafe {
                    match (level, width) {
                        (Level::Avx512, _) => map_groups::rows_avx512(&steps, x, out, fused, stream),
                        (_, 16) => map_groups::rows16_avx2(&steps, x, out, fused, stream),
                        _ => map_groups::rows_avx2(&steps, x, out, fused, stream),
                    }
                }
            });
        return;
    }
    run_chains::<f32>(&chains(m, w, order), x, out, (w, fused), level);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ga::algebra::grade;
    use crate::ga::host_apply::apply_host;
    use crate::ga::operation::Operation;
    use crate::kernel::FmaMode;

    fn rotor(algebra: &Algebra) -> Vec<f32> {
        let w = algebra.blades();
        (0..w)
            .map(|i| {
                if grade(i).is_multiple_of(2) {
                    ((i as f32 + 1.0) * 0.7).sin()
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// `M x` in float64 against the two-stage sandwich in float64: the same map.
    #[test]
    fn the_matrix_is_the_sandwich() {
        for (p, q, r) in [(3, 0, 0), (3, 0, 1), (1, 3, 0), (4, 1, 0)] {
            let alg = Algebra::new(p, q, r).unwrap();
            let w = alg.blades();
            let rot: Vec<f32> = (0..w).map(|i| ((i as f32 + 1.0) * 0.37).cos()).collect();
            let (first, second) = sandwich_terms(&alg);
            let entries = entries(&alg);
            for i in 0..w {
                // Two-stage on the basis blade e_i, in float64.
                let mut t = vec![0.0f64; w];
                for s in first.iter().filter(|s| s.j == i) {
                    t[s.k] += f64::from(s.sign) * f64::from(rot[s.i]);
                }
                let mut y = vec![0.0f64; w];
                for s in &second {
                    y[s.k] += f64::from(s.sign) * t[s.i] * f64::from(rot[s.j]);
                }
                for (k, want) in y.iter().enumerate() {
                    let got = entries.iter().find(|e| (e.k, e.i) == (k, i)).map_or(0.0, |e| {
                        e.terms.iter().fold(0.0, |acc, &(a, b, c)| {
                            acc + f64::from(c) * f64::from(rot[a as usize]) * f64::from(rot[b as usize])
                        })
                    });
                    assert!((got - want).abs() <= 1e-12, "{} M[{k}][{i}]", alg.label());
                }
            }
        }
    }

    /// A versor keeps grades: the off-grade entries of an even rotor's map are exactly 0.
    #[test]
    fn an_even_rotor_keeps_grades_exactly() {
        let alg = Algebra::CL3;
        let m = matrix(&alg, &rotor(&alg));
        for k in 0..8 {
            for i in 0..8 {
                if grade(k) != grade(i) {
                    assert_eq!(m[k * 8 + i].to_bits(), 0, "M[{k}][{i}]");
                }
            }
        }
    }

    /// Every SIMD level gives the scalar chains' bits, tails and NaN included.
    #[test]
    fn every_level_gives_the_chains_bits() {
        let alg = Algebra::new(3, 0, 1).unwrap();
        let w = alg.blades();
        let mut rot = rotor(&alg);
        rot[15] = 0.25;
        let m = matrix(&alg, &rot);
        let n = 2 * GRAIN + 37;
        let mut x: Vec<f32> = (0..n * w).map(|v| (v as f32 * 0.913).sin() * 3.0).collect();
        x[5 * w + 3] = f32::NAN;
        x[7 * w + 5] = f32::INFINITY;
        let all: Vec<usize> = (0..w).collect();
        for fused in [false, true] {
            let mut want = vec![0.0f32; n * w];
            for (row, res) in x.chunks_exact(w).zip(want.chunks_exact_mut(w)) {
                for k in 0..w {
                    let (mut acc, mut any) = (-0.0f32, false);
                    for i in 0..w {
                        let v = m[k * w + i];
                        if v != 0.0 || v.is_nan() {
                            acc = if fused { v.mul_add(row[i], acc) } else { v * row[i] + acc };
                            any = true;
                        }
                    }
                    res[k] = if any { acc } else { 0.0 };
                }
            }
            for level in [Level::Portable, Level::Avx2, Level::Avx512] {
                let mut got = vec![1.0f32; n * w];
                run(&m, &x, &mut got, (&all, fused), level, false);
                let mut streamed = vec![1.0f32; n * w + 16];
                // At a 64-byte boundary or not (a 4-byte offset), streamed or not: same words.
                let aligned = streamed.as_ptr().align_offset(64);
                for offset in [aligned, aligned + 1] {
                    let dst = &mut streamed[offset..offset + n * w];
                    run(&m, &x, dst, (&all, fused), level, true);
                    assert!(dst.iter().zip(&want).all(|(g, e)| g.to_bits() == e.to_bits()));
                }
                let same = got.iter().zip(&want).all(|(g, e)| g.to_bits() == e.to_bits());
                assert!(same, "{level:?} fused={fused}");
            }
        }
    }

    /// The host kernel of a broadcast sandwich is this map.
    #[test]
    fn the_broadcast_sandwich_kernel_runs_the_map() {
        let alg = Algebra::new(3, 0, 1).unwrap();
        let rot = rotor(&alg);
        let x: Vec<f32> = (0..33 * 16).map(|v| (v as f32 * 0.31).cos()).collect();
        let mut got = vec![0.0f32; x.len()];
        let mut want = vec![0.0f32; x.len()];
        apply_host(&alg, Operation::Sandwich, &[&rot, &x], &mut got, FmaMode::Fused).unwrap();
        let all: Vec<usize> = (0..16).collect();
        run(&matrix(&alg, &rot), &x, &mut want, (&all, true), Level::detect(), false);
        assert!(got.iter().zip(&want).all(|(g, e)| g.to_bits() == e.to_bits()));
    }
}
