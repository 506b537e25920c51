//! The Cl(3,0) geometric product on the host, as one chain per output blade:
//! `a[0]*b[k] ± a[1]*b[1^k] ± … ± a[7]*b[7^k]` (i in order, the Cayley table's sign).
//!
//! Two kernels compute exactly that chain. The static shader `shaders/geometric_cl3.wgsl`
//! writes it as one expression with no `fma` (every product rounded, then the sums left to
//! right): [`Cl3Product`] is its host twin, so the host and Mesa's lavapipe/llvmpipe agree
//! bit for bit. (A driver that contracts `x*y + z` into one fused operation, which SPIR-V
//! allows and hardware GPUs may do, rounds that shader differently: a property of the shader
//! on that driver, which the host cannot know.) The generated Cl(3,0) geometric product
//! (`ga::codegen`) writes the same chain as `fma` steps, which `ga::host` runs through
//! [`run_chains`] with the devices' `fma` rounding.
//!
//! On AVX2 a block of 8 items is loaded as 8 rows, transposed in registers (so each blade of
//! the 8 items is one vector), the 8 chains run on whole vectors, and the result is
//! transposed back (`ga::host_cl3_avx2`): three 8 x 8 transposes and 64 multiply-adds per 8
//! items, the rest of the time is memory traffic. Elsewhere the same chains run one item at a
//! time. Rows in float16 storage ([`Storage::F16`]) are widened as they are loaded (F16C, or
//! the scalar conversion) and rounded once as they are stored, with no float32 copy of the
//! rows in memory: half the bytes of float32. float64 rows ([`Storage::F64`]) run the same
//! chains in float64, four items a block: the steps and order of the generated float64
//! kernel, so its bits. Outputs of calls larger than the caches keep are written with
//! non-temporal stores (`host::simd::Stores`, see [`streams`]).

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::dtype::{read_f64, write_f64};
use crate::host::arith::Real;
use crate::kernel::{FmaMode, HostImpl};

use rayon::prelude::*;

use super::cl3_table::{NEG, W};
use super::host_program::Step;
#[cfg(target_arch = "x86_64")]
use super::host_cl3_avx2 as avx2;
#[cfg(target_arch = "x86_64")]
use super::host_cl3_avx512 as avx512;

/// Items computed together on AVX2 (one vector per blade).
#[cfg(target_arch = "x86_64")]
const LANES: usize = 8;
/// Items per rayon task: 64 KiB of operands and output, a few L2-sized pieces per thread.
const GRAIN: usize = 2048;
/// Whether `steps` are exactly the Cl(3,0) chains [`run_chains`] computes: output blade k
/// from `a[i] * b[i ^ k]`, i = 0..8 in order, signs of the Cayley table, the first a product.
pub fn is_cl3_chain(steps: &[Step]) -> bool {
    steps.len() == W * W
        && steps.iter().enumerate().all(|(n, s)| {
            let (k, i) = (n / W, n % W);
            (s.k as usize, s.i as usize, s.j as usize, s.neg, s.first)
                == (k, i, i ^ k, NEG[k][i], i == 0)
        })
}

/// The Cl(3,0) geometric product of the static shader on the host.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cl3Product;

impl HostImpl for Cl3Product {
    /// Runs items `range` (inputs: `a` and `b`, 8 words per item) into `output`.
    fn run(&self, inputs: &[&[f32]], range: Range<usize>, output: &mut [f32]) {
        assert_eq!(output.len(), range.len() * W, "output of the chunk's items");
        let a = &inputs[0][range.start * W..range.end * W];
        let b = &inputs[1][range.start * W..range.end * W];
        run_chains(a, b, output, Storage::F32, false, streams(inputs[0].len().saturating_mul(12)));
    }

    /// The static shader has no `fma`: unchanged.
    fn with_fma(&self, _mode: FmaMode) -> Arc<dyn HostImpl> {
        Arc::new(*self)
    }

    fn splits(&self, items: usize) -> bool {
        chains_split(items)
    }
}

/// Whether a call that moves `bytes` (its operands and its output) streams its output past
/// the caches (a non-temporal store saves the read of every output line before it is
/// written, a third of a product's traffic): past the size [`stream_past_bytes`] measured.
/// A call within the cores' own caches never streams, and never waits for that measurement.
pub fn streams(bytes: usize) -> bool {
    bytes > crate::host::cpu::private_cache_bytes() && bytes > stream_past_bytes()
}

/// The size past which outputs stream, once known in this process: taken from the host
/// device's calibration ([`use_stream_past`]) or measured by the first call that needs it.
static STREAM_PAST: OnceLock<usize> = OnceLock::new();

/// The call size past which outputs stream, decided once per process by measurement
/// ([`cached_past`]): the cache a CPU reports is not always the one a process gets. The
/// 2-core Xeon VM of `docs/benchmarks.md` reports 480 MiB of L3, yet rewriting a buffer
/// with ordinary stores fell there from about 27 GB/s at 16 MiB to 4-8 GB/s at 32 MiB,
/// while streamed stores held about 23 GB/s. The host device's calibration measures it
/// (and its cache keeps it), so a process with a calibrated host device does not pay for
/// the probe in a call; without one, the first call past the private caches does.
pub fn stream_past_bytes() -> usize {
    *STREAM_PAST.get_or_init(|| {
        let (private, last) = (
            crate::host::cpu::private_cache_bytes(),
            crate::host::cpu::last_level_cache_bytes(),
        );
        let past = cached_past(private, last);
        log::info!(
            "host Cl(3,0) products stream the output of calls over {} KiB (measured; private \
             caches {} KiB, last-level cache {} KiB)",
            past >> 10,
            private >> 10,
            last >> 10
        );
        past
    })
}

/// Takes `bytes`, the size a calibration of the host device measured (now or in an earlier
/// process, from its cache), as the size past which outputs stream, unless this process
/// already decided.
pub fn use_stream_past(bytes: usize) {
    let _ = STREAM_PAST.set(bytes);
}

/// Most bytes a float32 product probed at doubling sizes moves: past them the probe would
/// cost more than a call, and the reported last-level cache is taken at its word.
const PROBE_MOST_BYTES: usize = 64 << 20;

/// The largest call size, from `private` (the cores' own caches) up to `last` (the
/// last-level cache), at which a float32 product's output is still better cached: the
/// product is run at doubling sizes from twice `private`, each repeated on the same rows as
/// a caller's `out=` calls repeat it (so ordinary stores find the output wherever the caches
/// kept it), the best of three runs each way after a warm-up; the first size at which its
/// output streamed runs faster ends the search (the size before it is returned). `last` when
/// it never does up to [`PROBE_MOST_BYTES`] or half of `last`. Only x86-64 streams. Once
/// per process, it adds 40-90 ms to the first call that asks on the 2-core Xeon VM (three
/// sizes, each written and run eight times); there it returned 4, 8 or 16 MiB from process
/// to process, where cached and streamed stores cost about the same.
fn cached_past(private: usize, last: usize) -> usize {
    if !cfg!(target_arch = "x86_64") {
        return last;
    }
    let mut bytes = private.saturating_mul(2);
    let mut cached_at = private;
    while bytes <= PROBE_MOST_BYTES.min(last / 2) {
        let words = (bytes / (3 * 4)).max(GRAIN * W) / W * W;
        let (a, b) = (vec![0.5f32; words], vec![0.25f32; words]);
        let mut out = vec![0.0f32; words];
        let mut best = |stream: bool| {
            (0..4)
                .map(|_| {
                    let started = Instant::now();
                    run_chains(&a, &b, &mut out, Storage::F32, true, stream);
                    started.elapsed()
                })
                .skip(1)
                .min()
                .unwrap_or_default()
        };
        let cached = best(false);
        if best(true) < cached {
            return cached_at;
        }
        cached_at = bytes;
        bytes = bytes.saturating_mul(2);
    }
    last
}

/// How the rows of [`run_chains`] are stored: float32 (8 words an item), float64 (16 words
/// an item, the chains computed in float64), or float16 storage (8 values two to a word, 4
/// words an item; see `crate::dtype`), each value widened to float32 as it is loaded and each
/// result rounded once to float16 (to nearest, ties to even) as it is stored, with the float32
/// chains between: the bits of the float32 chains on the widened rows, rounded once, as the
/// WGSL float16 kernel computes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// float32 values, one to a word.
    F32,
    /// float16 values, two to a word.
    F16,
    /// float64 values, two words each.
    F64,
}

impl Storage {
    /// Words per item.
    pub(super) const fn words(self) -> usize {
        match self {
            Storage::F32 => W,
            Storage::F16 => W / 2,
            Storage::F64 => 2 * W,
        }
    }

    /// Words per block of the AVX2 kernels (`host_cl3_avx2`): 8 items, or 4 in float64.
    #[cfg(target_arch = "x86_64")]
    const fn block_words(self) -> usize {
        match self {
            Storage::F64 => 4 * self.words(),
            _ => LANES * self.words(),
        }
    }
}

/// `out[n] = a[n] b[n]` for rows of 8 values (stored as `storage` says) on the current rayon
/// pool, each output blade one chain in Cayley order: products and sums rounded apart, or
/// (`fused`) the chain's further terms as fused multiply-adds; `stream` writes whole blocks
/// with non-temporal stores (same words, see [`streams`]).
pub fn run_chains(a: &[f32], b: &[f32], out: &mut [f32], storage: Storage, fused: bool, stream: bool) {
    let words = storage.words();
    // The first few items on their own, up to the output's first 64-byte line when whole
    // items reach one: the pieces after it then start on lines (GRAIN items are whole
    // lines), and the float16 blocks store whole lines. numpy's large arrays start 16 bytes
    // into a line; in float16 three items (48 bytes) reach the next one, while float32 and
    // float64 items (32 and 64 bytes) never do and keep their pieces as they were.
    let head = line_items(out.as_ptr() as usize, words * 4).min(out.len() / words) * words;
    let (out_head, out) = out.split_at_mut(head);
    piece(&a[..head], &b[..head], out_head, storage, fused, stream);
    out.par_chunks_mut(GRAIN * words)
        .zip(a[head..].par_chunks(GRAIN * words))
        .zip(b[head..].par_chunks(GRAIN * words))
        .for_each(|((out, a), b)| piece(a, b, out, storage, fused, stream));
}

/// Whether [`run_chains`] over `items` items may share them among the pool's threads: past
/// one piece (a few items may run before the pieces, which then still make one).
pub(super) fn chains_split(items: usize) -> bool {
    items > GRAIN
}

/// Items of `item_bytes` from address `at` to the first that starts a 64-byte line: 0 when
/// `at` does, or when no whole number of items reaches one.
fn line_items(at: usize, item_bytes: usize) -> usize {
    (0..64).find(|k| (at + k * item_bytes).is_multiple_of(64)).unwrap_or(0)
}

/// One piece of [`run_chains`]: its blocks at the widest level there is, the rest item by
/// item.
fn piece(a: &[f32], b: &[f32], out: &mut [f32], storage: Storage, fused: bool, stream: bool) {
    // float16 rows at the AVX-512BW level: 16 items a block (`host_cl3_avx512`), the
    // last few too; otherwise the AVX2 blocks and `one_by_one` below.
    #[cfg(target_arch = "x86_64")]
    let (a, b, out) = {
        let wide = storage == Storage::F16 && has_avx512bw(crate::host::simd::dispatched());
        let whole = if wide { out.len() / avx512::BLOCK * avx512::BLOCK } else { 0 };
        let (o, rest) = out.split_at_mut(whole);
        // SAFETY: `has_avx512bw` is true only at the AVX-512F level on a CPU it
        // found AVX-512BW and VL on (with AVX2, FMA and F16C, which that level and
        // `has_f16c` imply): all `blocks_f16` and `last_f16` need; their accesses are in
        // bounds.
        #[allow(unsafe_code)]
        match (wide, fused) {
            (false, _) => {}
            (true, true) => unsafe {
                avx512::blocks_f16::<true>(&a[..whole], &b[..whole], o, stream);
                avx512::last_f16::<true>(&a[whole..], &b[whole..], rest);
            },
            (true, false) => unsafe {
                avx512::blocks_f16::<false>(&a[..whole], &b[..whole], o, stream);
                avx512::last_f16::<false>(&a[whole..], &b[whole..], rest);
            },
        }
        let done = if wide { out.len() } else { 0 };
        (&a[done..], &b[done..], &mut out[done..])
    };
    #[cfg(target_arch = "x86_64")]
    let whole = {
        let level = crate::host::simd::dispatched();
        let block = storage.block_words();
        let whole = out.len() / block * block;
        let (a, b, o) = (&a[..whole], &b[..whole], &mut out[..whole]);
        let vl = has_avx512vl(level);
        // SAFETY (every call below): `has_f16c` is true only at a level whose AVX2
        // and FMA `is_x86_feature_detected!` found, on a CPU it found F16C on;
        // `Level::has_avx2` only after it found AVX2 and FMA; `has_avx512vl` only at
        // the AVX-512F level on a CPU it found AVX-512VL on: all that each
        // target-feature function needs. Their memory accesses are in bounds (see
        // `avx2::blocks`).
        #[allow(unsafe_code)]
        match (storage, fused) {
            (Storage::F16, _) if !crate::host::f16::has_f16c(level) => 0,
            (Storage::F32 | Storage::F64, _) if !level.has_avx2() => 0,
            (Storage::F16, true) if vl => unsafe { avx2::blocks_f16_vl::<true>(a, b, o, stream); whole },
            (Storage::F16, false) if vl => unsafe { avx2::blocks_f16_vl::<false>(a, b, o, stream); whole },
            (Storage::F16, true) => unsafe { avx2::blocks_f16::<true>(a, b, o, stream); whole },
            (Storage::F16, false) => unsafe { avx2::blocks_f16::<false>(a, b, o, stream); whole },
            (Storage::F32, true) if vl => unsafe { avx2::blocks_vl::<true>(a, b, o, stream); whole },
            (Storage::F32, false) if vl => unsafe { avx2::blocks_vl::<false>(a, b, o, stream); whole },
            (Storage::F32, true) => unsafe { avx2::blocks::<true>(a, b, o, stream); whole },
            (Storage::F32, false) => unsafe { avx2::blocks::<false>(a, b, o, stream); whole },
            (Storage::F64, true) if vl => unsafe { avx2::blocks_f64_vl::<true>(a, b, o, stream); whole },
            (Storage::F64, false) if vl => unsafe { avx2::blocks_f64_vl::<false>(a, b, o, stream); whole },
            (Storage::F64, true) => unsafe { avx2::blocks_f64::<true>(a, b, o, stream); whole },
            (Storage::F64, false) => unsafe { avx2::blocks_f64::<false>(a, b, o, stream); whole },
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let whole = 0;
    let (a, b, out) = (&a[whole..], &b[whole..], &mut out[whole..]);
    #[cfg(target_arch = "x86_64")]
    if crate::host::simd::dispatched().has_avx2() {
        // SAFETY: `Level::has_avx2` is true only after AVX2 and FMA were detected.
        #[allow(unsafe_code)]
        unsafe {
            one_by_one_fma(a, b, out, storage, fused)
        };
        return;
    }
    one_by_one_as(a, b, out, storage, fused);
}

/// [`one_by_one`] compiled with FMA: each `mul_add` one instruction rather than a call of
/// the runtime's `fmaf` (the same correctly rounded result). Every chunk of numpy rows
/// has a few items on their own (float16: three before the output's first line, and the
/// last ones): their calls were 1.5% of a 2^20-item float16 product's CPU time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn one_by_one_fma(a: &[f32], b: &[f32], out: &mut [f32], storage: Storage, fused: bool) {
    one_by_one_as(a, b, out, storage, fused);
}

/// [`one_by_one`] in the fma mode `fused` says.
#[inline(always)]
fn one_by_one_as(a: &[f32], b: &[f32], out: &mut [f32], storage: Storage, fused: bool) {
    if fused {
        one_by_one::<true>(a, b, out, storage);
    } else {
        one_by_one::<false>(a, b, out, storage);
    }
}

/// Whether the blocks run compiled for AVX-512VL at `level` (its 32 vector registers): at
/// the AVX-512F level, on a CPU that has VL.
#[cfg(target_arch = "x86_64")]
fn has_avx512vl(level: crate::host::simd::Level) -> bool {
    level == crate::host::simd::Level::Avx512 && std::arch::is_x86_feature_detected!("avx512vl")
}

/// Whether the float16 blocks run 16 items at a time (`host_cl3_avx512`) at `level`: at
/// the AVX-512F level, on a CPU with AVX-512BW and VL (and F16C).
#[cfg(target_arch = "x86_64")]
pub(super) fn has_avx512bw(level: crate::host::simd::Level) -> bool {
    has_avx512vl(level)
        && std::arch::is_x86_feature_detected!("avx512bw")
        && crate::host::f16::has_f16c(level)
}

/// The chains of one item (the portable path, and the last items of a task), in `T`.
#[inline(always)]
fn item<T: Real, const FUSED: bool>(x: &[T; W], y: &[T; W]) -> [T; W] {
    std::array::from_fn(|k| {
        let mut acc = x[0] * y[k];
        for i in 1..W {
            let (xi, yj) = (if NEG[k][i] { -x[i] } else { x[i] }, y[i ^ k]);
            acc = if FUSED {
                T::madd::<true>(xi, yj, acc)
            } else {
                acc + xi * yj
            };
        }
        acc
    })
}

/// The chains of each item in turn, its values read and written as `storage` says (float16
/// through the scalar conversions, the bits of F16C's).
#[inline(always)]
fn one_by_one<const FUSED: bool>(a: &[f32], b: &[f32], out: &mut [f32], storage: Storage) {
    use crate::host::f16::{to_f16, to_f32};
    let words = storage.words();
    for ((o, x), y) in out
        .chunks_exact_mut(words)
        .zip(a.chunks_exact(words))
        .zip(b.chunks_exact(words))
    {
        match storage {
            Storage::F32 => {
                let (x, y) = (x.try_into(), y.try_into());
                if let (Ok(x), Ok(y)) = (x, y) {
                    o.copy_from_slice(&item::<f32, FUSED>(x, y));
                }
            }
            Storage::F64 => {
                let wide = |v: &[f32]| -> [f64; W] { std::array::from_fn(|k| read_f64(v, k)) };
                let r = item::<f64, FUSED>(&wide(x), &wide(y));
                r.iter().enumerate().for_each(|(k, &v)| write_f64(o, k, v));
            }
            Storage::F16 => {
                let wide = |h: &[f32]| -> [f32; W] {
                    let h: &[u16] = bytemuck::cast_slice(h);
                    std::array::from_fn(|k| to_f32(h[k]))
                };
                let r = item::<f32, FUSED>(&wide(x), &wide(y));
                let o: &mut [u16] = bytemuck::cast_slice_mut(o);
                o.iter_mut().zip(r).for_each(|(h, v)| *h = to_f16(v));
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

    /// The probed size is the last-level cache's, or a size from the private caches' up to
    /// half of it, doubling from them; a cache no larger than twice the private ones is not
    /// probed.
    #[test]
    fn the_streaming_size_is_probed_between_the_private_and_last_level_caches() {
        assert_eq!(cached_past(4 << 20, 6 << 20), 6 << 20);
        let (private, last) = (64 << 10, 4 << 20);
        let past = cached_past(private, last);
        let doublings = (0..=5).map(|k| private << k).collect::<Vec<usize>>();
        assert!(past == last || doublings.contains(&past), "{past}");
    }

    #[test]
    fn the_generated_cl3_product_is_these_chains() {
        use crate::ga::algebra::Algebra;
        use crate::ga::host_program::Program;
        use crate::ga::operation::Operation;
        let Program::Products(stages) = Program::new(&Algebra::CL3, Operation::Geometric) else {
            panic!("a product");
        };
        assert!(is_cl3_chain(&stages[0].steps));
        let Program::Products(outer) = Program::new(&Algebra::CL3, Operation::Outer) else {
            panic!("a product");
        };
        assert!(!is_cl3_chain(&outer[0].steps));
    }

    /// The head before the pieces: the items to the output's next 64-byte line, where whole
    /// items reach one (numpy's 16 bytes into a line: 3 float16 items, no float32 or float64
    /// count).
    #[test]
    fn the_head_reaches_the_first_line_whole_items_reach() {
        assert_eq!(line_items(0x1000, 16), 0);
        assert_eq!(line_items(0x1010, 16), 3);
        assert_eq!(line_items(0x1030, 16), 1);
        assert_eq!(line_items(0x1004, 16), 0);
        assert_eq!(line_items(0x1010, 32), 0);
        assert_eq!(line_items(0x1020, 32), 1);
        assert_eq!(line_items(0x1010, 64), 0);
    }

    #[test]
    fn odd_counts_match_one_item_at_a_time() {
        let n = 2 * GRAIN + 13;
        let a: Vec<f32> = (0..n * W).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..n * W).map(|i| (i as f32 * 0.91).cos()).collect();
        let mut out = vec![0.0; (n - 5) * W];
        Cl3Product.run(&[&a, &b], 5..n, &mut out);
        let mut fused = vec![0.0; (n - 5) * W];
        run_chains(&a[5 * W..], &b[5 * W..], &mut fused, Storage::F32, true, false);
        // Streamed stores write the same words, at either alignment of the output.
        for offset in [0, 4] {
            let mut buf = vec![0.0f32; (n - 5) * W + offset];
            let streamed = &mut buf[offset..];
            run_chains(&a[5 * W..], &b[5 * W..], streamed, Storage::F32, true, true);
            assert!(streamed.iter().zip(&fused).all(|(s, f)| s.to_bits() == f.to_bits()));
        }
        for item in 5..n {
            let (x, y) = (&a[item * W..][..W], &b[item * W..][..W]);
            for k in 0..W {
                let (mut acc, mut chain) = (x[0] * y[k], x[0] * y[k]);
                for i in 1..W {
                    let p = x[i] * y[i ^ k];
                    acc = if NEG[k][i] { acc - p } else { acc + p };
                    let xi = if NEG[k][i] { -x[i] } else { x[i] };
                    chain = xi.mul_add(y[i ^ k], chain);
                }
                assert_eq!(out[(item - 5) * W + k].to_bits(), acc.to_bits());
                assert_eq!(fused[(item - 5) * W + k].to_bits(), chain.to_bits());
            }
        }
    }

    /// Every count of float16 items a piece can end with (fewer than a block of the
    /// AVX-512 level, run as one block with the missing items zero, or item by item below
    /// it), after 0 to 2 whole blocks: the bits of the item-by-item chains, both `fma`
    /// modes, the words past the piece untouched.
    #[test]
    fn a_float16_pieces_last_items_are_the_item_by_item_bits() {
        use crate::host::f16::narrow;
        use crate::host::simd::Level;
        let words = Storage::F16.words();
        let most = 2 * 16 + 15;
        let halves = |seed| {
            let mut v = crate::sample::uniform_f32(most * W, seed);
            for (i, x) in v.iter_mut().enumerate() {
                *x *= [1.0, 300.0, 1.0 / 4096.0][i / W % 3];
            }
            let mut h = vec![0.0f32; most * words];
            narrow(Level::Portable, &v, &mut h);
            h
        };
        let (a, b) = (halves(5), halves(6));
        for fused in [false, true] {
            for n in 0..=most {
                let (a, b) = (&a[..n * words], &b[..n * words]);
                let mut want = vec![0.0f32; n * words];
                one_by_one_as(a, b, &mut want, Storage::F16, fused);
                let mut got = vec![-1.0f32; n * words + 4];
                piece(a, b, &mut got[..n * words], Storage::F16, fused, false);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got[..n * words]), bits(&want), "{n} items, fused {fused}");
                assert!(got[n * words..].iter().all(|&x| x == -1.0), "{n} items");
            }
        }
    }

    /// float16 rows: the float32 chains of the widened rows, rounded once (the bits of the
    /// tile-by-tile conversion the host ran before and of the WGSL float16 kernel), at the
    /// detected level (the AVX-512 blocks where the CPU has AVX-512BW), AVX2 and the portable
    /// one, both `fma` modes, streamed or not, at an odd count and at 4-, 16- and 64-byte
    /// alignments of the output; the
    /// float32 chains at AVX2 give the bits of the detected level's.
    #[test]
    fn float16_rows_round_the_float32_chains_of_the_widened_rows_once() {
        use crate::host::f16::{narrow, widen};
        use crate::host::simd::{force_level, Level};
        let n = 2 * GRAIN + 13;
        let values = |seed| {
            let mut v = crate::sample::uniform_f32(n * W, seed);
            // Rows whose products pass float16's range, fall in its subnormals, or neither.
            for (i, x) in v.iter_mut().enumerate() {
                *x *= [1.0, 300.0, 1.0 / 4096.0][i / W % 3];
            }
            let mut words = vec![0.0f32; n * W / 2];
            narrow(Level::Portable, &v, &mut words);
            words
        };
        let (a, b) = (values(3), values(4));
        let wide = |h: &[f32]| {
            let mut v = vec![0.0f32; 2 * h.len()];
            widen(Level::Portable, h, &mut v);
            v
        };
        let (wa, wb) = (wide(&a), wide(&b));
        let bits = |h: &[f32]| -> Vec<u16> { bytemuck::cast_slice(h).to_vec() };
        for fused in [false, true] {
            let mut chains = vec![0.0f32; n * W];
            run_chains(&wa, &wb, &mut chains, Storage::F32, fused, false);
            force_level(Some(Level::Avx2));
            let mut narrower = vec![0.0f32; n * W];
            run_chains(&wa, &wb, &mut narrower, Storage::F32, fused, true);
            force_level(None);
            let f32_bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(f32_bits(&narrower), f32_bits(&chains), "float32 at AVX2, fused {fused}");
            let mut expected = vec![0.0f32; n * W / 2];
            narrow(Level::Portable, &chains, &mut expected);
            // Offset 16 stands for "64-byte aligned" (the AVX-512 blocks' widest stores).
            for (level, stream, offset) in [
                (None, false, 0),
                (None, true, 16),
                (None, false, 16),
                (None, true, 1),
                (None, true, 4),
                (Some(Level::Avx2), true, 0),
                (Some(Level::Avx2), false, 4),
                (Some(Level::Portable), false, 0),
            ] {
                force_level(level);
                let mut buf = vec![0.0f32; n * W / 2 + 16];
                let offset = match offset {
                    16 => (64 - buf.as_ptr() as usize % 64) % 64 / 4,
                    o => o,
                };
                let buf = &mut buf[..n * W / 2 + offset];
                run_chains(&a, &b, &mut buf[offset..], Storage::F16, fused, stream);
                force_level(None);
                assert_eq!(
                    bits(&buf[offset..]),
                    bits(&expected),
                    "fused {fused}, level {level:?}, stream {stream}, offset {offset}"
                );
            }
        }
        let halves: Vec<u16> = bits(&a);
        assert!(halves.iter().any(|&h| h & 0x7c00 == 0 && h & 0x3ff != 0), "subnormal rows");
    }
}
