"""The sandwich by one rotor is the linear map M of the rotor, built once per call on the host.

Each output blade is the chain ``acc = -0.0; acc = fma(M[k][i], x_i, acc)`` over the non-zero
``M[k][i]`` in increasing ``i``, +0.0 where there is none (docs/api.md). M is read back from
the kernel itself (the map of a basis blade e_i is column i, exactly); the chain replayed in
numpy with lavapipe's two roundings per ``fma`` must give lavapipe's bits; the host device
beside lavapipe must give the same bits for every size (tails, a lone row), strategy, NaN and
inf rows and a resident rotor; the error stays within the documented bound of the float64
sandwich.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from _ga_helpers import sandwich
from amari_gpu import STRATEGIES, Algebra, MultiGpuContext

SIGNATURES = [(3, 0, 0), (3, 0, 1), (1, 3, 0), (1, 0, 0), (4, 1, 0)]
SIZES = [1, 5, 63, 64, 65, 1000, 10_007]


@pytest.fixture(scope="module")
def lavapipe() -> Iterator[MultiGpuContext]:
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=64)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def beside() -> Iterator[MultiGpuContext]:
    """Lavapipe and the host device, which follows lavapipe's `fma` rounding."""
    ctx = MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2, chunk_items=64)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def host_only() -> Iterator[MultiGpuContext]:
    ctx = MultiGpuContext(backends=["host"], chunk_items=64)
    yield ctx
    ctx.close()


def _rotor(sig: tuple[int, int, int], seed: int) -> np.ndarray:
    """An even multivector (a rotor or motor, not normalised) of the algebra."""
    rng = np.random.default_rng(seed)
    w = 1 << sum(sig)
    even = np.array([bin(k).count("1") % 2 == 0 for k in range(w)])
    return np.where(even, rng.standard_normal(w), 0.0).astype(np.float32)


def _points(w: int, n: int, seed: int, special: bool = False) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, w)).astype(np.float32)
    if special and n > 3:
        x[1, -1] = np.nan
        x[2, 0] = np.inf
        x[3, w // 2] = -np.inf
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def _map(ctx: MultiGpuContext, alg: Algebra, r: np.ndarray) -> np.ndarray:
    """M as the kernel holds it: the map of e_i is M[k][i] * 1 = M[k][i] exactly (the other
    steps add products with 0, which leave a non-zero sum as it is)."""
    w = r.shape[0]
    return ctx.sandwich(r, np.eye(w, dtype=np.float32), alg).T


def _chain_separate(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The documented chain with each fma rounded twice (as Mesa's lavapipe rounds it)."""
    w = m.shape[0]
    out = np.zeros(x.shape, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(w):
            acc = np.full(x.shape[0], -0.0, dtype=np.float32)
            steps = 0
            for i in range(w):
                if m[k, i] != 0 or np.isnan(m[k, i]):
                    acc = (m[k, i] * x[:, i]).astype(np.float32) + acc
                    steps += 1
            out[:, k] = acc if steps else np.float32(0.0)
    return out


@pytest.mark.parametrize("sig", SIGNATURES, ids=str)
def test_lavapipe_computes_the_documented_chain(lavapipe: MultiGpuContext, sig) -> None:
    alg = Algebra(*sig)
    r = _rotor(sig, 1)
    x = _points(1 << sum(sig), 1000, 2, special=True)
    m = _map(lavapipe, alg, r)
    assert np.array_equal(_bits(_chain_separate(m, x)), _bits(lavapipe.sandwich(r, x, alg)))


@pytest.mark.parametrize("sig", SIGNATURES, ids=str)
def test_host_and_lavapipe_give_the_same_bits(
    lavapipe: MultiGpuContext, beside: MultiGpuContext, sig
) -> None:
    alg = Algebra(*sig)
    w = 1 << sum(sig)
    r = _rotor(sig, 3)
    for n in SIZES:
        x = _points(w, n, n, special=True)
        want = _bits(lavapipe.sandwich(r, x, alg))
        for strategy in STRATEGIES:
            got = _bits(beside.sandwich(r, x, alg, strategy=strategy))
            assert np.array_equal(got, want), (sig, n, strategy)


def test_the_host_alone_builds_the_same_map(lavapipe, host_only) -> None:
    """M is built on the host before the split: the same words whichever devices run it."""
    alg = Algebra(3, 0, 1)
    r = _rotor((3, 0, 1), 4)
    assert np.array_equal(_bits(_map(host_only, alg, r)), _bits(_map(lavapipe, alg, r)))


def test_a_lone_row_and_a_resident_rotor_give_the_batch_bits(beside: MultiGpuContext) -> None:
    alg = Algebra(3, 0, 1)
    r = _rotor((3, 0, 1), 5)
    x = _points(16, 300, 6)
    batch = beside.sandwich(r, x, alg)
    for row in (0, 7, 299):
        assert np.array_equal(_bits(beside.sandwich(r, x[row], alg)), _bits(batch[row]))
        assert np.array_equal(
            _bits(beside.sandwich(r[None], x[row : row + 1], alg)), _bits(batch[row : row + 1])
        )
    resident = beside.asarray(r)
    assert np.array_equal(_bits(beside.sandwich(resident, x, alg)), _bits(batch))


def test_an_even_rotor_keeps_grades_exactly(beside: MultiGpuContext) -> None:
    """Terms that cancel for every rotor are not in M: a rotated vector has no other grade."""
    r = _rotor((3, 0, 0), 7)
    x = np.zeros((50, 8), dtype=np.float32)
    x[:, [1, 2, 4]] = _points(3, 50, 8)
    y = beside.sandwich(r, x)
    assert np.all(y[:, [0, 3, 5, 6, 7]] == 0.0)
    assert np.all(y[:, [1, 2, 4]] != 0.0)


@pytest.mark.parametrize("sig", SIGNATURES, ids=str)
def test_error_is_within_the_documented_bound(host_only, lavapipe, sig) -> None:
    """|y_k - y64_k| <= (n + 2) 2^-24 sum_i A[k][i] |x_i|, y64 the float64 sandwich, n = 2^dim,
    A[k][i] the sum of |r_a| |r_b| over the products r_a e_i r~_b that land on e_k."""
    alg = Algebra(*sig)
    w = 1 << sum(sig)
    r = _rotor(sig, 9)
    x = _points(w, 2000, 10)
    m64, a = (np.asarray(v).T for v in sandwich(sig, r, np.eye(w)))
    x64 = x.astype(np.float64).T
    bound = (w + 2) * 2.0**-24 * (a @ np.abs(x64))
    for ctx in (host_only, lavapipe):
        got = ctx.sandwich(r, x, alg).astype(np.float64).T
        assert np.all(np.abs(got - m64 @ x64) <= bound), sig


def test_large_new_results_in_reused_memory_are_written_whole(host_only) -> None:
    """A new result of 1 MiB or more takes memory an earlier result released (docs/api.md):
    every word is the call's, whatever the memory held, and live results never share it."""
    alg = Algebra(3, 0, 1)
    r = _rotor((3, 0, 1), 11)
    x = _points(16, 1 << 15, 12)
    want = np.empty_like(x)
    host_only.sandwich(r, x, alg, out=want)
    for _ in range(3):
        junk = host_only.sandwich(r, x, alg)
        junk[...] = np.nan
        del junk
        got = host_only.sandwich(r, x, alg)
        assert got.flags.writeable and got.flags.c_contiguous
        assert np.array_equal(_bits(got), _bits(want))
        other = host_only.sandwich(r, x, alg)
        assert not np.shares_memory(got, other)
        assert np.array_equal(_bits(other), _bits(want))
