//! The cells of a heat row in AVX-512 and AVX2+FMA intrinsics, float32 and float64: the
//! inner cells (`1..w - 1`, whose left and right neighbours are in the row) in vectors,
//! each exactly `fma(α, ((up + down) + (left + right)) − 4u, u)` per lane, bracketed and
//! rounded as the portable cell of `host_grid` (and `shaders/heat.wgsl`) computes it, fused
//! or as a product and a sum by the devices' [`FmaMode`](crate::kernel::FmaMode); then the
//! first and last cell, the same cell with the row wrapped (periodic) or kept (a Dirichlet
//! frame), computed in the kernel's own code: as a call from the caller's portable code
//! they took a twelfth of a heat pass (a software `fma` call each, and a copy of no
//! padding).
//!
//! Why by hand: the compiler's loop over a row leaves its last `(w − 2) mod 32` cells
//! (30 of a 1024-cell row) to a scalar loop, which took about a sixth of the kernel's
//! time. Here a row's tail is one masked vector (AVX-512: masked-off lanes are neither
//! read nor written; its head too, up to the first cell on a 64-byte line, so that the
//! stores of whole vectors do not split lines) or one vector overlapping the cells before
//! it (AVX2: those cells are written again with the same values, as they are computed
//! from inputs the row does not write; its head likewise, a vector at cell 1 and whole
//! vectors from the first cell on a 32-byte line). Both levels sweep two rows at once
//! where a wavefront asks for them; the AVX2 sweep a 64-byte line of each row a turn, the
//! neighbours that would be loaded across two lines shifted instead out of the vectors
//! beside them (the rows' loads were its bound). Rows shorter than one AVX2 vector take
//! the portable loop.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use crate::host::arith::Real;
use crate::host::simd::Level;

/// The rows `[up, at, down]` a row is computed from, each at least as long as it.
pub(crate) type Around<'a, T> = [&'a [T]; 3];

/// The first and last cell of `out` (`w = out.len() >= 2`) from rows `[up, at, down]`:
/// the cell of the inner ones with the row wrapped when `periodic`, else `at`'s (a
/// Dirichlet frame's columns keep their values). Inlined into the vector kernels, whose
/// target features make `mul_add` one instruction.
#[inline(always)]
fn edges<T: Real + std::ops::Sub<Output = T>, const FUSED: bool>(
    (alpha, four): (T, T),
    [up, at, down]: Around<'_, T>,
    out: &mut [T],
    periodic: bool,
) {
    let last = out.len() - 1;
    for (c, left, right) in [(0, last, 1), (last, last - 1, 0)] {
        out[c] = if periodic {
            let s = (up[c] + down[c]) + (at[left] + at[right]);
            T::madd::<FUSED>(alpha, s - four * at[c], at[c])
        } else {
            at[c]
        };
    }
}

/// What a row's vector loop starts from: α and 4 in every lane (splat by `$set`), the rows'
/// pointers, and the index of the row's last cell (the first not computed).
macro_rules! setup {
    ($set:ident, $alpha:ident, $rows:ident, $out:ident) => {
        (
            $set($alpha),
            $set(4.0),
            $rows.map(<[_]>::as_ptr),
            $out.as_mut_ptr(),
            $out.len() - 1,
        )
    };
}

/// One vector of cells from its neighbours' vectors: `fma(α, ((up + down) + (left +
/// right)) − 4·mid, mid)`, the product and sum rounded apart unless fused.
macro_rules! heat_of {
    ([$add:ident, $sub:ident, $mul:ident, $fma:ident, $fused:ident], ($a:ident, $four:ident),
     [$up:expr, $down:expr, $left:expr, $right:expr, $mid:expr]) => {{
        let mid = $mid;
        let s = $add($add($up, $down), $add($left, $right));
        let e = $sub(s, $mul($four, mid));
        if $fused {
            $fma($a, e, mid)
        } else {
            $add($mul($a, e), mid)
        }
    }};
}

/// One vector of cells `c..` of rows `m` (rows `u` above and `d` below), loaded with
/// `$load` (under mask `$k` if given): [`heat_of`] of them.
macro_rules! heat_vec {
    ($ops:tt, $k4:tt, $load:ident $([$k:ident])?, ($u:ident, $d:ident, $m:ident), $c:ident) => {{
        let mid = $load($($k,)? $m.add($c));
        let (up, down) = ($load($($k,)? $u.add($c)), $load($($k,)? $d.add($c)));
        let (left, right) = ($load($($k,)? $m.add($c - 1)), $load($($k,)? $m.add($c + 1)));
        heat_of!($ops, $k4, [up, down, left, right, mid])
    }};
}

/// Both outputs of a two-row sweep at vector position `$c`, every operand loaded: `$o`
/// from rows `$u`, `$m`, `$m2` and `$o2` from `$m`, `$m2`, `$dd` (above, middle, below).
macro_rules! both_at {
    ($ops:tt, $k4:tt, $load:ident, $store:ident, ($u:ident, $m:ident, $m2:ident, $dd:ident),
     ($o:ident, $o2:ident), $c:ident) => {{
        let v = heat_vec!($ops, $k4, $load, ($u, $m2, $m), $c);
        let v2 = heat_vec!($ops, $k4, $load, ($m, $dd, $m2), $c);
        $store($o.add($c), v);
        $store($o2.add($c), v2);
    }};
}

/// One 64-byte line of an output row in the AVX2 line sweep, its vectors at cells `$c` and
/// `$c + $lanes`, stored in `$o`: from the row above's two vectors `$up`, the row below's
/// `$down`, and the middle row `$m`'s `$first` and `$second` (the line) and `$next` (the
/// next line's first), its left neighbours `$left` carried from the line before. The
/// second vector's right neighbours are shifted out of its upper half and the next line's
/// lower half; the first's right and the second's left are loaded within the line. Gives
/// the next line's left neighbours, shifted out of the same lanes.
macro_rules! line_of {
    ($ops:tt, $k4:tt, ($load:ident, $store:ident, $perm:ident, $lsh:literal, $rsh:literal),
     [$up0:expr, $up1:expr], [$down0:expr, $down1:expr],
     ($m:ident, $left:expr, $first:expr, $second:expr, $next:expr),
     ($o:ident, $c:ident, $lanes:ident)) => {{
        let mid = $perm::<0x21>($second, $next);
        let right = align!($rsh, mid, $second);
        let v = heat_of!(
            $ops,
            $k4,
            [$up0, $down0, $left, $load($m.add($c + 1)), $first]
        );
        $store($o.add($c), v);
        let v = heat_of!(
            $ops,
            $k4,
            [$up1, $down1, $load($m.add($c + $lanes - 1)), right, $second]
        );
        $store($o.add($c + $lanes), v);
        align!($lsh, $next, mid)
    }};
}

/// The bytes `$n..$n + 16` of each 128-bit lane of `$hi` above `$lo` (`vpalignr`), as the
/// one instruction: LLVM rewrites `_mm256_alignr_epi8` on float lanes as two `vshufps`,
/// twice the shuffle work of the loads the line sweep saves with it.
macro_rules! align {
    ($n:literal, $hi:expr, $lo:expr) => {{
        let mut r = $lo;
        std::arch::asm!(
            "vpalignr {r}, {hi}, {r}, {n}",
            r = inout(ymm_reg) r,
            hi = in(ymm_reg) $hi,
            n = const $n,
            options(pure, nomem, nostack, preserves_flags)
        );
        r
    }};
}

/// The vector positions of a row's inner cells `1..$end` at `$w512` lanes of `$t`: a first,
/// partial vector up to the first cell of output row `$o` on a 64-byte line (when cells lie
/// on whole multiples of their size), so that the whole vectors after it are stored
/// without splitting a line; then whole vectors (`$whole`, at cell `$c`); the partial ones,
/// first and last, under mask `$k` of type `$mask` (`$part`).
macro_rules! positions512 {
    ($t:ty, $w512:literal, $mask:ty, $o:ident, $end:ident,
     |$c:ident| $whole:block, |$k:ident| $part:block) => {{
        let size = size_of::<$t>();
        let addr = $o as usize + size;
        let lead = if addr % size == 0 {
            (64 - addr % 64) % 64 / size
        } else {
            0
        };
        let mut $c = 1;
        let mut n = if lead > 0 { lead } else { $w512 }.min($end - $c);
        while $c < $end {
            if n == $w512 {
                $whole
            } else {
                let $k: $mask = ((1u32 << n) - 1) as $mask;
                $part
            }
            $c += n;
            n = ($end - $c).min($w512);
        }
    }};
}

/// The vector positions of a row's inner cells `1..$end` (`$end >= $w256 + 1`) at `$w256`
/// lanes of `$t`, each a whole vector `$body` at cell `$c`: the first at cell 1, then from
/// the first cell of output row `$o` on a 32-byte line (when cells lie on whole multiples
/// of their size) in whole vectors, the last one ending at `$end`. The first and last
/// overlap the cells beside them, which are written again with the same values (computed
/// from rows the kernel does not write). Stores of whole lines' halves and loads of the
/// rows beside (at the same alignment in a band buffer or the ring) do not split lines:
/// at the first cell, every vector of the row did, two lines a store.
macro_rules! positions256 {
    ($t:ty, $w256:literal, $o:ident, $end:ident, |$c:ident| $body:block) => {{
        let size = size_of::<$t>();
        let addr = $o as usize + size;
        let lead = if addr % size == 0 {
            (32 - addr % 32) % 32 / size
        } else {
            0
        };
        let mut $c = 1;
        if lead > 0 {
            $body
            $c += lead;
        }
        loop {
            if $c + $w256 > $end {
                if $c >= $end {
                    break;
                }
                $c = $end - $w256;
                $body
                break;
            }
            $body
            $c += $w256;
        }
    }};
}

/// `$inner`, the inner cells of a row of `$t` (see the function's own words): `$w512`
/// lanes through the AVX-512 intrinsics (`$mask` their masks), `$w256` lanes through the
/// AVX2 ones (`$perm256` their lane permute, `$lsh` and `$rsh` the bytes [`align`] shifts
/// by for a vector's left and right neighbours).
macro_rules! lanes {
    (
        $t:ty, $w512:literal, $mask:ty, $w256:literal, $inner:ident, $avx512:ident, $avx2:ident,
        $inner2:ident, $avx512_2:ident, $avx2_2:ident,
        $load512:ident, $maskz512:ident, $store512:ident, $mstore512:ident, $set512:ident,
        $add512:ident, $sub512:ident, $mul512:ident, $fma512:ident,
        $load256:ident, $store256:ident, $set256:ident, $add256:ident, $sub256:ident,
        $mul256:ident, $fma256:ident, $perm256:ident,
        $lsh:literal, $rsh:literal
    ) => {
        /// The cells of `out` (`w = out.len()`; its inner cells `1..w - 1` in vectors, its
        /// first and last as [`edges`], wrapped when `periodic`) from its rows around, at
        /// `level`, fused when `FUSED`: whether they were written (else the caller's
        /// portable loop writes them).
        #[inline]
        pub(super) fn $inner<const FUSED: bool>(
            level: Level,
            alpha: $t,
            [up, at, down]: Around<'_, $t>,
            out: &mut [$t],
            periodic: bool,
        ) -> bool {
            let w = out.len();
            // Rows of one length: the kernels read and write only below `w`.
            let rows = [&up[..w], &at[..w], &down[..w]];
            #[cfg(target_arch = "x86_64")]
            match level {
                // SAFETY: `Avx512` is only dispatched after `is_x86_feature_detected!`
                // found AVX-512F, AVX2 and FMA (`host::simd`); the four rows hold `w`
                // cells each, as the kernel requires.
                #[allow(unsafe_code)]
                Level::Avx512 if w >= 3 => {
                    unsafe { $avx512::<FUSED>(alpha, rows, out, periodic) };
                    return true;
                }
                // SAFETY: as above for AVX2 and FMA; the rows hold `w >= $w256 + 2`
                // cells, at least one whole vector of inner cells.
                #[allow(unsafe_code)]
                Level::Avx2 | Level::Avx512 if w >= $w256 + 2 => {
                    unsafe { $avx2::<FUSED>(alpha, rows, out, periodic) };
                    return true;
                }
                _ => {}
            }
            let _ = (level, alpha, rows, periodic);
            false
        }

        /// The cells of two rows one above the other, `outs[0]` from rows `[up, at, at2]`
        /// and `outs[1]` from `[at, at2, down]` (`w = outs[0].len() >= 3` cells each, the
        /// rows at least as long), fused when `FUSED`, wrapped when `periodic`, the inner
        /// ones in one sweep at the AVX-512 and AVX2 levels: whether they were written (else the caller
        /// computes each row). Each cell is the one [`$inner`] computes; the sweep loads the
        /// two middle rows' vectors once for both outputs.
        #[inline]
        pub(super) fn $inner2<const FUSED: bool>(
            level: Level,
            alpha: $t,
            [up, at, at2, down]: [&[$t]; 4],
            [out, out2]: [&mut [$t]; 2],
            periodic: bool,
        ) -> bool {
            let w = out.len();
            #[cfg(target_arch = "x86_64")]
            if level == Level::Avx512 && w >= 3 && out2.len() == w {
                let rows = [&up[..w], &at[..w], &at2[..w], &down[..w]];
                // SAFETY: `Avx512` is only dispatched after `is_x86_feature_detected!`
                // found AVX-512F, AVX2 and FMA (`host::simd`); the six rows hold `w` cells
                // each, as the kernel requires.
                #[allow(unsafe_code)]
                unsafe {
                    $avx512_2::<FUSED>(alpha, rows, out, out2, periodic)
                };
                return true;
            }
            #[cfg(target_arch = "x86_64")]
            if matches!(level, Level::Avx2 | Level::Avx512) && w >= $w256 + 2 && out2.len() == w {
                let rows = [&up[..w], &at[..w], &at2[..w], &down[..w]];
                // SAFETY: as above for AVX2 and FMA; the rows hold `w >= $w256 + 2` cells,
                // at least one whole vector of inner cells.
                #[allow(unsafe_code)]
                unsafe {
                    $avx2_2::<FUSED>(alpha, rows, out, out2, periodic)
                };
                return true;
            }
            let _ = (level, alpha, up, at, at2, down, out2, periodic);
            false
        }

        /// [`$inner2`] at the AVX-512 level: the steps of the one-row kernel below, two
        /// outputs per vector position (both computed before either is stored, so that the
        /// compiler loads each middle row's vector once).
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx2,fma")]
        #[allow(unsafe_code)]
        unsafe fn $avx512_2<const FUSED: bool>(
            alpha: $t,
            [up, at, at2, down]: [&[$t]; 4],
            out: &mut [$t],
            out2: &mut [$t],
            periodic: bool,
        ) {
            let three = [up, at, at2];
            let (a, four, [u, m, d], o, end) = setup!($set512, alpha, three, out);
            let (m2, dd, o2) = (at2.as_ptr(), down.as_ptr(), out2.as_mut_ptr());
            positions512!(
                $t,
                $w512,
                $mask,
                o,
                end,
                |c| {
                    // SAFETY: as in the one-row kernel, for each of the two outputs and their
                    // rows.
                    let v = heat_vec! { [$add512, $sub512, $mul512, $fma512, FUSED], (a, four),
                    $load512, (u, d, m), c };
                    let v2 = heat_vec! { [$add512, $sub512, $mul512, $fma512, FUSED], (a, four),
                    $load512, (m, dd, m2), c };
                    $store512(o.add(c), v);
                    $store512(o2.add(c), v2);
                },
                |k| {
                    // SAFETY: as in the one-row kernel's masked vectors.
                    let v = heat_vec! { [$add512, $sub512, $mul512, $fma512, FUSED], (a, four),
                    $maskz512[k], (u, d, m), c };
                    let v2 = heat_vec! { [$add512, $sub512, $mul512, $fma512, FUSED], (a, four),
                    $maskz512[k], (m, dd, m2), c };
                    $mstore512(o.add(c), k, v);
                    $mstore512(o2.add(c), k, v2);
                }
            );
            edges::<$t, FUSED>((alpha, 4.0), [up, at, at2], out, periodic);
            edges::<$t, FUSED>((alpha, 4.0), [at, at2, down], out2, periodic);
        }

        /// The inner cells of a row of `w = out.len() >= 3` cells (the other rows at least as
        /// long), `$w512` lanes at a time, the head (up to a 64-byte line of `out`) and the
        /// tail masked vectors.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx2,fma")]
        #[allow(unsafe_code)]
        unsafe fn $avx512<const FUSED: bool>(
            alpha: $t,
            rows: Around<'_, $t>,
            out: &mut [$t],
            periodic: bool,
        ) {
            let (a, four, [u, m, d], o, end) = setup!($set512, alpha, rows, out);
            positions512!(
                $t,
                $w512,
                $mask,
                o,
                end,
                |c| {
                    // SAFETY: lanes `c..c + $w512` with `c + $w512 <= end`, and cells
                    // `c - 1 ..= c + $w512` of `at`, lie below `w`.
                    let v = heat_vec! { [$add512, $sub512, $mul512, $fma512, FUSED], (a, four),
                    $load512, (u, d, m), c };
                    $store512(o.add(c), v);
                },
                |k| {
                    // SAFETY: the mask holds lanes `0..n` (`n < $w512`), cells `c..c + n` with
                    // `c + n <= end` (and `at`'s `c - 1 ..= c + n`), all below `w`; masked-off
                    // lanes are neither read nor written.
                    let v = heat_vec! { [$add512, $sub512, $mul512, $fma512, FUSED], (a, four),
                    $maskz512[k], (u, d, m), c };
                    $mstore512(o.add(c), k, v);
                }
            );
            edges::<$t, FUSED>((alpha, 4.0), rows, out, periodic);
        }

        /// The inner cells of a row of `w = out.len() >= $w256 + 2` cells, `$w256` lanes at a
        /// time at the positions of [`positions256`].
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        #[allow(unsafe_code)]
        unsafe fn $avx2<const FUSED: bool>(
            alpha: $t,
            rows: Around<'_, $t>,
            out: &mut [$t],
            periodic: bool,
        ) {
            let (a, four, [u, m, d], o, end) = setup!($set256, alpha, rows, out);
            positions256!($t, $w256, o, end, |c| {
                // SAFETY: `1 <= c` and `c + $w256 <= end < w` ([`positions256`]), so lanes
                // `c..c + $w256` and `at`'s cells `c - 1 ..= c + $w256` lie in the rows.
                let v = heat_vec! { [$add256, $sub256, $mul256, $fma256, FUSED], (a, four),
                $load256, (u, d, m), c };
                $store256(o.add(c), v);
            });
            edges::<$t, FUSED>((alpha, 4.0), rows, out, periodic);
        }

        /// [`$inner2`] at the AVX2 level. Where the row holds three vectors past the
        /// first cell of `out` on a 64-byte line, a turn computes one line of each output
        /// (two vectors): each middle row's vectors are loaded once for both outputs, and
        /// of each middle row's neighbours, the left ones of the line's first vector and
        /// the right ones of its second (the two loads that would split a line) are
        /// shuffled from the vectors beside them, the others loaded from within the
        /// line. The cells before the first line and after the last are the one-row
        /// kernel's vectors, for both outputs.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        #[allow(unsafe_code)]
        unsafe fn $avx2_2<const FUSED: bool>(
            alpha: $t,
            [up, at, at2, down]: [&[$t]; 4],
            out: &mut [$t],
            out2: &mut [$t],
            periodic: bool,
        ) {
            let three = [up, at, at2];
            let (a, four, [u, m, m2], o, end) = setup!($set256, alpha, three, out);
            let (dd, o2, w) = (down.as_ptr(), out2.as_mut_ptr(), end + 1);
            let lanes = $w256;
            let size = size_of::<$t>();
            let addr = o as usize + size;
            // Cells from cell 1 to the first of `out` on a line.
            let lead = if addr % size == 0 {
                (64 - addr % 64) % 64 / size
            } else {
                0
            };
            let mut c = 1 + lead;
            if c + 3 * lanes > w {
                positions256!($t, $w256, o, end, |c| {
                    // SAFETY: as in the one-row kernel, for each of the two outputs and
                    // their rows.
                    both_at!(
                        [$add256, $sub256, $mul256, $fma256, FUSED],
                        (a, four),
                        $load256,
                        $store256,
                        (u, m, m2, dd),
                        (o, o2),
                        c
                    );
                });
            } else {
                // SAFETY (every load and store below): each vector's cells lie in
                // `1..end` and its rows' cells read in `0..w`: the head's vectors at cell
                // 1 and ending at the first line (`lead < 2 * lanes`), the turns' at `c`
                // and `c + lanes` while `c + 3 * lanes <= w` (the next line's first vector,
                // read for the right neighbours, ends within the row), the tail's from
                // there, the last ending at `end`.
                // The head's cells, `1..c`, then the tail's (below).
                let head = if lead > 0 { 1 } else { c };
                let first_line = c;
                // The left neighbours and the cells of the line's first vector, for each
                // middle row: carried from the turn before.
                let (mut left, mut left2) = ($load256(m.add(c - 1)), $load256(m2.add(c - 1)));
                let (mut first, mut first2) = ($load256(m.add(c)), $load256(m2.add(c)));
                while c + 3 * lanes <= w {
                    let (second, next) =
                        ($load256(m.add(c + lanes)), $load256(m.add(c + 2 * lanes)));
                    let second2 = $load256(m2.add(c + lanes));
                    left = line_of!(
                        [$add256, $sub256, $mul256, $fma256, FUSED],
                        (a, four),
                        ($load256, $store256, $perm256, $lsh, $rsh),
                        [$load256(u.add(c)), $load256(u.add(c + lanes))],
                        [first2, second2],
                        (m, left, first, second, next),
                        (o, c, lanes)
                    );
                    let next2 = $load256(m2.add(c + 2 * lanes));
                    left2 = line_of!(
                        [$add256, $sub256, $mul256, $fma256, FUSED],
                        (a, four),
                        ($load256, $store256, $perm256, $lsh, $rsh),
                        [first, second],
                        [$load256(dd.add(c)), $load256(dd.add(c + lanes))],
                        (m2, left2, first2, second2, next2),
                        (o2, c, lanes)
                    );
                    (first, first2) = (next, next2);
                    c += 2 * lanes;
                }
                // Whole vectors over the head's cells and the tail's, `c..end`: from the
                // first cell, the last ending at the range's end (or, on fewer cells than a
                // vector, the one vector from the first).
                for (from, to) in [(head, first_line), (c, end)] {
                    let mut h = from;
                    while h < to {
                        both_at!(
                            [$add256, $sub256, $mul256, $fma256, FUSED],
                            (a, four),
                            $load256,
                            $store256,
                            (u, m, m2, dd),
                            (o, o2),
                            h
                        );
                        h = if h + lanes >= to {
                            to
                        } else {
                            (h + lanes).min(to - lanes)
                        };
                    }
                }
            }
            edges::<$t, FUSED>((alpha, 4.0), [up, at, at2], out, periodic);
            edges::<$t, FUSED>((alpha, 4.0), [at, at2, down], out2, periodic);
        }
    };
}

#[rustfmt::skip]
lanes!(f32, 16, __mmask16, 8, inner_f32, inner_f32_avx512, inner_f32_avx2, inner2_f32,
    inner2_f32_avx512, inner2_f32_avx2, _mm512_loadu_ps,
    _mm512_maskz_loadu_ps, _mm512_storeu_ps, _mm512_mask_storeu_ps, _mm512_set1_ps, _mm512_add_ps,
    _mm512_sub_ps, _mm512_mul_ps, _mm512_fmadd_ps, _mm256_loadu_ps, _mm256_storeu_ps,
    _mm256_set1_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_fmadd_ps,
    _mm256_permute2f128_ps, 12, 4);

// Float64: half the lanes, and 8-lane masks.
#[rustfmt::skip]
lanes!(f64, 8, __mmask8, 4, inner_f64, inner_f64_avx512, inner_f64_avx2, inner2_f64,
    inner2_f64_avx512, inner2_f64_avx2, _mm512_loadu_pd,
    _mm512_maskz_loadu_pd, _mm512_storeu_pd, _mm512_mask_storeu_pd, _mm512_set1_pd, _mm512_add_pd,
    _mm512_sub_pd, _mm512_mul_pd, _mm512_fmadd_pd, _mm256_loadu_pd, _mm256_storeu_pd,
    _mm256_set1_pd, _mm256_add_pd, _mm256_sub_pd, _mm256_mul_pd, _mm256_fmadd_pd,
    _mm256_permute2f128_pd, 8, 8);

#[cfg(test)]
mod tests {
    use super::super::host_grid::HeatCell;
    use super::*;

    /// One cell as the portable row kernel and the shader compute it.
    fn cell<T: crate::host::arith::Real + std::ops::Sub<Output = T> + From<f32>>(
        fused: bool,
        a: T,
        [up, down, left, right, u]: [T; 5],
    ) -> T {
        let e = ((up + down) + (left + right)) - T::from(4.0) * u;
        if fused {
            T::madd::<true>(a, e, u)
        } else {
            T::madd::<false>(a, e, u)
        }
    }

    /// Values from `x` that hit every class of cell: ordinary, tiny (subnormal results),
    /// signed zeros, and huge (sums overflowing to ±inf, then inf − inf = NaN).
    fn value(x: u64) -> f64 {
        let m = (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        match x % 11 {
            0 => 0.0,
            1 => -0.0,
            2 => m * 1e-300,
            3 => m * f64::MAX,
            4 => m * f32::MAX as f64,
            5 => m * 1e-40,
            _ => m,
        }
    }

    /// Rows `up`, `at`, `down` of `w` cells and an output row of sentinels, from `seed`.
    fn rows<T: Copy>(w: usize, seed: u64, f: impl Fn(f64) -> T) -> [Vec<T>; 4] {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            f(value(x))
        };
        let mut row = || (0..w).map(|_| next()).collect::<Vec<T>>();
        [row(), row(), row(), vec![f(-7.25); w]]
    }

    /// Every level's cells of rows 1 to 70 cells wide (around the 4-, 8- and 16-lane
    /// vectors and their tails) and of 1024 and 1029, bit for bit the portable cell's, in
    /// float32 and float64, fused and not, the first and last cell wrapped or kept.
    #[test]
    fn every_level_computes_the_portable_cells_bit_for_bit() {
        let mut checked = 0;
        for level in Level::available() {
            for w in (1..=70).chain([1024, 1029]) {
                // Output rows starting at several offsets from a 64-byte line: the head
                // vector up to the line is every length.
                for (fused, skip) in [true, false]
                    .into_iter()
                    .flat_map(|f| [0, 1, 3, 5, 7, 9, 15].map(|s| (f, s)))
                {
                    let seed = (w * 2 + usize::from(fused) + skip * 1000) as u64;
                    for periodic in [true, false] {
                        let f = (fused, periodic);
                        let [u, m, d, mut out] = rows(w + skip, seed, |v| v as f32);
                        let out = &mut out[skip..];
                        checked += check(level, f, 0.23f32, [&u, &m, &d], out);
                        let [u, m, d, mut out] = rows(w + skip, seed, |v| v);
                        let out = &mut out[skip..];
                        checked += check(level, f, 0.23f64, [&u, &m, &d], out);
                    }
                }
            }
        }
        assert!(checked > 0);
    }

    /// The two-row sweep at every level, widths 1 to 70 and 1024, 1029, output rows at
    /// several offsets from a line, float32 and float64, fused and not, wrapped and not:
    /// where it writes (the AVX-512 level, three cells or more; AVX2, a vector and two
    /// cells or more), each row's cells are the portable cell's bit for bit; elsewhere it
    /// writes nothing.
    #[test]
    fn the_two_row_sweep_computes_each_rows_portable_cells() {
        let mut swept = 0;
        for level in Level::available() {
            for w in (1..=70).chain([1024, 1029]) {
                // Output rows at several offsets from a line, and the rows read at the
                // same offset as one another or two cells on from it (the turns over whole
                // lines of the output then read each row's vectors across lines).
                for (fused, skip, on) in [true, false]
                    .into_iter()
                    .flat_map(|f| [0, 1, 5, 9].map(|s| (f, s)))
                    .flat_map(|(f, s)| [0, 2].map(|o| (f, s, o)))
                {
                    let seed = (w * 7 + usize::from(fused) + skip * 1000 + on * 10) as u64;
                    let f = (fused, skip % 2 == 0);
                    let [u, m, d, _] = rows(w + skip + on, seed, |v| v as f32);
                    let [m2, _, _, mut out] = rows(w + skip + on, seed + 1, |v| v as f32);
                    let mut out2 = out.clone();
                    swept += check2(
                        level,
                        f,
                        0.23f32,
                        [&u[on..], &m[on..], &m2[on..], &d[on..]],
                        [&mut out[skip..w + skip], &mut out2[skip..w + skip]],
                    );
                    let [u, m, d, _] = rows(w + skip + on, seed, |v| v);
                    let [m2, _, _, mut out] = rows(w + skip + on, seed + 1, |v| v);
                    let mut out2 = out.clone();
                    swept += check2(
                        level,
                        f,
                        0.23f64,
                        [&u[on..], &m[on..], &m2[on..], &d[on..]],
                        [&mut out[skip..w + skip], &mut out2[skip..w + skip]],
                    );
                }
            }
        }
        assert!(swept > 0 || !Level::available().contains(&Level::Avx2));
    }

    /// Checks one two-row sweep at `level`, fused and wrapped as `(fused, periodic)` (see
    /// the test above); 1 when it wrote the rows.
    fn check2<T>(
        level: Level,
        (fused, periodic): (bool, bool),
        a: T,
        r: [&[T]; 4],
        [o1, o2]: [&mut [T]; 2],
    ) -> usize
    where
        T: HeatCell + From<f32> + std::fmt::Debug,
    {
        let w = o1.len();
        let sentinel = o1[0];
        let p = periodic;
        let wrote = if fused {
            T::inner_rows2::<true>(level, a, r, [&mut *o1, &mut *o2], p)
        } else {
            T::inner_rows2::<false>(level, a, r, [&mut *o1, &mut *o2], p)
        };
        let bits = |v: T| bytemuck::bytes_of(&v).to_vec();
        if !wrote {
            // Only the portable level, and AVX2 rows shorter than a vector, are left.
            let lanes = 32 / size_of::<T>();
            assert!(
                level == Level::Portable || (level == Level::Avx2 && w < lanes + 2) || w < 3,
                "{level:?} {w}"
            );
            assert!(o1
                .iter()
                .chain(o2.iter())
                .all(|&v| bits(v) == bits(sentinel)));
            return 0;
        }
        for (q, out) in [&*o1, &*o2].into_iter().enumerate() {
            let rows = [r[q], r[q + 1], r[q + 2]];
            for (c, &got) in out.iter().enumerate() {
                let want = wanted((fused, periodic), a, rows, (c, w));
                assert_eq!(
                    bits(got),
                    bits(want),
                    "{level:?} width {w} row {q} cell {c} fused {fused} periodic {periodic}"
                );
            }
        }
        1
    }

    /// Cell `c` of a row of `w` cells from rows `[u, m, d]` as the portable row computes it: the inner
    /// cells by [`cell`], the first and last wrapped (`periodic`) or kept.
    fn wanted<T>(f: (bool, bool), a: T, [u, m, d]: [&[T]; 3], (c, w): (usize, usize)) -> T
    where
        T: HeatCell + From<f32>,
    {
        let (fused, periodic) = f;
        let last = w - 1;
        if (c == 0 || c == last) && !periodic {
            return m[c];
        }
        let left = m[if c == 0 { last } else { c - 1 }];
        let right = m[if c == last { 0 } else { c + 1 }];
        cell(fused, a, [u[c], d[c], left, right, m[c]])
    }

    /// Checks one row at `level`, fused and wrapped as `(fused, periodic)`: the cells
    /// `HeatCell::inner_row` writes against the portable row's, or that it writes none; 1
    /// when it wrote the row.
    fn check<T>(
        level: Level,
        (fused, periodic): (bool, bool),
        a: T,
        [u, m, d]: [&[T]; 3],
        out: &mut [T],
    ) -> usize
    where
        T: HeatCell + From<f32> + std::fmt::Debug,
    {
        let w = out.len();
        let sentinel = out[0];
        let wrote = if fused {
            T::inner_row::<true>(level, a, [u, m, d], out, periodic)
        } else {
            T::inner_row::<false>(level, a, [u, m, d], out, periodic)
        };
        let bits = |v: T| bytemuck::bytes_of(&v).to_vec();
        if !wrote {
            // Only the portable level, and AVX2 rows shorter than a vector, are left.
            let lanes = 32 / size_of::<T>();
            assert!(
                level == Level::Portable || w < lanes + 2 || w < 3,
                "{level:?} {w}"
            );
            assert!(out.iter().all(|&v| bits(v) == bits(sentinel)));
            return 0;
        }
        for (c, &got) in out.iter().enumerate() {
            let want = wanted((fused, periodic), a, [u, m, d], (c, w));
            assert_eq!(
                bits(got),
                bits(want),
                "{level:?} width {w} cell {c} fused {fused} periodic {periodic}: {got:?} for {want:?}"
            );
        }
        1
    }
}
