//! All-pairs shortest paths by blocked Floyd–Warshall in the min-plus semiring.
//!
//! The vertices are taken in blocks of `block` (about n/16, at most 128). For each block kb:
//! its diagonal block is closed on the host (Floyd–Warshall on block×block, a small part of
//! the work); the column panel becomes `P = D[:, kb] ⊕ D[:, kb] ⊗ D[kb, kb]*` (paths into kb
//! through earlier blocks and kb); then `D ← D ⊕ P ⊗ D[kb, :]` (the last kb vertex of a path
//! splits it into a prefix through earlier blocks and kb and a suffix through earlier blocks
//! only). Both products run on the devices, rows split across them, D's rows passed as the
//! accumulated input. That is n³ tropical steps in all, against about n³·log₂n for repeated
//! squaring.
//!
//! Weights: `W[i, j]` is the weight of edge i → j, +inf for no edge; negative weights are
//! allowed; −inf and NaN are refused. The diagonal is a self-loop: `D[i, i] = min(W[i, i], 0)`
//! (the empty path costs 0), so a negative diagonal entry is a negative cycle. A negative
//! cycle anywhere raises an error (found as a negative diagonal entry, which Floyd–Warshall
//! guarantees).

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};
use crate::tropical::blocks::{run_product, BatchShape, Product};
use crate::tropical::kernels;
use crate::tropical::scalar::Scalar;
use crate::tropical::semiring::Semiring;

const MIN_PLUS: Semiring = Semiring::MinPlus;

/// Vertices per block for a graph of `n` vertices: about 16 rounds, 4 to 128 per block.
pub fn block_size(n: usize) -> usize {
    n.div_ceil(16).next_power_of_two().clamp(4, 128)
}

pub(crate) fn negative_cycle(vertex: usize, weight: impl std::fmt::Display) -> Error {
    Error::invalid(
        "w",
        format!(
            "the graph has a negative cycle (through vertex {vertex}, a closed walk of weight \
             {weight}), so shortest paths are not defined"
        ),
    )
}

pub(crate) fn check_weights<T: Scalar>(w: &[T], n: usize) -> Result<()> {
    if w.len() != n * n {
        return Err(Error::Shape {
            argument: "w".into(),
            expected: format!("({n}, {n}), {} values", n * n),
            actual: format!("{} values", w.len()),
        });
    }
    if let Some(i) = w.iter().position(|v| v.is_nan() || *v == T::NEG_INFINITY) {
        return Err(Error::invalid(
            "w",
            format!(
                "expected edge weights that are numbers or +inf (no edge), got {} at ({}, {})",
                w[i],
                i / n,
                i % n
            ),
        ));
    }
    Ok(())
}

/// Closes a `b`×`b` block in place (Floyd–Warshall); fails on a negative cycle in it.
pub(crate) fn close_block<T: Scalar>(d: &mut [T], b: usize, first_vertex: usize) -> Result<()> {
    for k in 0..b {
        for i in 0..b {
            let dik = d[i * b + k];
            if dik == T::INFINITY {
                continue;
            }
            for j in 0..b {
                let via = MIN_PLUS.mul(dik, d[k * b + j]);
                if via < d[i * b + j] {
                    d[i * b + j] = via;
                }
            }
        }
    }
    for i in 0..b {
        if d[i * b + i] < T::ZERO {
            return Err(negative_cycle(first_vertex + i, d[i * b + i]));
        }
    }
    Ok(())
}

/// Round `kb` (block width `b`) of the blocked Floyd–Warshall on distances `d`: the closed
/// diagonal block and the column strip through it. Fails on a negative cycle in the block.
pub(crate) fn strips<T: Scalar>(
    d: &[T],
    n: usize,
    kb: usize,
    b: usize,
) -> Result<(Vec<T>, Vec<T>)> {
    let mut diag: Vec<T> = (0..b)
        .flat_map(|i| d[(kb + i) * n + kb..(kb + i) * n + kb + b].iter().copied())
        .collect();
    close_block(&mut diag, b, kb)?;
    let column: Vec<T> = (0..n)
        .flat_map(|i| d[i * n + kb..i * n + kb + b].iter().copied())
        .collect();
    Ok((diag, column))
}

/// The power of two the weights are scaled down by so that no path length overflows
/// the dtype (`T`) on the way (0 in the common case, which runs as given).
///
/// Without a negative cycle every value Floyd–Warshall forms is the length of a simple path
/// or of two joined (at most 2(n − 1) edges), so its magnitude is at most 2n·max|w| up to
/// rounding; when that bound is within half the dtype's range nothing can overflow. Otherwise
/// the weights are scaled by 2^−shift (exact for normal numbers: min-plus is homogeneous and
/// binary scaling commutes with rounding), chosen from the whole matrix on the host before
/// any product is cut, so every device and the host kernel see the same data; the distances
/// are unscaled at the end, where a length beyond the dtype is an error (`finish`). The
/// bound is formed in float64, which holds it for float32 weights; for float64 weights it
/// may overflow, and is then formed from the weights scaled by 2^−64 first (exact).
pub(crate) fn path_shift<T: Scalar>(w: &[T], n: usize) -> i32 {
    let top = w
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, &v| m.max(v.to_f64().abs()));
    let limit = T::MAX / 2.0;
    let mut bound = 2.0 * n as f64 * top;
    let mut shift = 0;
    if bound.is_infinite() {
        bound = 2.0 * n as f64 * (top * 2f64.powi(-64));
        shift = 64;
    }
    while bound > limit {
        bound /= 2.0;
        shift += 1;
    }
    shift
}

fn scale_weights<T: Scalar>(d: &mut [T], e: i32) {
    // 2^e may be beyond float64 itself (e < −1022): applied in two halves.
    let (f, g) = (2f64.powi(e / 2), 2f64.powi(e - e / 2));
    for v in d {
        *v = T::from_f64(v.to_f64() * f * g);
    }
}

/// The last step of both versions: the final negative-cycle check, then the distances
/// unscaled into `out`. A path length beyond the dtype's range is an error naming the first
/// such pair, never an inf (which would read as "unreachable") or a −inf.
pub(crate) fn finish<T: Scalar>(mut d: Vec<T>, n: usize, shift: i32, out: &mut [T]) -> Result<()> {
    for i in 0..n {
        if d[i * n + i] < T::ZERO {
            return Err(negative_cycle(i, d[i * n + i]));
        }
    }
    if shift != 0 {
        for (i, v) in d.iter_mut().enumerate() {
            let scaled = *v;
            let (half, rest) = (shift / 2, shift - shift / 2);
            let length = scaled.to_f64() * 2f64.powi(half) * 2f64.powi(rest);
            if scaled.is_finite() && length.abs() > T::MAX {
                let (dtype, range) = (T::DTYPE, T::RANGE);
                let shown = if length.is_finite() {
                    format!("{length:e}")
                } else {
                    format!("{scaled:e} × 2^{shift}")
                };
                return Err(Error::invalid(
                    "w",
                    format!(
                        "path lengths overflow {dtype}: the shortest path from vertex {} to \
                         vertex {} has length {shown}, beyond the {dtype} range ({range})",
                        i / n,
                        i % n
                    ),
                ));
            }
            *v = T::from_f64(length);
        }
    }
    out.copy_from_slice(&d);
    Ok(())
}

/// Checks the weights and the output, and returns the distances before the first block
/// (scaled by 2^−shift, see `path_shift`) with the shift: the weights with each vertex's
/// distance to itself at most 0 (a negative self-loop is a negative cycle). The GPU and host
/// versions both start here (and end in `finish`).
pub(crate) fn start<T: Scalar>(w: &[T], n: usize, out: &[T]) -> Result<(Vec<T>, i32)> {
    check_weights(w, n)?;
    if out.len() != n * n {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({n}, {n})"),
            actual: format!("{} values", out.len()),
        });
    }
    let mut d = crate::alloc::zeroed("distances", w.len())?;
    d.copy_from_slice(w);
    for i in 0..n {
        d[i * n + i] = d[i * n + i].fmin(T::ZERO);
        if d[i * n + i] < T::ZERO {
            return Err(negative_cycle(i, d[i * n + i]));
        }
    }
    let shift = path_shift(w, n);
    if shift != 0 {
        scale_weights(&mut d, -shift);
    }
    Ok((d, shift))
}

/// All-pairs shortest path lengths of the graph with (n, n) row-major weights `w` into `out`
/// (+inf where unreachable), in `w`'s dtype (float32 or float64). Returns the plan of the
/// last product it ran.
///
/// Weights so large that path lengths could overflow the dtype (2n·max|w| above half its
/// largest value) are scaled by an exact power of two first (see `path_shift`); a shortest
/// path whose length is beyond the dtype is then an error naming the pair, never a wrong inf
/// or −inf. In that case weights below the smallest normal value · 2^shift keep only the
/// dtype's subnormal spacing.
pub fn shortest_paths<T: Scalar>(
    ctx: &MultiGpuContext,
    w: &[T],
    n: usize,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let (mut d, shift) = start(w, n, out)?;
    let mut plan = None;
    let mut next = crate::alloc::zeroed("distances", n * n)?;
    let block = block_size(n);
    for kb in (0..n).step_by(block) {
        let b = block.min(n - kb);
        let (diag, column) = strips(&d, n, kb, b)?;
        let mut panel = crate::alloc::zeroed("panel", n * b)?;
        let shape = BatchShape {
            batch: 1,
            m: n,
            k: b,
            n: b,
        };
        run_product(
            ctx,
            kernels::tiled,
            Product {
                semiring: MIN_PLUS,
                shape,
                a: &column,
                b: &diag,
            },
            Some(&column),
            &mut panel,
            strategy,
        )?;
        let shape = BatchShape {
            batch: 1,
            m: n,
            k: b,
            n,
        };
        let rows = &d[kb * n..(kb + b) * n];
        plan = Some(run_product(
            ctx,
            kernels::tiled,
            Product {
                semiring: MIN_PLUS,
                shape,
                a: &panel,
                b: rows,
            },
            Some(&d),
            &mut next,
            strategy,
        )?);
        std::mem::swap(&mut d, &mut next);
    }
    finish(d, n, shift, out)?;
    match plan {
        Some(plan) => Ok(plan),
        // No vertex: run the empty product so the caller still gets a plan.
        None => {
            let empty = BatchShape {
                batch: 1,
                m: 0,
                k: 0,
                n: 0,
            };
            run_product(
                ctx,
                kernels::tiled,
                Product {
                    semiring: MIN_PLUS,
                    shape: empty,
                    a: &[] as &[T],
                    b: &[],
                },
                None,
                &mut [],
                strategy,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_give_about_sixteen_rounds_within_bounds() {
        assert_eq!(block_size(1), 4);
        assert_eq!(block_size(100), 8);
        assert_eq!(block_size(1024), 64);
        assert_eq!(block_size(4096), 128);
    }

    #[test]
    fn weights_are_scaled_only_when_a_path_could_overflow() {
        let inf = f32::INFINITY;
        assert_eq!(path_shift(&[0.0, 1e30, inf, -1e30], 2), 0);
        assert_eq!(path_shift(&[0.0, 3e38, inf, 0.0], 2), 3);
        // Scaled lengths come back exactly; beyond float32 they are an error, not an inf.
        let mut out = [0.0f32; 4];
        finish(vec![0.0, 1.5e38, inf, 0.0], 2, 1, &mut out).unwrap();
        assert_eq!(out, [0.0, 3e38, inf, 0.0]);
        let err = finish(vec![0.0, -2e38, inf, 0.0], 2, 1, &mut out).unwrap_err();
        assert!(
            err.to_string().contains("path lengths overflow float32"),
            "{err}"
        );
    }

    #[test]
    fn block_closure_finds_paths_and_negative_cycles() {
        let inf = f32::INFINITY;
        let mut d = vec![0.0, 1.0, inf, inf, 0.0, -2.0, 4.0, inf, 0.0];
        close_block(&mut d, 3, 0).unwrap();
        assert_eq!(d, vec![0.0, 1.0, -1.0, 2.0, 0.0, -2.0, 4.0, 5.0, 0.0]);
        let mut d = vec![0.0, 1.0, -2.0, 0.0];
        assert!(close_block(&mut d, 2, 5)
            .unwrap_err()
            .to_string()
            .contains("negative cycle"));
    }
}
