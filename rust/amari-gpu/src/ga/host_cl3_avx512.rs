//! The AVX-512 float16 blocks of the host's Cl(3,0) product (`ga::host_cl3`): 16 items a
//! block, one per 32-bit lane of a 512-bit vector. The block's 128 halves (four vectors)
//! are regrouped blade-major as 16-bit words, before any widening, by two rounds of
//! `vpermt2w` (four each), then widened 16 at a time (`vcvtph2ps` zmm); the results are
//! rounded 16 at a time (`vcvtps2ph` zmm, to nearest, ties to even) and regrouped back the
//! same way. Against the AVX2 blocks (`ga::host_cl3_avx2`: eight items, three 8 x 8 float32
//! transposes of 24 shuffles each, 8-wide conversions) that is a third of the shuffles
//! and half the conversions per item, and the same chains lane by lane: the same bits.

use std::arch::x86_64::*;

use super::cl3_table::{NEG, W};
use super::host_cl3_avx2::{prefetch, PREFETCH_WORDS};
use crate::host::simd::Stores;

/// Words (two halves each) per block: 16 items of 8 halves.
pub(super) const BLOCK: usize = 64;

/// `vpermt2w` indices, 32 halves each, over two sources seen as one list of 64 halves.
///
/// `GATHER[h]`: from the rows of 8 items (item-major, 8 halves each: half `8m + j` is blade
/// j of item m) to blades `4h..4h + 4` of those items, blade-major (`8(j - 4h) + m`).
/// `MERGE[p]`: from two such blade-major lists (items 0..8, then items 8..16) to blades
/// `2p, 2p + 1` of the 16 items (`16(j - 2p) + m`).
/// `SPLIT[q]` undoes a merge: two merged vectors (blades 0..4, or 4..8, of 16 items) to
/// those four blades of items `8q..8q + 8`; `GATHER[r]` then takes the two lists (blades 0..4
/// and 4..8) of 8 items back to rows `4r..4r + 4` of them (an 8 x 8 transpose is its own
/// inverse).
struct Indices {
    gather: [__m512i; 2],
    merge: [__m512i; 2],
    split: [__m512i; 2],
}

/// The index lists of [`Indices`] as numbers (`const`, checked by the tests below).
const fn table(kind: usize, which: usize) -> [u16; 32] {
    let mut t = [0u16; 32];
    let mut p = 0;
    while p < 32 {
        t[p] = match kind {
            // Blade j = 4·which + p / 8 of item m = p % 8: half 8m + j of the 8 rows (and
            // back: row m = 4·which + p / 8, blade j = p % 8 from half 8j + m of the lists).
            0 => (8 * (p % 8) + 4 * which + p / 8) as u16,
            // Blade j = 2·which + p / 16, item m = p % 16: half 8j + m of the first list
            // (m < 8) or 8j + m - 8 of the second (32 on).
            1 => {
                let (j, m) = (2 * which + p / 16, p % 16);
                if m < 8 {
                    (8 * j + m) as u16
                } else {
                    (32 + 8 * j + m - 8) as u16
                }
            }
            // Blade j = p / 8 of item m = 8·which + p % 8: half 16(j % 2) + m of merged
            // vector j / 2 (the second source from 32 on).
            _ => (16 * (p / 8) + 8 * which + p % 8) as u16,
        };
        p += 1;
    }
    t
}

impl Indices {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn new() -> Indices {
        let load = |kind, which| {
            let t = table(kind, which);
            // SAFETY: `t` is 32 u16s, 64 bytes, the one unaligned 512-bit load reads.
            #[allow(unsafe_code)]
            unsafe {
                _mm512_loadu_si512(t.as_ptr().cast())
            }
        };
        Indices {
            gather: [load(0, 0), load(0, 1)],
            merge: [load(1, 0), load(1, 1)],
            split: [load(2, 0), load(2, 1)],
        }
    }
}

/// The 16 items of the block at word `at` of `x`, blade-major and widened: `out[j]` holds
/// blade j of every item (exactly: every float16 value is a float32 value).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn load_blades(x: &[f32], at: usize, ix: &Indices) -> [__m512; W] {
    let x = &x[at..at + BLOCK];
    // SAFETY: `x` holds 64 words, 256 bytes (bounds-checked above), so each unaligned
    // 64-byte load at word 16r, r < 4, is inside it.
    #[allow(unsafe_code)]
    let rows: [__m512i; 4] =
        std::array::from_fn(|r| unsafe { _mm512_loadu_si512(x.as_ptr().add(16 * r).cast()) });
    // Blades 0..4 (lo) and 4..8 (hi) of items 0..8 (first) and 8..16 (second).
    let lo0 = _mm512_permutex2var_epi16(rows[0], ix.gather[0], rows[1]);
    let hi0 = _mm512_permutex2var_epi16(rows[0], ix.gather[1], rows[1]);
    let lo1 = _mm512_permutex2var_epi16(rows[2], ix.gather[0], rows[3]);
    let hi1 = _mm512_permutex2var_epi16(rows[2], ix.gather[1], rows[3]);
    // Blades 2p, 2p + 1 of the 16 items.
    let pairs = [
        _mm512_permutex2var_epi16(lo0, ix.merge[0], lo1),
        _mm512_permutex2var_epi16(lo0, ix.merge[1], lo1),
        _mm512_permutex2var_epi16(hi0, ix.merge[0], hi1),
        _mm512_permutex2var_epi16(hi0, ix.merge[1], hi1),
    ];
    std::array::from_fn(|j| {
        let pair = pairs[j / 2];
        let half = if j % 2 == 0 {
            _mm512_castsi512_si256(pair)
        } else {
            _mm512_extracti64x4_epi64::<1>(pair)
        };
        _mm512_cvtph_ps(half)
    })
}

// The chains of `host_cl3_avx2`, on vectors of 16 items.
super::host_cl3_avx2::cl3_chains!(
    chains,
    "avx512f",
    __m512,
    _mm512_mul_ps,
    _mm512_fmadd_ps,
    _mm512_fnmadd_ps,
    _mm512_add_ps,
    _mm512_sub_ps
);

/// The blade-major results `r` rounded once to float16 (to nearest, ties to even, as
/// `host::f16::narrow` and `vcvtps2ph` ymm round) and regrouped as the block's 4 vectors of
/// rows (item-major, 4 items each).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn store_rows(r: &[__m512; W], ix: &Indices) -> [__m512i; 4] {
    let h: [__m256i; W] = std::array::from_fn(|k| _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r[k]));
    let pair = |k: usize| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(h[k]), h[k + 1]);
    let (p01, p23, p45, p67) = (pair(0), pair(2), pair(4), pair(6));
    let lo0 = _mm512_permutex2var_epi16(p01, ix.split[0], p23);
    let lo1 = _mm512_permutex2var_epi16(p01, ix.split[1], p23);
    let hi0 = _mm512_permutex2var_epi16(p45, ix.split[0], p67);
    let hi1 = _mm512_permutex2var_epi16(p45, ix.split[1], p67);
    [
        _mm512_permutex2var_epi16(lo0, ix.gather[0], hi0),
        _mm512_permutex2var_epi16(lo0, ix.gather[1], hi0),
        _mm512_permutex2var_epi16(lo1, ix.gather[0], hi1),
        _mm512_permutex2var_epi16(lo1, ix.gather[1], hi1),
    ]
}

/// Every whole block of 16 items (64 words) of `a` and `b` into `out` (all three the same
/// number of words, a multiple of 64): the float16 rows of `host_cl3_avx2::blocks_f16`, the
/// same bits. `stream`: non-temporal stores (`Stores`); into a 64-byte aligned output, each
/// row vector is streamed whole, decided here once rather than at every store.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn blocks_f16<const FUSED: bool>(a: &[f32], b: &[f32], out: &mut [f32], stream: bool) {
    debug_assert!(a.len() == out.len() && b.len() == out.len() && out.len().is_multiple_of(BLOCK));
    let stores = Stores::new(out, stream);
    if stores.whole(64) {
        each_block::<FUSED, true>(a, b, out, stores);
    } else {
        each_block::<FUSED, false>(a, b, out, stores);
    }
    stores.finish();
}

/// The loop of [`blocks_f16`]: `WHOLE`, every row vector streamed with one 64-byte
/// non-temporal store (`stores.whole(64)`); otherwise through `stores`. The rows of the
/// block [`PREFETCH_WORDS`] ahead are asked for as each block is loaded.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn each_block<const FUSED: bool, const WHOLE: bool>(a: &[f32], b: &[f32], out: &mut [f32], stores: Stores) {
    let ix = Indices::new();
    let mut at = 0;
    while at + BLOCK <= out.len() {
        prefetch(a, at + PREFETCH_WORDS, BLOCK);
        prefetch(b, at + PREFETCH_WORDS, BLOCK);
        let (x, y) = (load_blades(a, at, &ix), load_blades(b, at, &ix));
        let rows = store_rows(&chains::<FUSED>(&x, &y), &ix);
        let o = &mut out[at..at + BLOCK];
        for (r, &v) in rows.iter().enumerate() {
            if WHOLE {
                // SAFETY: `o` holds 64 words (bounds-checked above), so the 64 bytes at word
                // 16r, r < 4, are inside it; `out` starts 64-byte aligned (`whole(64)`) and
                // `at` and 16r are multiples of 16 words, so they are 64-byte aligned, as
                // `_mm512_stream_si512` requires.
                #[allow(unsafe_code)]
                unsafe {
                    _mm512_stream_si512(o.as_mut_ptr().add(16 * r).cast(), v)
                };
            } else {
                stores.m512(o, 16 * r, _mm512_castsi512_ps(v));
            }
        }
        at += BLOCK;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index lists regroup as they say: gathering then merging takes item-major rows to
    /// blade-major vectors, and splitting then scattering takes them back.
    #[test]
    fn the_index_lists_are_a_transpose_and_its_inverse() {
        // Half h of the block (row m = h / 8, blade j = h % 8) holds h.
        let rows: Vec<u16> = (0..128).collect();
        let permute = |a: &[u16], b: &[u16], t: [u16; 32]| -> Vec<u16> {
            t.iter().map(|&i| if i < 32 { a[i as usize] } else { b[i as usize - 32] }).collect()
        };
        let r = |k: usize| &rows[32 * k..32 * k + 32];
        let (lo0, hi0) = (permute(r(0), r(1), table(0, 0)), permute(r(0), r(1), table(0, 1)));
        let (lo1, hi1) = (permute(r(2), r(3), table(0, 0)), permute(r(2), r(3), table(0, 1)));
        let pairs = [
            permute(&lo0, &lo1, table(1, 0)),
            permute(&lo0, &lo1, table(1, 1)),
            permute(&hi0, &hi1, table(1, 0)),
            permute(&hi0, &hi1, table(1, 1)),
        ];
        for j in 0..8 {
            for m in 0..16 {
                assert_eq!(pairs[j / 2][16 * (j % 2) + m], (8 * m + j) as u16, "blade {j} item {m}");
            }
        }
        let lo = [permute(&pairs[0], &pairs[1], table(2, 0)), permute(&pairs[0], &pairs[1], table(2, 1))];
        let hi = [permute(&pairs[2], &pairs[3], table(2, 0)), permute(&pairs[2], &pairs[3], table(2, 1))];
        let back: Vec<u16> = (0..4)
            .flat_map(|k| permute(&lo[k / 2], &hi[k / 2], table(0, k % 2)))
            .collect();
        assert_eq!(back, rows);
    }
}
