"""``sandwich(r, x, algebra, blades=...)``: rows holding only the named blades' coefficients.

The map is the sub-matrix of the one-rotor map M on the named blades, each output the dense
chain over the named input blades in increasing blade index (docs/api.md, "Sandwich on some
blades"): so every output has the bits of the dense call on the zero-padded rows, but for the
sign of a zero, on every device kind, count and strategy, in each dtype; lavapipe's bits are
the documented chain replayed in numpy; the error is within the dense bound of the float64
sandwich. Bad blades, a rotor that takes a named blade out of the set, a batch of rotors and a
row of the wrong width are refused, naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import test_ga_sandwich_map as dense_map
from _ga_helpers import sandwich
from amari_gpu import STRATEGIES, Algebra, MultiGpuContext
from amari_gpu.errors import InvalidArgumentError, ShapeError

# The dense sandwich map's contexts: lavapipe (2 devices), lavapipe beside the host device
# (which follows lavapipe's `fma` rounding), the host device alone.
lavapipe, beside, host_only = dense_map.lavapipe, dense_map.beside, dense_map.host_only

PGA = Algebra(3, 0, 1)
POINTS = [7, 11, 13, 14]
SIZES = [0, 1, 5, 63, 65, 1001]
"""Row counts: none, one, and tails of every vector and chunk width."""
DTYPES = [np.float16, np.float32, np.float64]


def _motor(seed: int) -> np.ndarray:
    """An even element of Cl(3,0,1) (not normalised): it keeps grades 1, 2 and 3, the
    pseudoscalar, and the scalar with the pseudoscalar, each among themselves."""
    rng = np.random.default_rng(seed)
    even = np.array([bin(k).count("1") % 2 == 0 for k in range(16)])
    return np.where(even, rng.standard_normal(16), 0.0).astype(np.float32)


KEPT = [[15], [15, 0], [14, 7, 13, 11], POINTS, [1, 2, 4, 8], [12, 3, 5, 6, 9, 10]]
"""Sets an even element keeps x within (grade 3 in the caller's order first)."""


def _sets(seed: int) -> list[list[int]]:
    """Every width 1..16 as random blade sets in random order (a scalar rotor keeps any)."""
    rng = np.random.default_rng(seed)
    return [[int(b) for b in rng.permutation(16)[:k]] for k in range(1, 17)]


def _rows(n: int, k: int, seed: int, dtype=np.float32, special: bool = False) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, k)).astype(dtype)
    if special and n > 3:
        x[1, -1] = np.nan
        x[2, 0] = np.inf
        x[3, k // 2] = -np.inf
    return x


def _padded(x: np.ndarray, blades: list[int]) -> np.ndarray:
    dense = np.zeros((*x.shape[:-1], 16), dtype=x.dtype)
    dense[..., blades] = x
    return dense


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _same_but_zero_signs(got: np.ndarray, dense: np.ndarray, blades: list[int]) -> bool:
    """The documented relation: the dense output's bits on the named blades, except that a
    zero may have either sign."""
    want = dense[..., blades]
    same = _bits(got) == _bits(want)
    zeros = (got == 0) & (want == 0)
    return bool(np.all(same | zeros))


def _chain_separate(s: np.ndarray, x: np.ndarray, blades: list[int]) -> np.ndarray:
    """The documented chain with each fma rounded twice (as Mesa's lavapipe rounds it): the
    columns in increasing blade index, steps of ±0 entries skipped."""
    k = len(blades)
    order = sorted(range(k), key=lambda j: blades[j])
    out = np.zeros(x.shape, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(k):
            acc = np.full(x.shape[0], -0.0, dtype=np.float32)
            steps = 0
            for col in order:
                if s[j, col] != 0 or np.isnan(s[j, col]):
                    acc = (s[j, col] * x[:, col]).astype(np.float32) + acc
                    steps += 1
            out[:, j] = acc if steps else np.float32(0.0)
    return out


def test_lavapipe_computes_the_documented_chain(lavapipe: MultiGpuContext) -> None:
    r = _motor(1)
    for blades in KEPT:
        k = len(blades)
        # The sub-matrix as the kernel holds it: the image of each named blade alone.
        s = lavapipe.sandwich(r, np.eye(k, dtype=np.float32), PGA, blades=blades).T
        x = _rows(1001, k, 2, special=True)
        got = lavapipe.sandwich(r, x, PGA, blades=blades)
        assert np.array_equal(_bits(got), _bits(_chain_separate(s, x, blades))), blades


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_rows_of_some_blades_are_the_dense_rows(lavapipe, beside, host_only, dtype) -> None:
    """On every context, in every dtype, sizes with every tail, NaN and inf rows: the dense
    call's bits on the zero-padded rows (zero signs aside); the same bits on lavapipe alone
    and beside the host device, for every strategy."""
    cases = [(_motor(3), blades) for blades in KEPT]
    cases += [(np.eye(16, dtype=np.float32)[0] * 1.5, b) for b in _sets(4)]
    for case, (r32, blades) in enumerate(cases):
        r, k = r32.astype(dtype), len(blades)
        if dtype == np.float16 and k % 2:
            continue  # refused, see test_float16_needs_an_even_number_of_blades
        for n in SIZES:
            x = _rows(n, k, 10 * case + n, dtype, special=True)
            dense = _padded(x, blades)
            want = lavapipe.sandwich(r, x, PGA, blades=blades)
            assert want.shape == (n, k) and want.dtype == dtype
            assert _same_but_zero_signs(want, lavapipe.sandwich(r, dense, PGA), blades)
            for strategy in STRATEGIES:
                got = beside.sandwich(r, x, PGA, blades=blades, strategy=strategy)
                assert np.array_equal(_bits(got), _bits(want)), (blades, n, strategy)
            alone = host_only.sandwich(r, x, PGA, blades=blades)
            assert _same_but_zero_signs(alone, host_only.sandwich(r, dense, PGA), blades)


def test_the_avx2_level_gives_the_avx512_bits() -> None:
    """AMARI_GPU_SIMD=avx2 caps the host kernels at AVX2: the same bits as the detected level
    (AVX-512 on a CPU that has it), for the 4-blade kernel and the others."""
    import subprocess
    import sys

    script = """
import sys, numpy as np
from amari_gpu import Algebra, MultiGpuContext
ctx = MultiGpuContext(backends=["host"])
rng = np.random.default_rng(5)
r = np.where([bin(k).count("1") % 2 == 0 for k in range(16)], rng.standard_normal(16), 0)
r = r.astype(np.float32)
out = []
for blades in ([14, 7, 13, 11], [15, 0], [15], [0, 3, 5, 6, 9, 10, 12, 15], [1, 2, 4, 8]):
    x = rng.standard_normal((4099, len(blades))).astype(np.float32)
    x[5, 0] = np.nan
    x[9, -1] = np.inf
    out.append(ctx.sandwich(r, x, Algebra(3, 0, 1), blades=blades).view(np.uint32))
sys.stdout.write(np.concatenate([o.ravel() for o in out]).tobytes().hex())
"""
    runs = {}
    for level in ("", "avx2", "portable"):
        env = {**__import__("os").environ, "AMARI_GPU_SIMD": level}
        if not level:
            env.pop("AMARI_GPU_SIMD")
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        runs[level] = done.stdout
    assert runs[""] and runs[""] == runs["avx2"] == runs["portable"]


def test_nan_and_inf_reach_only_the_blades_they_map_to(beside: MultiGpuContext) -> None:
    """Grade 1 and grade 3 together: a NaN in a vector's column never reaches a point's."""
    r = _motor(6)
    blades = [1, 2, 4, 8, *POINTS]
    x = _rows(40, 8, 7)
    x[3, 0] = np.nan
    x[4, 5] = np.inf
    y = beside.sandwich(r, x, PGA, blades=blades)
    s = beside.sandwich(r, np.eye(8, dtype=np.float32), PGA, blades=blades).T
    assert np.array_equal(np.isnan(y[3]), s[:, 0] != 0)
    assert not np.isnan(y[3, 4:]).any() and not np.isnan(y[[0, 1, 2, 5]]).any()
    assert np.array_equal(~np.isfinite(y[4]), s[:, 5] != 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_error_is_within_the_dense_bound(host_only, lavapipe, dtype) -> None:
    """|y - y64| <= (2^n + 2) eps sum_i A[k][i] |x_i| (docs/api.md), y64 the float64
    sandwich of the zero-padded rows, eps the dtype's unit roundoff."""
    r = _motor(9)
    eps = 2.0**-24 if dtype == np.float32 else 2.0**-53
    m64, a = (np.asarray(v).T for v in sandwich((3, 0, 1), r.astype(np.float64), np.eye(16)))
    for blades in KEPT:
        x = _rows(500, len(blades), 10, dtype)
        x64 = _padded(x.astype(np.float64), blades).T
        bound = (18 * eps * (a @ np.abs(x64)))[blades]
        want = (m64 @ x64)[blades]
        for ctx in (host_only, lavapipe):
            got = ctx.sandwich(r.astype(dtype), x, PGA, blades=blades).astype(np.float64).T
            assert np.all(np.abs(got - want) <= bound), blades


def test_out_resident_rows_and_a_lone_row(beside: MultiGpuContext) -> None:
    r = _motor(11)
    blades = [13, 7, 14, 11]
    x = _rows(300, 4, 12)
    before = x.copy()
    want = beside.sandwich(r, x, PGA, blades=blades)
    out = np.full_like(x, np.nan)
    assert beside.sandwich(r, x, PGA, blades=blades, out=out) is out
    assert np.array_equal(_bits(out), _bits(want)) and np.array_equal(x, before)
    for row in (0, 299):
        lone = beside.sandwich(r, x[row], PGA, blades=blades)
        assert lone.shape == (4,) and np.array_equal(_bits(lone), _bits(want[row]))
    resident = beside.asarray(x)
    got = beside.sandwich(r, resident, PGA, blades=blades)
    assert got.shape == (300, 4)
    assert np.array_equal(_bits(np.asarray(got)), _bits(want))
    into = beside.asarray(np.zeros_like(x))
    assert beside.sandwich(beside.asarray(r), resident, PGA, blades=blades, out=into) is into
    assert np.array_equal(_bits(np.asarray(into)), _bits(want))


@pytest.mark.parametrize(
    ("blades", "message"),
    [
        ([], "expected at least one blade index"),
        ([7, 11, 7], "got 7 twice (position 2)"),
        ([7, 16], "got 16 at position 1"),
        ([-1, 7], "got -1 at position 0"),
        ([7, 1.5], "expected integer blade indices"),
        (7, "expected a sequence of blade indices"),
    ],
)
def test_bad_blades_are_refused(host_only, blades, message) -> None:
    x = _rows(5, 2, 1)
    with pytest.raises(InvalidArgumentError, match="blades: .*" + __import__("re").escape(message)):
        host_only.sandwich(_motor(1), x, PGA, blades=blades)


def test_a_rotor_that_leaks_a_named_blade_is_refused(host_only, lavapipe) -> None:
    """An element with odd parts takes a point to other grades; the scalar alone goes to the
    pseudoscalar under any even element (r r~ has an e0123 part): both name where."""
    odd = _motor(2)
    odd[1] = 0.5
    out = np.full((5, 4), 7.0, dtype=np.float32)
    for ctx in (host_only, lavapipe):
        with pytest.raises(InvalidArgumentError, match=r"blades: .*maps blade 7 \(blades\[0\]\)"):
            ctx.sandwich(odd, _rows(5, 4, 1), PGA, blades=POINTS, out=out)
        assert np.all(out == 7.0)
        with pytest.raises(InvalidArgumentError, match=r"maps blade 0 .* into blade 15"):
            ctx.sandwich(_motor(3), _rows(5, 1, 1), PGA, blades=[0])


def test_a_batch_of_rotors_and_rows_of_another_width_are_refused(host_only) -> None:
    r = np.stack([_motor(1), _motor(2)])
    with pytest.raises(InvalidArgumentError, match=r"r: expected one rotor of shape \(16,\)"):
        host_only.sandwich(r, _rows(2, 4, 1), PGA, blades=POINTS)
    with pytest.raises(ShapeError, match=r"x: expected shape \(\.\.\., 4\), got \(5, 16\)"):
        host_only.sandwich(_motor(1), _rows(5, 16, 1), PGA, blades=POINTS)


def test_float16_needs_an_even_number_of_blades(host_only) -> None:
    x = _rows(5, 3, 1, np.float16)
    with pytest.raises(InvalidArgumentError, match="blades: expected an even number of blades"):
        host_only.sandwich(_motor(1).astype(np.float16), x, PGA, blades=[7, 11, 13])
