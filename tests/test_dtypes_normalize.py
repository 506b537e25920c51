"""float64 ``normalize``: float64 in, float64 out, by the float32 kernel's steps (exact
power-of-two scaling, each result as (fraction / norm) x power of two), within a few ulps of a
longdouble reference over every magnitude (huge, tiny and subnormal rows; zero and null rows
kept), and the same bits on the host device and lavapipe within a context, over device
counts, mixes and strategies; llvmpipe (GL, no float64) is left out, the plan saying why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import _dtype_helpers as helpers
import amari_gpu
import numpy as np
import pytest
from _ga_helpers import reverse_signs, table
from amari_gpu import Algebra
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CHUNK = 64
SIGNATURES = [(1, 0, 0), (3, 0, 0), (3, 0, 1), (4, 1, 0)]
"""Two blades (scalar rows in the kernel), vec4 rows, a degenerate metric (null blades not
entering the norm) and an indefinite one."""
MAX = np.finfo(np.float64).max
TINY = np.finfo(np.float64).smallest_subnormal

host64 = helpers.module_context(CHUNK, ["host"])
vulkan64 = helpers.module_context(CHUNK, ["vulkan"])
both64 = helpers.module_context(CHUNK, ["vulkan", "host"])
"""lavapipe and the host device: the host's kernels round fma as lavapipe does (bits are
promised within a context; a host-only context rounds fma as the host CPU does)."""


@pytest.fixture(scope="module")
def mixed64() -> Iterator[amari_gpu.MultiGpuContext]:
    """lavapipe twice, llvmpipe twice and the host device."""
    ctx = helpers.context(CHUNK, backends=["vulkan", "gl", "host"], devices_per_adapter=2)
    yield ctx
    ctx.close()


def _signs(sig: tuple[int, int, int]) -> np.ndarray:
    """The sign of x_k² in ⟨x x̃⟩₀ per blade (0 for the null ones)."""
    t = table(*sig)
    square = np.zeros(1 << t.n)
    diagonal = (t.i == t.j) & (t.k == 0)
    square[t.i[diagonal]] = t.coef[diagonal]
    return square * reverse_signs(sig)


def _reference(sig: tuple[int, int, int], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x / sqrt|⟨x x̃⟩₀| in longdouble, rows with ⟨x x̃⟩₀ = 0 kept; the per-row condition
    number Σ|terms| / |⟨x x̃⟩₀|)."""
    xl = x.astype(np.longdouble)
    signs = _signs(sig).astype(np.longdouble)
    squares = xl * xl * signs
    n2 = squares.sum(axis=1)
    null = n2 == 0
    scale = np.sqrt(np.abs(np.where(null, 1, n2)))
    with np.errstate(divide="ignore", invalid="ignore"):
        condition = np.where(null, np.inf, np.abs(squares).sum(axis=1) / np.abs(n2))
    return np.where(null[:, None], xl, xl / scale[:, None]), condition


def _assert_within_ulps(got: np.ndarray, sig: tuple[int, int, int], x: np.ndarray) -> None:
    """``got`` within 4 ulps of the row's largest result (times the condition number) of
    the longdouble reference, plus the subnormal grid's spacing (a subnormal result rounds
    twice); a result past float64's range is that infinity; zero rows are kept bit for bit."""
    assert got.dtype == np.float64
    want, condition = _reference(sig, x)
    entering = _signs(sig) != 0
    zero = ~np.any(x[:, entering] != 0, axis=1)
    np.testing.assert_array_equal(got[zero].view(np.uint64), x[zero].view(np.uint64))
    ok = ~zero & (condition <= 1e4)
    got, want, condition = got[ok], want[ok], condition[ok]
    past = np.abs(want) > MAX
    assert np.all(np.isinf(got[past]) & (np.sign(got[past]) == np.sign(want[past])))
    finite = np.where(past, 0, want)
    bound = 4 * np.finfo(np.float64).eps * np.abs(finite).max(axis=1) * condition
    error = np.abs(np.where(past, 0, got).astype(np.longdouble) - finite)
    # Near float64's largest value the longdouble quotient may round to either side of it.
    edge = np.isinf(got) & (np.abs(finite) >= MAX * (1 - 4 * np.finfo(np.float64).eps))
    error = np.where(edge, 0, error)
    worst = (error - bound[:, None] - TINY).max(initial=-1)
    assert worst <= 0, (sig, error.max(), bound.max())


def _extreme_rows(sig: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    """Rows of every kind: random magnitudes from the subnormals to float64's largest (each
    row one magnitude, so its squares would overflow or underflow unscaled), mixed huge and
    tiny entries, subnormal-only rows, zero and -0 rows, a huge null part beside tiny
    entering ones, and rows holding NaN or ±inf beside +0, -0 and finite entries."""
    blades = 1 << sum(sig)
    n = 40
    fraction = rng.uniform(0.5, 1.0, (n, blades)) * rng.choice([-1.0, 1.0], (n, blades))
    exponent = rng.integers(-1070, 1024, (n, 1))
    rows = [np.ldexp(fraction, exponent)]
    mixed = np.ldexp(fraction, rng.integers(-1074, 1024, (n, blades)))
    rows.append(mixed)
    rows.append(rng.integers(-(2**20), 2**20, (8, blades)) * TINY)
    rows.append(np.zeros((2, blades)))
    rows.append(np.full((2, blades), -0.0))
    rows.append(np.full((2, blades), MAX) * rng.choice([-1.0, 1.0], (2, blades)))
    null_part = np.ldexp(fraction[:8], -1060)
    null_part[:, _signs(sig) == 0] = 1e300
    rows.append(null_part)
    special = np.ldexp(fraction[:12], exponent[:12])
    special[:, 0] = [np.inf, -np.inf, np.nan, -np.nan] * 3
    special[:, -1] = [0.0, -0.0, 1.0, -1.0] * 3
    rows.append(special)
    return np.ascontiguousarray(np.concatenate(rows))


def test_float64_normalize_returns_float64_within_a_few_ulps(
    host64: amari_gpu.MultiGpuContext, vulkan64: amari_gpu.MultiGpuContext
) -> None:
    rng = np.random.default_rng(28)
    for sig in SIGNATURES:
        x = _extreme_rows(sig, rng)
        finite = np.all(np.isfinite(x), axis=1)
        before = x.copy()
        for ctx in (host64, vulkan64):
            got = ctx.normalize(x, Algebra(*sig))
            assert got.dtype == np.float64
            _assert_within_ulps(got[finite], sig, x[finite])
        np.testing.assert_array_equal(x.view(np.uint64), before.view(np.uint64))


def test_nan_and_inf_rows_follow_the_float32_rule_in_float64(
    host64: amari_gpu.MultiGpuContext,
) -> None:
    x = np.array(
        [
            [1.0, np.inf, 0.0, -0.0, 2.0, -np.inf, -3.0, 4.0],
            [1.0, -np.nan, 0.0, -0.0, 2.0, 5.0, -3.0, 4.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, np.nan, 0.0],
        ]
    )
    got = host64.normalize(x, Algebra(2, 0, 1)).view(np.uint64)
    qnan = 0x7FF8000000000000
    zero, negative_zero = 0, 0x8000000000000000
    assert got[0].tolist() == [zero, qnan, zero, negative_zero, zero, qnan, negative_zero, zero]
    assert got[1:].tolist() == [[qnan] * 8] * 2


def test_float64_normalize_is_bit_identical_on_every_device_mix(
    vulkan64: amari_gpu.MultiGpuContext,
    both64: amari_gpu.MultiGpuContext,
    mixed64: amari_gpu.MultiGpuContext,
) -> None:
    rng = np.random.default_rng(6)
    gl = [d.id for d in mixed64.devices if d.adapter.backend == "gl"]
    assert gl
    counts = [helpers.context(CHUNK, backends=["vulkan"], devices_per_adapter=n) for n in (2, 3)]
    try:
        for sig in SIGNATURES:
            x = np.concatenate([_extreme_rows(sig, rng) for _ in range(4)])
            algebra = Algebra(*sig)
            want = vulkan64.normalize(x, algebra).view(np.uint64)
            # lavapipe and the host device in one context, both taking rows.
            got = both64.normalize(x, algebra, strategy="balanced")
            plan = both64.last_plan
            assert plan is not None and {w.device_id for w in plan} == {
                d.id for d in both64.devices
            }, plan
            np.testing.assert_array_equal(got.view(np.uint64), want, f"{sig} host + lavapipe")
            for ctx in (mixed64, *counts):
                for strategy in amari_gpu.STRATEGIES:
                    got = ctx.normalize(x, algebra, strategy=strategy)
                    np.testing.assert_array_equal(got.view(np.uint64), want, f"{sig} {strategy}")
            plan = mixed64.last_plan
            assert plan is not None and all(w.device_id not in gl for w in plan)
            assert {device for device, _ in plan.left_out} == set(gl)
            for device, reason in plan.left_out:
                assert reason.startswith(f"float64 needs SHADER_F64: device {device} '"), reason
    finally:
        for ctx in counts:
            ctx.close()


@pytest.mark.parametrize("sig", SIGNATURES)
def test_float64_normalize_of_rows_in_the_least_normal_binades_is_the_same_on_every_device(
    sig: tuple[int, int, int],
    host64: amari_gpu.MultiGpuContext,
    vulkan64: amari_gpu.MultiGpuContext,
    both64: amari_gpu.MultiGpuContext,
) -> None:
    """Entries in [2^-1024, 2^-1019), where halving an entry rounds in the subnormals: the
    kernel's frexp must not take a constant factor a compiler may move before the others
    (lavapipe's did, and a third of these rows came back 1-2 ulps off the host's in a context
    of both)."""
    rng = np.random.default_rng(1021)
    blades = 1 << sum(sig)
    n = 3000
    fraction = rng.uniform(0.5, 1.0, (n, blades)) * rng.choice([-1.0, 1.0], (n, blades))
    x = np.ldexp(fraction, rng.integers(-1023, -1018, (n, blades)))
    algebra = Algebra(*sig)
    want = vulkan64.normalize(x, algebra).view(np.uint64)
    got = both64.normalize(x, algebra, strategy="balanced")
    plan = both64.last_plan
    assert plan is not None and {w.device_id for w in plan} == {d.id for d in both64.devices}
    np.testing.assert_array_equal(got.view(np.uint64), want)
    for ctx in (host64, vulkan64):
        _assert_within_ulps(ctx.normalize(x, algebra), sig, x)


def test_float32_normalize_is_unchanged_by_the_float64_kernel(
    host64: amari_gpu.MultiGpuContext, vulkan64: amari_gpu.MultiGpuContext
) -> None:
    x = np.random.default_rng(3).standard_normal((300, 8))
    for ctx in (host64, vulkan64):
        got = ctx.normalize(x, dtype=np.float32)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, ctx.normalize(x.astype(np.float32)))
        # float16 rows: the float32 normalize of the widened rows, rounded once (issue 28).
        x16 = x.astype(np.float16)
        want = ctx.normalize(x16.astype(np.float32)).astype(np.float16)
        np.testing.assert_array_equal(ctx.normalize(x16).view(np.uint16), want.view(np.uint16))


_magnitudes = st.integers(-1074, 1023)


@st.composite
def _rows(draw: Any, blades: int) -> np.ndarray:
    n = draw(st.integers(1, 6))
    centre = draw(_magnitudes)
    spread = draw(st.integers(0, 120))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    fraction = rng.uniform(0.5, 1.0, (n, blades)) * rng.choice([-1.0, 0.0, 1.0], (n, blades))
    exponent = np.clip(centre + rng.integers(-spread, spread + 1, (n, blades)), -1074, 1023)
    return np.ldexp(fraction, exponent)


@pytest.mark.parametrize("sig", SIGNATURES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_float64_normalize_over_magnitudes_matches_longdouble_on_host_and_lavapipe(
    sig: tuple[int, int, int],
    data: st.DataObject,
    host64: amari_gpu.MultiGpuContext,
    vulkan64: amari_gpu.MultiGpuContext,
    both64: amari_gpu.MultiGpuContext,
) -> None:
    x = data.draw(_rows(1 << sum(sig)))
    algebra = Algebra(*sig)
    for ctx in (host64, vulkan64):
        _assert_within_ulps(ctx.normalize(x, algebra), sig, x)
    np.testing.assert_array_equal(
        both64.normalize(x, algebra).view(np.uint64),
        vulkan64.normalize(x, algebra).view(np.uint64),
    )
