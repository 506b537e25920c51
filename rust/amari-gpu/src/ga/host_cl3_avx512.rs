//! The AVX-512 float16 blocks of the host's Cl(3,0) product (`ga::host_cl3`): 16 items a
//! block, one per 32-bit lane of a 512-bit vector. The block's 128 halves (four vectors of
//! four items, one item a 128-bit lane) are regrouped blade-major as 16-bit words, before
//! any widening: word and dword unpacks inside the lanes, then one qword permute across
//! them; then widened 16 at a time (`vcvtph2ps` zmm); the results are rounded 16 at a time
//! (`vcvtps2ph` zmm, to nearest, ties to even) and regrouped back by the inverse steps. The
//! items end up in the lanes in a fixed order of their own (item `4s + l` in lane `4l + s`),
//! the same for both operands and undone at the store, so each lane's chain is one item's.
//! Against the AVX2 blocks (`ga::host_cl3_avx2`: eight items, three 8 x 8 float32
//! transposes of 24 shuffles each, 8-wide conversions) that is a third of the shuffles and
//! half the conversions per item, and the same chains lane by lane: the same bits.
//!
//! Why unpacks and not word permutes: `vpermt2w` zmm costs two cycles of the shuffle port
//! (each unpack, `vpshufb` and `vpermq` one). A block in L1 on one thread of the Xeon VM of
//! `docs/benchmarks.md` took 34.3 ns with two rounds of `vpermt2w` each way and 31.3 ns
//! with these steps; two threads over 2^20 items (48 MiB), 1.30 -> 1.22 ms. Without
//! [`opaque`] the compiler folds some of the unpacks back into `vpermt2w`.

use std::arch::asm;
use std::arch::x86_64::*;

use super::cl3_table::{NEG, W};
use super::host_cl3_avx2::PREFETCH_WORDS;
use crate::host::simd::{prefetch, Stores};

/// Words (two halves each) per block: 16 items of 8 halves.
pub(super) const BLOCK: usize = 64;

/// The constant vectors of the regrouping.
///
/// `gather`: qword `2l + e` of a vector to qword `4e + l` (`vpermq`), the blade-major qwords
/// of the four lanes together: blade `2p` in the low half, `2p + 1` in the high one.
/// `scatter`: two vectors of four blade-major qwords (the low halves) interleaved back, qword
/// `l` of the first to `2l` and of the second to `2l + 1` (`vpermt2q`).
/// `evens`: in each 128-bit lane, the even words to the low qword and the odd ones to the
/// high (`vpshufb`).
struct Indices {
    gather: __m512i,
    scatter: __m512i,
    evens: __m512i,
}

impl Indices {
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn new() -> Indices {
        Indices {
            gather: _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7),
            scatter: _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
            evens: _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)),
        }
    }
}

/// `v` as it is, hidden from the compiler's shuffle combining: without it the unpacks are
/// folded back into the `vpermt2w` they replace.
#[inline]
#[target_feature(enable = "avx512f")]
fn opaque(mut v: __m512i) -> __m512i {
    // SAFETY: an empty template; it reads and writes only the register it is given.
    #[allow(unsafe_code)]
    unsafe {
        asm!("/* {0} */", inout(zmm_reg) v, options(pure, nomem, nostack, preserves_flags))
    };
    v
}

/// The 16 items of the block at word `at` of `x`, blade-major and widened: `out[j]` holds
/// blade j of every item, item `4s + l` in lane `4l + s` (exactly: every float16 value is a
/// float32 value).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn load_blades(x: &[f32], at: usize, ix: &Indices) -> [__m512; W] {
    let x = &x[at..at + BLOCK];
    // SAFETY: `x` holds 64 words, 256 bytes (bounds-checked above), so each unaligned
    // 64-byte load at word 16r, r < 4, is inside it.
    #[allow(unsafe_code)]
    let r: [__m512i; 4] =
        std::array::from_fn(|s| unsafe { _mm512_loadu_si512(x.as_ptr().add(16 * s).cast()) });
    // Lane l of vector s is item 4s + l. Blades 0..4 (lo) and 4..8 (hi) of items s = 0, 1 (and
    // 2, 3), word by word: dword j is blade j (or 4 + j) of the two.
    let (lo01, hi01) = (_mm512_unpacklo_epi16(r[0], r[1]), _mm512_unpackhi_epi16(r[0], r[1]));
    let (lo23, hi23) = (_mm512_unpacklo_epi16(r[2], r[3]), _mm512_unpackhi_epi16(r[2], r[3]));
    let (lo01, hi01, lo23, hi23) = (opaque(lo01), opaque(hi01), opaque(lo23), opaque(hi23));
    // Qword e of lane l of vector p: blade 2p + e of items l, 4 + l, 8 + l, 12 + l.
    let pairs = [
        _mm512_unpacklo_epi32(lo01, lo23),
        _mm512_unpackhi_epi32(lo01, lo23),
        _mm512_unpacklo_epi32(hi01, hi23),
        _mm512_unpackhi_epi32(hi01, hi23),
    ]
    .map(|v| opaque(_mm512_permutexvar_epi64(ix.gather, opaque(v))));
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

/// The blade-major results `r` (item `4s + l` in lane `4l + s`) rounded once to float16 (to
/// nearest, ties to even, as `host::f16::narrow` and `vcvtps2ph` ymm round) and regrouped
/// as the block's 4 vectors of rows (item-major, 4 items each), the steps of
/// [`load_blades`] undone.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn store_rows(r: &[__m512; W], ix: &Indices) -> [__m512i; 4] {
    let h: [__m512i; W] = std::array::from_fn(|k| {
        _mm512_castsi256_si512(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r[k]))
    });
    // Qword e of lane l of vector p: blade 2p + e of items l, 4 + l, 8 + l, 12 + l.
    let p: [__m512i; 4] =
        std::array::from_fn(|p| opaque(_mm512_permutex2var_epi64(h[2 * p], ix.scatter, h[2 * p + 1])));
    // Interleaving dwords twice undoes one interleave: dword j of lo01 is blade j of items l
    // and 4 + l, of lo23 of items 8 + l and 12 + l (hi: blades 4 + j).
    let (x0, y0) = (_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    let (x1, y1) = (_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    let (x0, y0, x1, y1) = (opaque(x0), opaque(y0), opaque(x1), opaque(y1));
    let [lo01, lo23, hi01, hi23] = [
        _mm512_unpacklo_epi32(x0, y0),
        _mm512_unpackhi_epi32(x0, y0),
        _mm512_unpacklo_epi32(x1, y1),
        _mm512_unpackhi_epi32(x1, y1),
    ]
    // Each item's words together: the even words (the first item's) in the low qword.
    .map(|v| opaque(_mm512_shuffle_epi8(opaque(v), ix.evens)));
    [
        _mm512_unpacklo_epi64(lo01, hi01),
        _mm512_unpackhi_epi64(lo01, hi01),
        _mm512_unpacklo_epi64(lo23, hi23),
        _mm512_unpackhi_epi64(lo23, hi23),
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

/// The last items of a piece, fewer than a block (`out.len() < BLOCK` words, as many in `a`
/// and `b`): one block whose other items are zero, only their own words written back. Each
/// lane's chain is its item's whatever the other lanes hold, so the bits are those of
/// [`blocks_f16`] and of `host_cl3::one_by_one`. Item by item, a chunk of numpy rows (whose
/// first three items reach the output's first 64-byte line, leaving thirteen at its end)
/// spent about 40 ns on each, 1.5% of a 2^20-item product's CPU time.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn last_f16<const FUSED: bool>(a: &[f32], b: &[f32], out: &mut [f32]) {
    let n = out.len();
    if n == 0 {
        return;
    }
    debug_assert!(n < BLOCK && a.len() == n && b.len() == n);
    let (mut x, mut y, mut o) = ([0.0f32; BLOCK], [0.0f32; BLOCK], [0.0f32; BLOCK]);
    x[..n].copy_from_slice(a);
    y[..n].copy_from_slice(b);
    each_block::<FUSED, false>(&x, &y, &mut o, Stores::new(&[], false));
    out.copy_from_slice(&o[..n]);
}

/// The loop of [`blocks_f16`]: `WHOLE`, every row vector streamed with one 64-byte
/// non-temporal store (`stores.whole(64)`); otherwise through `stores`. The rows of the
/// block [`PREFETCH_WORDS`] ahead are asked for as each block is loaded.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn each_block<const FUSED: bool, const WHOLE: bool>(a: &[f32], b: &[f32], out: &mut [f32], stores: Stores) {
    let ix = Indices::new();
    if out.len() < BLOCK {
        return;
    }
    // Software-pipelined: the next block's operands are loaded and regrouped before this
    // block's results are regrouped and stored. Either regrouping is shuffles on the one
    // port that has them, and the chains FMAs that may go there too; in program order
    // block by block, a block's chains waited for its loads and its stores for its chains,
    // with little else to issue. The same loop in C, one thread over blocks in L1 on the
    // Xeon VM of `docs/benchmarks.md`: 82-85 -> 67-68 TSC ticks a block.
    let (mut x, mut y) = (load_blades(a, 0, &ix), load_blades(b, 0, &ix));
    let mut at = 0;
    while at + BLOCK <= out.len() {
        let r = chains::<FUSED>(&x, &y);
        let next = at + BLOCK;
        if next + BLOCK <= out.len() {
            prefetch(a, next + PREFETCH_WORDS, BLOCK);
            prefetch(b, next + PREFETCH_WORDS, BLOCK);
            (x, y) = (load_blades(a, next, &ix), load_blades(b, next, &ix));
        }
        let rows = store_rows(&r, &ix);
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
    use crate::host::f16::{to_f16, to_f32};

    /// The regrouping is what its words say: blade j of item `4s + l` in lane `4l + s` after
    /// [`load_blades`], and [`store_rows`] takes those vectors back to the rows.
    #[test]
    fn the_regrouping_is_blade_major_and_its_inverse() {
        if !super::super::host_cl3::has_avx512bw(crate::host::simd::Level::Avx512) {
            // A CPU without AVX-512BW never runs these blocks (this project's CI has it).
            return;
        }
        // Half 8m + j of the block (item m, blade j) is the float16 of 8m + j + 1, exact.
        let halves: Vec<u16> = (0..128).map(|h| to_f16((h + 1) as f32)).collect();
        let words: Vec<f32> = halves
            .chunks(2)
            .map(|p| f32::from_bits(u32::from(p[0]) | (u32::from(p[1]) << 16)))
            .collect();
        let (mut blades, mut rows) = ([[0f32; 16]; W], [[0f32; 16]; 4]);
        // SAFETY: AVX-512F and BW were found above; every store writes 16 words of its array.
        #[allow(unsafe_code)]
        unsafe {
            let ix = Indices::new();
            let v = load_blades(&words, 0, &ix);
            for (j, b) in blades.iter_mut().enumerate() {
                _mm512_storeu_ps(b.as_mut_ptr(), v[j]);
            }
            for (r, v) in rows.iter_mut().zip(store_rows(&v, &ix)) {
                _mm512_storeu_ps(r.as_mut_ptr(), _mm512_castsi512_ps(v));
            }
        }
        for (j, lanes) in blades.iter().enumerate() {
            for (lane, &got) in lanes.iter().enumerate() {
                let m = 4 * (lane % 4) + lane / 4;
                let want = to_f32(halves[8 * m + j]);
                assert_eq!(got, want, "blade {j} lane {lane} (item {m})");
            }
        }
        let back: Vec<u32> = rows.iter().flatten().map(|w| w.to_bits()).collect();
        let want: Vec<u32> = words.iter().map(|w| w.to_bits()).collect();
        assert_eq!(back, want);
    }
}
