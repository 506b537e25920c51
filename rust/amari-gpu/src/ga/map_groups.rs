//! The float32 sandwich map (`ga::sandwich_map`) on rows of 1, 2, 4, 8 or 16 blades (a PGA
//! point is 4 with `sandwich(..., blades=)`, a dense PGA row 16) with whole rows per SIMD vector:
//! 16 / k rows per AVX-512 vector, 8 / k per AVX2 one, lane `p·k + j` holding output blade `j`
//! of row `p`; rows of 16 on AVX2 as two vectors each, blades 0-7 and 8-15. Step `l` of every
//! chain broadcasts `x_l` of each row across its row's lanes (one permute, or a load) and
//! multiply-adds it with column `l` of `M` in the lanes whose `M[j][l]` is not ±0,
//! the columns in the chains' order: each lane runs the scalar chain of `map_chains`, step for
//! step, and rows are loaded and stored whole (16 or 32 bytes in and out per 4-blade row).

use std::arch::x86_64::*;

use super::host_cl3_avx2::PREFETCH_WORDS;
use crate::host::simd::{prefetch, Level, Stores};

/// The lanes of the kernel here for rows of `k` values at `level`, if there is one: whole
/// rows per vector (16 / k on AVX-512, 8 / k on AVX2), or 16 for rows of 16 on AVX2 (a row
/// as two vectors, [`rows16_avx2`]).
pub(super) fn width(k: usize, level: Level) -> Option<usize> {
    let lanes = match level {
        Level::Avx512 => 16,
        Level::Avx2 => 8,
        _ => return None,
    };
    (k.is_power_of_two() && k <= 16).then_some(lanes.max(k))
}

/// The chains' steps as vectors of `width` lanes (16 or 8): per column visited (in `order`),
/// the permute index bringing `x_l` to its row's lanes, `M[j][l]` in lane `p·k + j`, and the
/// lanes whose entry is not ±0 (NaN included); and each lane's start (−0.0, or +0.0 where its
/// chain has no step).
pub(super) struct Steps {
    steps: Vec<(usize, [i32; 16], [f32; 16], u16)>,
    start: [f32; 16],
    /// Values per row.
    k: usize,
}

impl Steps {
    /// The steps of the `k × k` map `m` for vectors of `width` lanes.
    pub(super) fn new(m: &[f32], k: usize, order: &[usize], width: usize) -> Steps {
        let live = |v: f32| v != 0.0 || v.is_nan();
        let mut any = 0u16;
        let steps = order
            .iter()
            .filter_map(|&l| {
                let index = std::array::from_fn(|lane| ((lane / k) * k + l) as i32);
                let column = std::array::from_fn(|lane| if lane < width { m[(lane % k) * k + l] } else { 0.0 });
                let mask = (0..width).fold(0u16, |b, lane| b | (u16::from(live(column[lane])) << lane));
                any |= mask;
                (mask != 0).then_some((l, index, column, mask))
            })
            .collect();
        let start = std::array::from_fn(|lane| if any >> lane & 1 == 1 { -0.0 } else { 0.0 });
        Steps { steps, start, k }
    }
}

/// Vectors computed together: independent chains that hide the multiply-add's latency.
const UNROLL: usize = 4;

/// The shared walk of both kernels over `x` and `out` (as long as each other) in vectors of
/// `width` values: `block` on each whole run of [`UNROLL`] vectors, then `tail` on each
/// vector left (the last one short, 1 to `width` values; a whole number of rows).
#[inline(always)]
fn walk(
    (x, out): (&[f32], &mut [f32]),
    width: usize,
    mut block: impl FnMut(&[f32], &mut [f32]),
    mut tail: impl FnMut(&[f32], &mut [f32]),
) {
    let n = x.len().min(out.len());
    let whole = n / (UNROLL * width) * (UNROLL * width);
    let (x, rest_x) = x[..n].split_at(whole);
    let (out, rest_out) = out[..n].split_at_mut(whole);
    for (x, out) in x.chunks_exact(UNROLL * width).zip(out.chunks_exact_mut(UNROLL * width)) {
        block(x, out);
    }
    for (x, out) in rest_x.chunks(width).zip(rest_out.chunks_mut(width)) {
        tail(x, out);
    }
}

/// AVX-512: every row of `x` (k values each, 16 / k rows per vector) into `out`; `stream`:
/// the vectors are written with non-temporal stores (`Stores`: in the 64-, 32- or 16-byte
/// pieces `out`'s alignment allows; numpy puts large arrays 16 bytes past a page).
#[target_feature(enable = "avx512f")]
pub(super) fn rows_avx512(s: &Steps, x: &[f32], out: &mut [f32], fused: bool, stream: bool) {
    let stores = Stores::new(out, stream);
    // SAFETY (every load below): each array holds 16 values, the loads' width.
    #[allow(unsafe_code)]
    let vectors: Vec<(usize, __m512i, __m512, __mmask16)> = s
        .steps
        .iter()
        .map(|(l, index, column, mask)| unsafe {
            (
                *l,
                _mm512_loadu_si512(index.as_ptr().cast()),
                _mm512_loadu_ps(column.as_ptr()),
                *mask,
            )
        })
        .collect();
    #[allow(unsafe_code)]
    // SAFETY: 16 values, the load's width.
    let start = unsafe { _mm512_loadu_ps(s.start.as_ptr()) };
    let step = |acc: __m512, column: __m512, xl: __m512, mask: __mmask16| {
        if fused {
            _mm512_mask3_fmadd_ps(column, xl, acc, mask)
        } else {
            _mm512_mask_add_ps(acc, mask, acc, _mm512_mul_ps(column, xl))
        }
    };
    // Step by step over UNROLL vectors at once: independent chains hide the multiply-add's
    // latency. Rows of 16: `x_l` broadcast straight from memory (a load port, not the
    // shuffle port that a permute per step would keep busy).
    let rows16 = |x: [&[f32; 16]; UNROLL]| {
        let mut acc = [start; UNROLL];
        for &(l, _, column, mask) in &vectors {
            for (acc, x) in acc.iter_mut().zip(x) {
                *acc = step(*acc, column, _mm512_set1_ps(x[l & 15]), mask);
            }
        }
        acc
    };
    let permuted = |xv: [__m512; UNROLL]| {
        let mut acc = [start; UNROLL];
        for &(_, index, column, mask) in &vectors {
            for (acc, xv) in acc.iter_mut().zip(xv) {
                *acc = step(*acc, column, _mm512_permutexvar_ps(index, xv), mask);
            }
        }
        acc
    };
    let vector = |x: &[f32]| -> __m512 {
        let lanes: __mmask16 = (1u32 << x.len().min(16)).wrapping_sub(1) as u16;
        // SAFETY: masked-off lanes are not read (and do not fault); the lanes kept are
        // those of `x` (at most 16).
        #[allow(unsafe_code)]
        unsafe {
            _mm512_maskz_loadu_ps(lanes, x.as_ptr())
        }
    };
    let store = |dst: &mut [f32], acc: __m512| stores.m512(dst, 0, acc);
    let one_row = s.k == 16;
    walk(
        (x, out),
        16,
        |x, out| {
            let (rows, _) = x.as_chunks::<16>();
            let acc = if one_row {
                rows16(std::array::from_fn(|u| &rows[u]))
            } else {
                permuted(std::array::from_fn(|u| vector(&rows[u])))
            };
            for (dst, acc) in out.chunks_exact_mut(16).zip(acc) {
                store(dst, acc);
            }
        },
        |x, out| {
            // One vector (the chains of the other lanes of the array are the same, unused).
            let acc = match <&[f32; 16]>::try_from(x) {
                Ok(row) if one_row => rows16([row; UNROLL])[0],
                _ => permuted([vector(x); UNROLL])[0],
            };
            let lanes: __mmask16 = (1u32 << x.len()).wrapping_sub(1) as u16;
            // SAFETY: masked-off lanes are not written (and do not fault); the lanes kept are
            // those of `out` (`x.len()` ≤ 16, as long as `out`).
            #[allow(unsafe_code)]
            unsafe {
                _mm512_mask_storeu_ps(out.as_mut_ptr(), lanes, acc)
            }
        },
    );
    stores.finish();
}

/// AVX2 and FMA: as [`rows_avx512`] with vectors of 8 lanes (8 / k rows each), the masked
/// steps as blends (a lane whose entry is ±0 keeps its value).
#[target_feature(enable = "avx2,fma")]
pub(super) fn rows_avx2(s: &Steps, x: &[f32], out: &mut [f32], fused: bool, stream: bool) {
    let stores = Stores::new(out, stream);
    let keep = |mask: u16| -> [i32; 8] { std::array::from_fn(|lane| -i32::from(mask >> lane & 1 == 1)) };
    // SAFETY (every load below): each array holds at least 8 values, the loads' width.
    #[allow(unsafe_code)]
    let vectors: Vec<(__m256i, __m256, __m256)> = s
        .steps
        .iter()
        .map(|(_, index, column, mask)| unsafe {
            let keep = keep(*mask);
            (
                _mm256_loadu_si256(index.as_ptr().cast()),
                _mm256_loadu_ps(column.as_ptr()),
                _mm256_castsi256_ps(_mm256_loadu_si256(keep.as_ptr().cast())),
            )
        })
        .collect();
    #[allow(unsafe_code)]
    // SAFETY: 16 values, more than the load's 8.
    let start = unsafe { _mm256_loadu_ps(s.start.as_ptr()) };
    // Step by step over UNROLL vectors at once: independent chains hide the latency.
    let permuted = |xv: [__m256; UNROLL]| {
        let mut acc = [start; UNROLL];
        for &(index, column, keep) in &vectors {
            for (acc, xv) in acc.iter_mut().zip(xv) {
                let xl = _mm256_permutevar8x32_ps(xv, index);
                let next = if fused {
                    _mm256_fmadd_ps(column, xl, *acc)
                } else {
                    _mm256_add_ps(*acc, _mm256_mul_ps(column, xl))
                };
                *acc = _mm256_blendv_ps(*acc, next, keep);
            }
        }
        acc
    };
    let store = |dst: &mut [f32], acc: __m256| stores.m256(dst, 0, acc);
    walk(
        (x, out),
        8,
        |x, out| {
            let (rows, _) = x.as_chunks::<8>();
            // SAFETY: each of `rows` holds 8 values, the loads' width.
            #[allow(unsafe_code)]
            let acc = permuted(std::array::from_fn(|u| unsafe { _mm256_loadu_ps(rows[u].as_ptr()) }));
            for (dst, acc) in out.chunks_exact_mut(8).zip(acc) {
                store(dst, acc);
            }
        },
        |x, out| {
            let lanes: [i32; 8] = std::array::from_fn(|lane| -i32::from(lane < x.len()));
            // SAFETY: masked-off lanes are neither read nor written (and do not fault); the
            // lanes kept are those of `x` and `out` (`x.len()` ≤ 8 of each).
            #[allow(unsafe_code)]
            unsafe {
                let lanes = _mm256_loadu_si256(lanes.as_ptr().cast());
                let xv = _mm256_maskload_ps(x.as_ptr(), lanes);
                // One vector (the chains of the other lanes of the array are the same, unused).
                _mm256_maskstore_ps(out.as_mut_ptr(), lanes, permuted([xv; UNROLL])[0]);
            }
        },
    );
    stores.finish();
}

/// Rows computed together by [`rows16_avx2`]: four rows' two chains of vectors each hide
/// the multiply-add's and the blend's latency.
const ROWS16: usize = 8;

/// AVX2 and FMA on rows of 16 values (`s` built for 16 lanes): each row as two vectors,
/// blades 0-7 and 8-15, each half's chains stepped over the columns in the chains' order where
/// any of its lanes' entries is not ±0 (`x_l` broadcast from memory, a load rather than a
/// shuffle), the lanes whose entry is ±0 kept by a blend unless none is; `stream`: as
/// [`rows_avx512`]. The rows 4 KiB ahead are asked for as each group is loaded. A dense PGA row
/// under an even versor's map (block-diagonal by grade) takes 30 of its 32 half-steps.
#[target_feature(enable = "avx2,fma")]
pub(super) fn rows16_avx2(s: &Steps, x: &[f32], out: &mut [f32], fused: bool, stream: bool) {
    debug_assert_eq!(s.k, 16);
    let stores = Stores::new(out, stream);
    // Each half's steps: column `l`, the half's 8 entries, which lanes step, and whether all do.
    let halves: [Vec<(usize, __m256, __m256, bool)>; 2] = std::array::from_fn(|h| {
        s.steps
            .iter()
            .filter_map(|(l, _, column, mask)| {
                let lanes = (mask >> (8 * h)) & 0xff;
                let keep: [i32; 8] = std::array::from_fn(|lane| -i32::from(lanes >> lane & 1 == 1));
                // SAFETY: 8 values from `8 h` (h < 2) of 16, and 8 of 8: the loads' width.
                #[allow(unsafe_code)]
                let (column, keep) = unsafe {
                    (
                        _mm256_loadu_ps(column[8 * h..].as_ptr()),
                        _mm256_castsi256_ps(_mm256_loadu_si256(keep.as_ptr().cast())),
                    )
                };
                (lanes != 0).then_some((*l, column, keep, lanes == 0xff))
            })
            .collect()
    });
    // SAFETY: 8 values from 0 and from 8 of 16: the loads' width.
    #[allow(unsafe_code)]
    let start = unsafe { [_mm256_loadu_ps(s.start.as_ptr()), _mm256_loadu_ps(s.start[8..].as_ptr())] };
    let step = |acc: __m256, column: __m256, xl: __m256, keep: __m256, all: bool| {
        let next = if fused {
            _mm256_fmadd_ps(column, xl, acc)
        } else {
            _mm256_add_ps(acc, _mm256_mul_ps(column, xl))
        };
        if all {
            next
        } else {
            _mm256_blendv_ps(acc, next, keep)
        }
    };
    // One half's chains of `R` rows, its steps in order (a lane's chain lies within a half):
    // an array of its own, indexed by constants once unrolled, so the accumulators stay in
    // registers (indexed by the half too, they went through the stack at every step).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn half<const R: usize>(
        rows: [&[f32; 16]; R],
        steps: &[(usize, __m256, __m256, bool)],
        start: __m256,
        step: impl Fn(__m256, __m256, __m256, __m256, bool) -> __m256,
    ) -> [__m256; R] {
        let mut acc = [start; R];
        for &(l, column, keep, all) in steps {
            for (acc, row) in acc.iter_mut().zip(rows) {
                *acc = step(*acc, column, _mm256_set1_ps(row[l & 15]), keep, all);
            }
        }
        acc
    }
    let rows = |rows: [&[f32; 16]; ROWS16]| {
        let lo = half(rows, &halves[0], start[0], step);
        let hi = half(rows, &halves[1], start[1], step);
        std::array::from_fn::<_, ROWS16, _>(|r| [lo[r], hi[r]])
    };
    let store = |dst: &mut [f32; 16], [lo, hi]: [__m256; 2]| {
        stores.m256(dst, 0, lo);
        stores.m256(dst, 8, hi);
    };
    let words = x;
    let (x, _) = x.as_chunks::<16>();
    let (out, _) = out.as_chunks_mut::<16>();
    let mut groups = out.chunks_exact_mut(ROWS16);
    let mut inputs = x.chunks_exact(ROWS16);
    for (g, (out, x)) in groups.by_ref().zip(inputs.by_ref()).enumerate() {
        // The rows 4 KiB ahead asked for (as the Cl(3,0) blocks do, why there): each row's
        // first load is a broadcast the chains wait on.
        prefetch(words, 16 * ROWS16 * g + PREFETCH_WORDS, 16 * ROWS16);
        let acc = rows(std::array::from_fn(|r| &x[r]));
        for (dst, acc) in out.iter_mut().zip(acc) {
            store(dst, acc);
        }
    }
    for (dst, x) in groups.into_remainder().iter_mut().zip(inputs.remainder()) {
        let [lo] = half([x], &halves[0], start[0], step);
        let [hi] = half([x], &halves[1], start[1], step);
        store(dst, [lo, hi]);
    }
    stores.finish();
}

#[cfg(test)]
mod tests {
    use crate::ga::algebra::{grade, Algebra};
    use crate::ga::blades::Blades;
    use crate::ga::sandwich_map::{matrix, run};
    use crate::host::simd::Level;

    /// The chains of the `k × k` map, scalar: the reference every level must match.
    fn chains(m: &[f32], x: &[f32], order: &[usize], fused: bool) -> Vec<f32> {
        let k = order.len();
        let mut out = vec![0.0f32; x.len()];
        for (row, res) in x.chunks_exact(k).zip(out.chunks_exact_mut(k)) {
            for j in 0..k {
                let (mut acc, mut any) = (-0.0f32, false);
                for &l in order {
                    let v = m[j * k + l];
                    if v != 0.0 || v.is_nan() {
                        acc = if fused { v.mul_add(row[l], acc) } else { v * row[l] + acc };
                        any = true;
                    }
                }
                res[j] = if any { acc } else { 0.0 };
            }
        }
        out
    }

    /// Every level (AVX-512, AVX2, portable) gives the scalar chains' bits on rows of the named
    /// blades, in the caller's order, for row counts that leave every kind of tail, NaN and
    /// infinity included, streamed or not.
    #[test]
    fn every_level_gives_the_sub_maps_chains_bits() {
        let pga = Algebra::new(3, 0, 1).unwrap();
        let mut rot: Vec<f32> = (0..16)
            .map(|i| if grade(i).is_multiple_of(2) { ((i as f32 + 1.0) * 0.7).sin() } else { 0.0 })
            .collect();
        rot[15] = 0.25;
        let m = matrix(&pga, &rot);
        // Sets an even element keeps x within: grade 3 (a PGA point) in two orders, grade 1,
        // the pseudoscalar, scalar and pseudoscalar, the even blades (8), and grade 2 (6
        // blades, which the portable chains run at every level).
        let sets: [&[i64]; 7] = [
            &[7, 11, 13, 14],
            &[14, 7, 13, 11],
            &[1, 2, 4, 8],
            &[15],
            &[15, 0],
            &[0, 3, 5, 6, 9, 10, 12, 15],
            &[3, 5, 6, 9, 10, 12],
        ];
        for set in sets {
            let blades = Blades::new(&pga, set).unwrap();
            let sub = blades.restrict::<f32>(&m, 16).unwrap();
            let order = blades.ascending();
            let k = order.len();
            for n in [0, 1, 3, 5, 17, 2 * 2048 + 37] {
                let mut x: Vec<f32> = (0..n * k).map(|v| (v as f32 * 0.913).sin() * 3.0).collect();
                if n > 3 {
                    x[k + k / 2] = f32::NAN;
                    x[3 * k - 1] = f32::INFINITY;
                }
                for fused in [false, true] {
                    let want = chains(&sub, &x, &order, fused);
                    for level in [Level::Avx512, Level::Avx2, Level::Portable] {
                        for stream in [false, true] {
                            let mut got = vec![1.0f32; n * k + 16];
                            let at = got.as_ptr().align_offset(64);
                            let dst = &mut got[at..at + n * k];
                            run(&sub, &x, dst, (&order, fused), level, stream);
                            let same = dst.iter().zip(&want).all(|(g, e)| g.to_bits() == e.to_bits());
                            assert!(same, "{set:?} n={n} {level:?} fused={fused} stream={stream}");
                        }
                    }
                }
            }
        }
    }

    /// Rows of 16 under any map (not only a versor's block-diagonal one): columns whose half
    /// has every entry live, none, or some (zeros of both signs, a NaN entry), in two orders,
    /// at every level (AVX2 runs each row as two vectors), give the scalar chains' bits for row
    /// counts that leave every remainder of a group of rows, streamed or not, at an output
    /// on a 64-byte line and 4, 16 and 32 bytes past one (numpy's large arrays lie 16 past).
    #[test]
    fn rows_of_16_give_the_chains_bits_under_any_map() {
        let k = 16;
        let mut m: Vec<f32> = (0..k * k).map(|v| ((v as f32) * 0.537).cos() * 2.0).collect();
        for j in 0..k {
            // Column 3: blades 0-7 all zero (+0 and -0), 8-15 all live; column 9: every odd
            // lane +0, the even ones live (each half partly live); column 12: only lane 15.
            m[j * k + 3] = if j < 8 { [0.0, -0.0][j % 2] } else { m[j * k + 3] };
            if j % 2 == 1 {
                m[j * k + 9] = 0.0;
            }
            if j != 15 {
                m[j * k + 12] = -0.0;
            }
        }
        m[5 * k + 6] = f32::NAN;
        let ascending: Vec<usize> = (0..k).collect();
        let shuffled: Vec<usize> = (0..k).map(|i| (i * 7 + 3) % k).collect();
        for order in [ascending, shuffled] {
            for n in [0, 1, 2, 3, 5, 4099] {
                let mut x: Vec<f32> = (0..n * k).map(|v| (v as f32 * 0.913).sin() * 3.0).collect();
                if n > 3 {
                    // Where some entries of the column are ±0: only the live lanes take them.
                    x[k + 9] = f32::INFINITY;
                    x[2 * k + 12] = f32::NAN;
                    x[3 * k - 1] = f32::INFINITY;
                }
                for fused in [false, true] {
                    let want = chains(&m, &x, &order, fused);
                    for level in [Level::Avx512, Level::Avx2, Level::Portable] {
                        for (stream, offset) in [(false, 0), (true, 0), (true, 1), (true, 4), (true, 8)] {
                            // Room for up to 15 words to a line and the offset past it.
                            let mut got = vec![1.0f32; n * k + 32];
                            let at = got.as_ptr().align_offset(64) + offset;
                            let dst = &mut got[at..at + n * k];
                            run(&m, &x, dst, (&order, fused), level, stream);
                            let same = dst.iter().zip(&want).all(|(g, e)| g.to_bits() == e.to_bits());
                            assert!(same, "n={n} {level:?} fused={fused} stream={stream} +{offset}");
                        }
                    }
                }
            }
        }
    }

    /// Rows of some blades give the dense rows' bits where the dense row has those blades and
    /// zeros elsewhere, but for the sign of a zero result (a zero step of a missing blade).
    #[test]
    fn the_sub_map_is_the_dense_map_on_zero_padded_rows() {
        let pga = Algebra::new(3, 0, 1).unwrap();
        let rot: Vec<f32> = (0..16).map(|i| if grade(i).is_multiple_of(2) { (i as f32 * 0.3 + 0.2).cos() } else { 0.0 }).collect();
        let m = matrix(&pga, &rot);
        let blades = Blades::new(&pga, &[13, 7, 14, 11]).unwrap();
        let sub = blades.restrict::<f32>(&m, 16).unwrap();
        let n = 301;
        let x: Vec<f32> = (0..n * 4).map(|v| (v as f32 * 0.37).sin()).collect();
        let mut dense = vec![0.0f32; n * 16];
        for (row, d) in x.chunks_exact(4).zip(dense.chunks_exact_mut(16)) {
            for (j, b) in blades.indices().enumerate() {
                d[b] = row[j];
            }
        }
        let all: Vec<usize> = (0..16).collect();
        let mut want = vec![0.0f32; n * 16];
        run(&m, &dense, &mut want, (&all, true), Level::detect(), false);
        let mut got = vec![0.0f32; n * 4];
        run(&sub, &x, &mut got, (&blades.ascending(), true), Level::detect(), false);
        for (row, d) in got.chunks_exact(4).zip(want.chunks_exact(16)) {
            for (j, b) in blades.indices().enumerate() {
                let (g, e) = (row[j], d[b]);
                assert!(g.to_bits() == e.to_bits() || (g == 0.0 && e == 0.0), "{g} {e}");
            }
        }
    }
}
