//! The vector registers the host SYRK's micro-kernels (`fisher::syrk_simd`) are written
//! over: AVX2's 8 float32 or 4 float64 lanes and AVX-512's 16 or 8, behind one trait so
//! each kernel is written once for both element types and both levels.
//! Every method is `#[inline(always)]` and only ever runs inlined into a function compiled
//! with the features its intrinsics need (the kernels' `target_feature` entry points).

use std::arch::x86_64::*;

use crate::host::arith::Real;

/// An element type of the SYRK and its registers at each level ([`Lanes::Wide`] for
/// AVX-512, [`Lanes::Narrow`] for AVX2).
pub(super) trait Lanes: Real + Default {
    /// AVX-512's register of this type.
    type Wide: Vector<Elem = Self>;
    /// AVX2's register of this type.
    type Narrow: Vector<Elem = Self>;
}

impl Lanes for f32 {
    type Wide = __m512;
    type Narrow = __m256;
}

impl Lanes for f64 {
    type Wide = __m512d;
    type Narrow = __m256d;
}

/// A register of lanes of one float type and what the micro-kernels do with it.
///
/// # Safety
/// Callers run the methods only on a CPU with the implementing type's features, and give
/// pointers to as many floats as the method reads or writes.
#[allow(unsafe_code)]
pub(super) unsafe trait Vector: Copy {
    /// The lanes' float type.
    type Elem: Copy + Default;
    /// Lanes of the register.
    const LANES: usize;
    /// All lanes 0.
    unsafe fn zero() -> Self;
    /// All lanes `x`.
    unsafe fn splat(x: Self::Elem) -> Self;
    /// `LANES` floats from `p`.
    unsafe fn load(p: *const Self::Elem) -> Self;
    /// The lanes to `LANES` floats at `p`.
    unsafe fn store(self, p: *mut Self::Elem);
    /// `fma(x, y, acc)` in every lane, rounded once (`F`) or product and sum apart.
    unsafe fn madd<const F: bool>(x: Self, y: Self, acc: Self) -> Self;

    /// The first `n <= LANES` floats from `p`, the other lanes 0 (reads `n` floats only).
    unsafe fn load_first(p: *const Self::Elem, n: usize) -> Self;
    /// The first `n <= LANES` lanes to `p` (writes `n` floats only).
    unsafe fn store_first(self, p: *mut Self::Elem, n: usize);
}

/// [`Vector::load_first`] through a copy (AVX2 has no float masks of its own).
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn copy_load<V: Vector>(p: *const V::Elem, n: usize) -> V {
    let mut lanes = [V::Elem::default(); 16];
    std::ptr::copy_nonoverlapping(p, lanes.as_mut_ptr(), n.min(V::LANES));
    V::load(lanes.as_ptr())
}

/// [`Vector::store_first`] through a copy.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn copy_store<V: Vector>(v: V, p: *mut V::Elem, n: usize) {
    let mut lanes = [V::Elem::default(); 16];
    v.store(lanes.as_mut_ptr());
    std::ptr::copy_nonoverlapping(lanes.as_ptr(), p, n.min(V::LANES));
}

/// Lanes `0..n` of a 16-lane mask.
#[inline(always)]
fn mask16(n: usize) -> __mmask16 {
    if n >= 16 {
        u16::MAX
    } else {
        (1u16 << n) - 1
    }
}

/// [`Vector::load_first`] with AVX-512's masked load (masked-off lanes touch no memory).
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn masked_load(p: *const f32, n: usize) -> __m512 {
    _mm512_maskz_loadu_ps(mask16(n), p)
}

/// [`Vector::store_first`] with AVX-512's masked store.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn masked_store(v: __m512, p: *mut f32, n: usize) {
    _mm512_mask_storeu_ps(p, mask16(n), v)
}

/// One implementation from the type's intrinsics.
macro_rules! vector {
    ($t:ty, $e:ty, $lanes:expr, $zero:ident, $splat:ident, $load:ident, $store:ident, $fma:ident, $mul:ident, $add:ident, $first:expr, $store_first:expr) => {
        // SAFETY: each method is the one intrinsic of its name, which reads or writes
        // exactly the floats the trait says; the caller guarantees the CPU features.
        #[allow(unsafe_code)]
        unsafe impl Vector for $t {
            type Elem = $e;
            const LANES: usize = $lanes;
            #[inline(always)]
            unsafe fn zero() -> Self {
                $zero()
            }
            #[inline(always)]
            unsafe fn splat(x: $e) -> Self {
                $splat(x)
            }
            #[inline(always)]
            unsafe fn load(p: *const $e) -> Self {
                $load(p)
            }
            #[inline(always)]
            unsafe fn store(self, p: *mut $e) {
                $store(p, self)
            }
            #[inline(always)]
            unsafe fn load_first(p: *const $e, n: usize) -> Self {
                $first(p, n)
            }
            #[inline(always)]
            unsafe fn store_first(self, p: *mut $e, n: usize) {
                $store_first(self, p, n)
            }
            #[inline(always)]
            unsafe fn madd<const F: bool>(x: Self, y: Self, acc: Self) -> Self {
                if F {
                    $fma(x, y, acc)
                } else {
                    $add($mul(x, y), acc)
                }
            }
        }
    };
}

vector!(
    __m256,
    f32,
    8,
    _mm256_setzero_ps,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_fmadd_ps,
    _mm256_mul_ps,
    _mm256_add_ps,
    copy_load::<__m256>,
    copy_store::<__m256>
);
vector!(
    __m512,
    f32,
    16,
    _mm512_setzero_ps,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_fmadd_ps,
    _mm512_mul_ps,
    _mm512_add_ps,
    masked_load,
    masked_store
);
// float64: the 64 × 64 tiles only (the 8 × 8 blocks are float32), so the partial loads and
// stores go through a copy on both levels.
vector!(
    __m256d,
    f64,
    4,
    _mm256_setzero_pd,
    _mm256_set1_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_fmadd_pd,
    _mm256_mul_pd,
    _mm256_add_pd,
    copy_load::<__m256d>,
    copy_store::<__m256d>
);
vector!(
    __m512d,
    f64,
    8,
    _mm512_setzero_pd,
    _mm512_set1_pd,
    _mm512_loadu_pd,
    _mm512_storeu_pd,
    _mm512_fmadd_pd,
    _mm512_mul_pd,
    _mm512_add_pd,
    copy_load::<__m512d>,
    copy_store::<__m512d>
);
