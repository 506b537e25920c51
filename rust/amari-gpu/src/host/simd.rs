//! Run-time SIMD dispatch: one binary, the widest vector unit the CPU has. A kernel body
//! is a [`Task`] whose `run` is `#[inline(always)]`; [`dispatch`] calls it through a
//! function compiled for AVX-512 or AVX2+FMA when the CPU has them, so the body (and every
//! `#[inline(always)]` helper it calls) is compiled for that target: `f32::mul_add` becomes
//! one `vfmadd` and the loops across items vectorise to 8 or 16 lanes. Without FMA hardware
//! the portable build runs `mul_add` as the correctly rounded libm call: slower, same bits.
//! On aarch64 NEON (and its fused multiply-add) is baseline, so no dispatch is needed.
//!
//! `AMARI_GPU_SIMD` (`avx2` or `portable`) caps the x86-64 level below what the CPU has, so
//! that the narrower kernels can be run and compared on a wider CPU; it never raises it.

use std::sync::OnceLock;

/// The instruction set the host kernels run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Portable code (SSE2 on x86-64): `mul_add` is a library call.
    Portable,
    /// x86-64 with AVX2 and FMA.
    Avx2,
    /// x86-64 with AVX-512F (and AVX2, FMA).
    Avx512,
    /// aarch64 with NEON.
    Neon,
}

impl Level {
    /// The level of this CPU (detected once), capped by `AMARI_GPU_SIMD` when it names a
    /// lower x86-64 level.
    pub fn detect() -> Level {
        static LEVEL: OnceLock<Level> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            let hardware = Level::hardware();
            match std::env::var(SIMD_ENV) {
                Ok(name) => hardware.capped(&name).unwrap_or_else(|e| {
                    log::warn!(target: "amari_gpu", "{e}");
                    hardware
                }),
                Err(_) => hardware,
            }
        })
    }

    /// The widest level the CPU has.
    fn hardware() -> Level {
        {
            #[cfg(target_arch = "x86_64")]
            {
                let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
                if avx2 && is_x86_feature_detected!("avx512f") {
                    return Level::Avx512;
                }
                if avx2 {
                    return Level::Avx2;
                }
            }
            #[cfg(target_arch = "aarch64")]
            {
                return Level::Neon;
            }
            #[allow(unreachable_code)]
            Level::Portable
        }
    }

    /// This level lowered to the one called `name` (`avx2` or `portable` on x86-64; the
    /// level's own name anywhere), never raised above it.
    fn capped(self, name: &str) -> Result<Level, String> {
        let asked = match name.trim() {
            "avx512f" | "avx512" => Level::Avx512,
            "avx2" => Level::Avx2,
            "portable" => Level::Portable,
            "neon" => Level::Neon,
            other => {
                return Err(format!(
                    "{SIMD_ENV}: expected one of 'avx512f', 'avx2', 'portable', 'neon', got \
                     '{other}'; running at {}",
                    self.name()
                ))
            }
        };
        let rank = |l: Level| match l {
            Level::Portable => 0,
            Level::Avx2 => 1,
            Level::Avx512 => 2,
            Level::Neon => 1,
        };
        let same_family = matches!(
            (self, asked),
            (Level::Neon, Level::Neon | Level::Portable)
                | (
                    Level::Portable | Level::Avx2 | Level::Avx512,
                    Level::Portable | Level::Avx2 | Level::Avx512
                )
        );
        if !same_family {
            return Err(format!(
                "{SIMD_ENV}: '{name}' is not a level of this CPU; running at {}",
                self.name()
            ));
        }
        Ok(if rank(asked) < rank(self) {
            asked
        } else {
            self
        })
    }

    /// Every level this CPU can run, narrowest first, up to the detected one: the kernels
    /// of each are tested against each other.
    pub fn available() -> Vec<Level> {
        let top = Level::detect();
        [Level::Portable, Level::Avx2, Level::Avx512, Level::Neon]
            .into_iter()
            .filter(|&l| l == top || top.capped(l.name()) == Ok(l))
            .collect()
    }

    /// Short name: "avx512f", "avx2", "neon" or "portable".
    pub fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512f",
            Level::Neon => "neon",
        }
    }

    /// Whether the CPU has AVX2 and FMA (x86-64 levels `Avx2` and `Avx512`, which are only
    /// returned after `is_x86_feature_detected!` found both): what the hand-written AVX2
    /// micro-kernels (`#[target_feature(enable = "avx2,fma")]`) need.
    pub fn has_avx2(self) -> bool {
        matches!(self, Level::Avx2 | Level::Avx512)
    }

    /// This level, or the widest below it that the CPU (as capped by `AMARI_GPU_SIMD`) has:
    /// never a level it lacks. The one rule for running a level other than the detected one.
    pub fn at_most_detected(self) -> Level {
        let cpu = Level::detect();
        match self {
            Level::Avx512 if cpu == Level::Avx512 => Level::Avx512,
            Level::Avx512 | Level::Avx2 if cpu.has_avx2() => Level::Avx2,
            Level::Neon if cpu == Level::Neon => Level::Neon,
            _ => Level::Portable,
        }
    }

    /// Whether `f32::mul_add` is one instruction at this level.
    pub fn has_fma(self) -> bool {
        self != Level::Portable
    }
}

/// The environment variable that caps the SIMD level.
pub const SIMD_ENV: &str = "AMARI_GPU_SIMD";

/// A kernel body to run at the detected SIMD level. Implementations mark `run`
/// `#[inline(always)]` so it is compiled inside the target-feature function.
pub trait Task {
    /// What the body returns.
    type Output;
    /// The body.
    fn run(self) -> Self::Output;
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn on_avx2<T: Task>(task: T) -> T::Output {
    task.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn on_avx512<T: Task>(task: T) -> T::Output {
    task.run()
}

/// A narrower level than the CPU's that [`dispatch`] runs at, for tests: 0 none, else 1 +
/// the rank of the level (portable 0, AVX2 1). Only ever lowers the level, so it never runs
/// code the CPU lacks.
#[cfg(test)]
static FORCED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Makes [`dispatch`] run at `level` (`Portable` or `Avx2`) where the CPU has a wider one,
/// or at the detected level again (`None`): tests compare the levels' bits on one CPU.
#[cfg(test)]
pub(crate) fn force_level(level: Option<Level>) {
    let code = match level {
        None => 0,
        Some(Level::Portable) => 1,
        Some(_) => 2,
    };
    FORCED.store(code, std::sync::atomic::Ordering::SeqCst);
}

/// The level [`dispatch`] runs at: the detected one, lowered by a test's [`force_level`].
#[cfg(target_arch = "x86_64")]
#[inline]
fn dispatched_level() -> Level {
    let level = Level::detect();
    #[cfg(test)]
    match FORCED.load(std::sync::atomic::Ordering::SeqCst) {
        1 => return Level::Portable,
        2 if level == Level::Avx512 => return Level::Avx2,
        _ => {}
    }
    level
}

/// The level [`dispatch`] runs at: code that picks its own instructions (`host::f16`'s
/// conversions) follows it, so a test's forced level reaches them too.
#[inline]
pub fn dispatched() -> Level {
    #[cfg(target_arch = "x86_64")]
    let level = dispatched_level();
    #[cfg(not(target_arch = "x86_64"))]
    let level = Level::detect();
    level
}

/// Runs `task` compiled for the widest instruction set this CPU has.
#[inline]
pub fn dispatch<T: Task>(task: T) -> T::Output {
    dispatch_at(dispatched(), task)
}

/// Runs `task` compiled for `level`, or for this CPU's level when `level` is wider than it
/// has (so tests can compare the levels a CPU has, and no level it lacks ever runs).
#[inline]
pub fn dispatch_at<T: Task>(level: Level, task: T) -> T::Output {
    #[cfg(target_arch = "x86_64")]
    match level.at_most_detected() {
        // SAFETY: `on_avx512` only needs the CPU to have AVX-512F, AVX2 and FMA, which
        // `Level::detect` established with `is_x86_feature_detected!` before returning
        // `Avx512` (`dispatched_level` and `dispatch_at` only ever lower it); the task itself is
        // safe code.
        #[allow(unsafe_code)]
        Level::Avx512 => return unsafe { on_avx512(task) },
        // SAFETY: as above, `Avx2` is only returned when AVX2 and FMA were detected.
        #[allow(unsafe_code)]
        Level::Avx2 => return unsafe { on_avx2(task) },
        _ => {}
    }
    task.run()
}

/// Asks for the cache lines of `x[at..at + words]` (a hint, no load), if they are inside
/// `x`; nothing where the CPU has no such hint here.
#[inline(always)]
pub(crate) fn prefetch(x: &[f32], at: usize, words: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(rows) = x.get(at..at + words) {
        for line in rows.chunks(16) {
            // SAFETY: `_mm_prefetch` (SSE, baseline on x86-64) only hints the cache; the
            // address is inside `x`.
            #[allow(unsafe_code)]
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    line.as_ptr().cast(),
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, at, words);
}

/// How a block kernel writes its output vectors (the one place the host kernels stream
/// from, `ga::host_cl3*` and `ga::map_groups`): ordinary stores, or non-temporal ones for an output larger than
/// the last-level cache, which saves the read of every output line before it is written (a
/// third of a two-operand product's traffic). Those need their address aligned to their
/// width: each vector (stored at a multiple of its width from the start of `out`) goes in
/// the widest pieces, 64, 32 or 16 bytes, that `out`'s alignment allows; below 16 bytes (a
/// view one float in) ordinary stores. [`Stores::finish`] fences them before the chunk ends.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stores {
    /// Bytes per non-temporal store (16, 32 or 64), or 0 for ordinary stores.
    piece: usize,
}

#[cfg(target_arch = "x86_64")]
impl Stores {
    /// Stores for `out`: non-temporal when `stream`, in the pieces its alignment allows.
    pub fn new(out: &[f32], stream: bool) -> Stores {
        let at = out.as_ptr() as usize;
        let piece = [64, 32, 16]
            .into_iter()
            .find(|&p| at.is_multiple_of(p))
            .filter(|_| stream)
            .unwrap_or(0);
        Stores { piece }
    }

    /// Whether the stores are non-temporal.
    pub fn streaming(self) -> bool {
        self.piece != 0
    }

    /// Whether every `width`-byte vector stored at a multiple of `width` bytes from the start
    /// of `out` goes as one non-temporal store: a block loop can then stream each vector
    /// itself, decided once outside the loop rather than per store by [`Stores::m512`].
    pub fn whole(self, width: usize) -> bool {
        self.piece >= width
    }

    /// Where and in what pieces a `width`-byte vector goes non-temporally at `dst[at..]`
    /// (bounds-checked): None for an ordinary store.
    #[inline(always)]
    fn pieces(self, dst: &mut [f32], at: usize, width: usize) -> Option<(*mut f32, usize)> {
        let dst = &mut dst[at..at + width / 4];
        let p = dst.as_mut_ptr();
        let piece = self.piece.min(width);
        // Pieces and widths are powers of two: a mask, not `is_multiple_of`, whose division
        // the compiler keeps (a 64-bit `div` per store in the block loops).
        debug_assert!(piece == 0 || piece.is_power_of_two(), "{piece}");
        (piece != 0 && (p as usize) & (piece - 1) == 0).then_some((p, piece))
    }

    /// The 16 bytes `v` into `dst[at..at + 4]`.
    #[inline]
    #[target_feature(enable = "avx")]
    pub(crate) fn m128(self, dst: &mut [f32], at: usize, v: std::arch::x86_64::__m128) {
        use std::arch::x86_64::*;
        // SAFETY: `pieces` bounds-checked the 16 bytes at `p` and returned a piece only where
        // `p` is aligned to it (16 bytes), as `_mm_stream_ps` requires; `_mm_storeu_ps`
        // needs no alignment.
        #[allow(unsafe_code)]
        unsafe {
            match self.pieces(dst, at, 16) {
                Some((p, _)) => _mm_stream_ps(p, v),
                None => _mm_storeu_ps(dst[at..at + 4].as_mut_ptr(), v),
            }
        }
    }

    /// The 32 bytes `v` into `dst[at..at + 8]`.
    #[inline]
    #[target_feature(enable = "avx")]
    pub(crate) fn m256(self, dst: &mut [f32], at: usize, v: std::arch::x86_64::__m256) {
        use std::arch::x86_64::*;
        // SAFETY: `pieces` bounds-checked the 32 bytes at `p` and returned a piece width
        // only where `p`, hence `p + 4` floats for 16-byte pieces, is aligned to it, as the
        // streaming stores require; `_mm256_storeu_ps` needs no alignment.
        #[allow(unsafe_code)]
        unsafe {
            match self.pieces(dst, at, 32) {
                Some((p, 32)) => _mm256_stream_ps(p, v),
                Some((p, _)) => {
                    _mm_stream_ps(p, _mm256_castps256_ps128(v));
                    _mm_stream_ps(p.add(4), _mm256_extractf128_ps::<1>(v));
                }
                None => _mm256_storeu_ps(dst[at..at + 8].as_mut_ptr(), v),
            }
        }
    }

    /// The 64 bytes `v` into `dst[at..at + 16]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn m512(self, dst: &mut [f32], at: usize, v: std::arch::x86_64::__m512) {
        use std::arch::x86_64::*;
        // SAFETY: `pieces` bounds-checked the 64 bytes at `p` and returned a piece width
        // only where `p` is aligned to it; each piece is at a multiple of its width from
        // `p`, so aligned too, as the streaming stores require; `_mm512_storeu_ps` needs no
        // alignment.
        #[allow(unsafe_code)]
        unsafe {
            match self.pieces(dst, at, 64) {
                Some((p, 64)) => _mm512_stream_ps(p, v),
                Some((p, 32)) => {
                    _mm256_stream_ps(p, _mm512_castps512_ps256(v));
                    _mm256_stream_ps(
                        p.add(8),
                        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))),
                    );
                }
                Some((p, _)) => {
                    _mm_stream_ps(p, _mm512_castps512_ps128(v));
                    _mm_stream_ps(p.add(4), _mm512_extractf32x4_ps::<1>(v));
                    _mm_stream_ps(p.add(8), _mm512_extractf32x4_ps::<2>(v));
                    _mm_stream_ps(p.add(12), _mm512_extractf32x4_ps::<3>(v));
                }
                None => _mm512_storeu_ps(dst[at..at + 16].as_mut_ptr(), v),
            }
        }
    }

    /// Fences the non-temporal stores (they are weakly ordered) before the chunk reports
    /// done and another thread reads the output.
    pub fn finish(self) {
        if self.streaming() {
            // SAFETY: `sfence` is SSE, baseline on x86-64; it only orders stores.
            #[allow(unsafe_code)]
            unsafe {
                std::arch::x86_64::_mm_sfence()
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fma(f32, f32, f32);
    impl Task for Fma {
        type Output = f32;
        #[inline(always)]
        fn run(self) -> f32 {
            self.0.mul_add(self.1, self.2)
        }
    }

    #[test]
    fn the_environment_lowers_the_level_and_never_raises_it() {
        assert_eq!(Level::Avx512.capped("avx2"), Ok(Level::Avx2));
        assert_eq!(Level::Avx512.capped("portable"), Ok(Level::Portable));
        assert_eq!(Level::Avx2.capped("avx512f"), Ok(Level::Avx2));
        assert_eq!(Level::Neon.capped("portable"), Ok(Level::Portable));
        let unknown = Level::Avx2.capped("sse9").unwrap_err();
        assert!(
            unknown.starts_with("AMARI_GPU_SIMD: expected one of"),
            "{unknown}"
        );
        assert!(
            unknown.ends_with("got 'sse9'; running at avx2"),
            "{unknown}"
        );
        assert!(Level::Avx2.capped("neon").is_err());
        assert!(Level::available().contains(&Level::detect()));
    }

    #[test]
    fn dispatched_mul_add_is_fused_at_every_level() {
        // (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46 exactly; unfused it rounds to 0.
        let e = f32::EPSILON;
        assert_eq!(dispatch(Fma(1.0 + e, 1.0 - e, -1.0)), -(e * e));
        assert!(!Level::detect().name().is_empty());
    }

    /// Streaming stores take the widest pieces the output's alignment allows (none below 16
    /// bytes), ordinary ones when not asked to stream; every vector lands on its words.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn stores_stream_in_the_pieces_the_alignment_allows() {
        let mut buf = vec![0.0f32; 64];
        let base = (64 - buf.as_ptr() as usize % 64) % 64 / 4;
        for (offset, piece) in [(0, 64), (4, 16), (8, 32), (1, 0), (2, 0)] {
            let out = &mut buf[base + offset..base + offset + 32];
            assert_eq!(Stores::new(out, true), Stores { piece });
            assert!(!Stores::new(out, false).streaming());
            // Whole vectors stream as one store only where the start is aligned to them.
            for width in [16, 32, 64] {
                assert_eq!(
                    Stores::new(out, true).whole(width),
                    piece >= width,
                    "{offset} {width}"
                );
                assert!(!Stores::new(out, false).whole(width));
            }
            if Level::detect() == Level::Avx512 {
                let v: [f32; 16] = std::array::from_fn(|i| i as f32 + offset as f32);
                // SAFETY: the CPU has AVX-512F (the detected level) and AVX; `v` holds 16
                // floats, the one unaligned load reads.
                #[allow(unsafe_code)]
                unsafe {
                    use std::arch::x86_64::*;
                    let z = _mm512_loadu_ps(v.as_ptr());
                    let stores = Stores::new(out, true);
                    store_all(stores, out, z);
                }
                assert_eq!(out[..16], v);
                assert_eq!(out[16..20], v[..4]);
                assert_eq!(out[24..32], v[..8]);
            }
        }
    }

    /// `z` through each width of `stores`: 64 bytes at word 0, 16 at 16, 32 at 24.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn store_all(stores: Stores, out: &mut [f32], z: std::arch::x86_64::__m512) {
        use std::arch::x86_64::*;
        stores.m512(out, 0, z);
        stores.m128(out, 16, _mm512_castps512_ps128(z));
        stores.m256(out, 24, _mm512_castps512_ps256(z));
        stores.finish();
    }
}
