"""float64 Fisher information: float64 scores (and bool or integer ones) accumulate in
float64 on the host device and on lavapipe (Vulkan, ``SHADER_F64``), within a summation
bound of a longdouble reference far below float32's, with the same bits on every device
count, device mix and strategy of a context; float32 scores keep their float32
accumulation, float16 scores accumulate in float32; ``natural_gradient`` solves with the
float64 matrix; llvmpipe (GL, no float64) is left out of float64 work."""

from __future__ import annotations

from typing import Any

import _dtype_helpers as helpers
import amari_gpu
import numpy as np
import pytest
from amari_gpu.errors import InvalidArgumentError, ShapeError

CHUNK = 256
"""Rows per chunk: every batch below is several chunks on every device of a context."""
EPS = np.finfo(np.float64).eps


def _context(**options: Any) -> amari_gpu.MultiGpuContext:
    return helpers.context(CHUNK, **options)


host64 = helpers.module_context(CHUNK, ["host"])
vulkan64 = helpers.module_context(CHUNK, ["vulkan"])


def _scores(n: int, p: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, p)) * np.exp(rng.uniform(-3, 3, p)), rng.random(n)


def _check_close(f: np.ndarray, g: np.ndarray, w: np.ndarray | None) -> None:
    """``f`` is sum_i w_i g_i g_i^T / sum_i w_i within the bound of a float64 summation of
    N terms (N eps per entry, relative to the sum of the terms' magnitudes); float32
    accumulation misses it by orders of magnitude."""
    ww = np.ones(len(g)) if w is None else w
    gl, wl = g.astype(np.longdouble), ww.astype(np.longdouble)
    exact = (gl * wl[:, None]).T @ gl / wl.sum()
    scale = (np.abs(gl) * wl[:, None]).T @ np.abs(gl) / wl.sum()
    err = np.abs(f.astype(np.longdouble) - exact) / scale
    assert f.dtype == np.float64
    assert float(err.max()) <= len(g) * EPS, float(err.max())
    assert float(err.max()) < 1e-12, float(err.max())


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("p", [1, 5, 37, 70])
def test_float64_scores_accumulate_in_float64_on_host_and_lavapipe(
    host64: amari_gpu.MultiGpuContext,
    vulkan64: amari_gpu.MultiGpuContext,
    p: int,
    weighted: bool,
) -> None:
    g, w = _scores(1500, p, seed=p)
    weights = w if weighted else None
    before = g.copy()
    for ctx in (host64, vulkan64):
        f = ctx.fisher_information(g, weights)
        _check_close(f, g, weights)
        assert np.array_equal(f, f.T)
    assert np.array_equal(g, before), "the scores are not modified"


def test_float64_bits_are_the_same_for_every_device_count_mix_and_strategy() -> None:
    g, w = _scores(3000, 23, seed=7)
    results = helpers.over_mixes(
        CHUNK, lambda ctx, strategy: ctx.fisher_information(g, w, strategy=strategy)
    )
    for f in results[1:]:
        assert f.tobytes() == results[0].tobytes()
    _check_close(results[0], g, w)


def test_lavapipe_runs_more_rows_than_its_loop_budget_in_one_call(
    vulkan64: amari_gpu.MultiGpuContext,
) -> None:
    # 70,000 rows in a default-sized context: chunks of at most 16,384 rows keep every
    # thread's loop within lavapipe's 65,535 trips; a cut loop would lose rows.
    ctx = amari_gpu.MultiGpuContext(backends=["vulkan"])
    try:
        g, _ = _scores(70_000, 4, seed=3)
        f = ctx.fisher_information(g)
        _check_close(f, g, None)
    finally:
        ctx.close()


def test_float32_scores_keep_float32_accumulation_and_float16_accumulates_in_float32(
    host64: amari_gpu.MultiGpuContext,
) -> None:
    g, w = _scores(1000, 9, seed=11)
    g16 = g.astype(np.float16)
    f16 = host64.fisher_information(g16)
    f32 = host64.fisher_information(g16.astype(np.float32))
    assert f16.dtype == np.float64
    assert f16.tobytes() == f32.tobytes()
    # float32 scores with float64 weights: float32 accumulation, as before dtypes were kept.
    a = host64.fisher_information(g.astype(np.float32), w)
    b = host64.fisher_information(g.astype(np.float32), w.astype(np.float32))
    assert a.tobytes() == b.tobytes()
    f64 = host64.fisher_information(g, w)
    assert not np.array_equal(a, f64)


def test_integer_scores_compute_in_float64(host64: amari_gpu.MultiGpuContext) -> None:
    rng = np.random.default_rng(5)
    # Values whose squares sum past float32's 24-bit integers: exact only in float64.
    g = rng.integers(-5000, 5000, size=(800, 6))
    f = host64.fisher_information(g)
    assert f.tobytes() == host64.fisher_information(g.astype(np.float64)).tobytes()
    exact = (g.astype(object).T @ g.astype(object)) / 800
    assert np.array_equal(f, exact.astype(np.float64))


def test_natural_gradient_solves_with_the_float64_matrix(
    vulkan64: amari_gpu.MultiGpuContext,
) -> None:
    g, w = _scores(900, 8, seed=2)
    grad = np.linspace(-1, 1, 8)
    x = vulkan64.natural_gradient(g, grad, 1e-3, weights=w)
    f = vulkan64.fisher_information(g, w)
    want = np.linalg.solve(f + 1e-3 * np.eye(8), grad)
    assert x.tobytes() == want.tobytes()


def test_float64_errors_name_the_argument_and_the_entry(
    host64: amari_gpu.MultiGpuContext,
) -> None:
    g, w = _scores(10, 3, seed=1)
    bad = g.copy()
    bad[4, 2] = np.nan
    with pytest.raises(
        InvalidArgumentError, match=r"^scores: expected finite values, got NaN at \[4, 2\]"
    ):
        host64.fisher_information(bad)
    assert np.isnan(bad[4, 2]) and np.isfinite(np.delete(bad.ravel(), 14)).all()
    w_bad = w.copy()
    w_bad[3] = -1.0
    with pytest.raises(
        InvalidArgumentError, match=r"^weights: expected finite values >= 0, got -1 at \[3\]"
    ):
        host64.fisher_information(g, w_bad)
    with pytest.raises(InvalidArgumentError, match=r"^weights: expected at least one weight > 0"):
        host64.fisher_information(g, np.zeros(10))
    with pytest.raises(ShapeError, match=r"^weights: expected shape \(10,\), got \(9,\)"):
        host64.fisher_information(g, w[:9])
    with pytest.raises(ShapeError, match=r"^scores: expected shape \(N, 3\) with N >= 1"):
        host64.fisher_information(np.zeros((0, 3)))
    with pytest.raises(
        ShapeError, match=r"^scores: expected shape \(N, W\) with 1 <= W <= 4096, got W = 4097"
    ):
        host64.fisher_information(np.zeros((2, 4097)))
    with pytest.raises(InvalidArgumentError, match=r"^scores: the float64 accumulation overflowed"):
        host64.fisher_information(np.full((2, 2), 1e200))


@pytest.mark.parametrize("kind", ["host", "vulkan"])
def test_float64_scores_found_non_finite_after_the_run_are_named_as_before(
    host64: amari_gpu.MultiGpuContext,
    vulkan64: amari_gpu.MultiGpuContext,
    kind: str,
) -> None:
    # The float64 call checks its scores only when its matrix is not finite (a non-finite
    # score makes its diagonal entry so): each kind of value, alone in its chunk or not,
    # in a row of weight 0 (NaN there), past a wide 64-column strip, and with bad weights
    # too (the scores are named first, as before) gives the first bad entry's error.
    ctx = host64 if kind == "host" else vulkan64
    g, w = _scores(1200, 70, seed=4)
    for value, at in [(np.nan, (4, 2)), (np.inf, (1199, 69)), (-np.inf, (700, 65))]:
        bad = g.copy()
        bad[at] = value
        bad[at[0] + 1 :, 0] = np.inf  # later bad entries: the first one is named
        before = bad.copy()
        text = {np.nan: "NaN", np.inf: "inf", -np.inf: "-inf"}[value]
        want = rf"^scores: expected finite values, got {text} at \[{at[0]}, {at[1]}\]$"
        for weights in (None, w, np.where(np.arange(1200) == at[0], 0.0, w)):
            with pytest.raises(InvalidArgumentError, match=want):
                ctx.fisher_information(bad, weights)
        w_bad = w.copy()
        w_bad[3] = -1.0
        with pytest.raises(InvalidArgumentError, match=want):
            ctx.fisher_information(bad, w_bad)
        assert np.array_equal(bad, before, equal_nan=True)


def test_a_mixed_context_runs_float64_fisher_on_vulkan_and_host_only() -> None:
    ctx = _context(backends=["vulkan", "gl", "host"])
    try:
        g, _ = _scores(2000, 5, seed=9)
        f = ctx.fisher_information(g, strategy="balanced")
        plan = ctx.last_plan
        assert plan is not None
        gl = {d.id for d in ctx.devices if d.adapter.backend == "gl"}
        assert gl and all(d.device_id not in gl for d in plan)
        assert {device for device, _ in plan.left_out} == gl
        _check_close(f, g, None)
    finally:
        ctx.close()


def test_a_gl_only_context_refuses_float64_scores_naming_its_devices() -> None:
    ctx = amari_gpu.MultiGpuContext(backends=["gl"])
    try:
        with pytest.raises(InvalidArgumentError) as raised:
            ctx.fisher_information(np.ones((4, 3)))
        message = str(raised.value)
        assert message.startswith("dtype: no device of this context computes in float64"), message
        for device in ctx.devices:
            assert f"float64 needs SHADER_F64: device {device.id} '" in message, message
        # float32 scores still run there.
        assert ctx.fisher_information(np.ones((4, 3), np.float32)).dtype == np.float64
    finally:
        ctx.close()
