"""``fisher_categorical`` and ``fisher_gaussian`` on float64 DeviceArrays (issue 28 item 4):
computed in float64 where the rows live, a float64 DeviceArray with the input's sharding and
the bits of the float64 numpy path, on the host device, lavapipe and mixes of them (never on
llvmpipe GL, which holds no float64 rows); the checks made on the devices from the float64
words, with the numpy path's errors word for word; dtypes promoted as numpy does, a
DeviceArray of another dtype than the promotion (float16 among them) refused by name."""

from __future__ import annotations

from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import gl_device_ids

CONTEXTS = ["host", "lavapipe", "2 lavapipe+host", "lavapipe+gl"]


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, ag.MultiGpuContext]]:
    made = {
        "host": ag.MultiGpuContext(backends=["host"]),
        "lavapipe": ag.MultiGpuContext(backends=["vulkan"]),
        "2 lavapipe+host": ag.MultiGpuContext(
            backends=["vulkan", "host"], devices_per_adapter=2, chunk_items=64
        ),
        "lavapipe+gl": ag.MultiGpuContext(backends=["vulkan", "gl"]),
    }
    yield made
    for ctx in made.values():
        ctx.close()


def _probs(seed: int, n: int, k: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(k), n)


def _scaled(sharding: list[tuple[int, int, int]], rows: int) -> list[tuple[int, int, int]]:
    """A sharding of samples as one of their result's rows (``rows`` per sample)."""
    return [(d, a * rows, b * rows) for d, a, b in sharding]


def _same(got: object, want: np.ndarray) -> None:
    assert isinstance(got, ag.DeviceArray)
    assert got.dtype == np.float64 and want.dtype == np.float64
    assert got.shape == want.shape
    assert got.numpy().tobytes() == want.tobytes()


def _error(call: object, *args: object, **kwargs: object) -> tuple[type, str]:
    with pytest.raises(ag.AmariGpuError) as info:
        call(*args, **kwargs)  # type: ignore[operator]
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name", CONTEXTS)
def test_categorical_is_the_float64_numpy_paths_bits(
    contexts: dict[str, ag.MultiGpuContext], name: str
) -> None:
    ctx = contexts[name]
    for seed, (n, k) in enumerate([(1, 1), (333, 3), (97, 65)]):
        p = _probs(seed, n, k)
        logits = np.random.default_rng(seed).standard_normal((n, k)) * 5
        p_before, l_before = p.copy(), logits.copy()
        dp = ctx.asarray(p, strategy="balanced")
        assert dp.dtype == np.float64
        got = ctx.fisher_categorical(dp)
        want = ctx.fisher_categorical(p)
        _same(got, want)
        assert got.sharding == _scaled(dp.sharding, k)
        # Each entry one fused (or, as lavapipe rounds it, two separate) float64 roundings
        # of p_r [r == c] - p_r p_c: within an ulp of its terms' magnitude of the longdouble.
        q = p.astype(np.longdouble)
        diag, outer = np.einsum("ni,ij->nij", q, np.eye(k)), np.einsum("ni,nj->nij", q, q)
        terms = np.maximum(diag + outer, 2.0**-1022)
        assert np.all(np.abs(want - (diag - outer)) <= 2.0**-52 * terms)
        dl = ctx.asarray(logits, strategy="capability")
        got = ctx.fisher_categorical(logits=dl)
        _same(got, ctx.fisher_categorical(logits=logits))
        assert got.sharding == _scaled(dl.sharding, k)
        assert np.array_equal(p, p_before) and np.array_equal(logits, l_before)


@pytest.mark.parametrize("name", CONTEXTS)
def test_gaussian_is_the_float64_numpy_paths_bits(
    contexts: dict[str, ag.MultiGpuContext], name: str
) -> None:
    ctx = contexts[name]
    rng = np.random.default_rng(5)
    for n, d in [(1, 1), (200, 3), (90, 20)]:
        mean = rng.standard_normal((n, d))
        # Variances far outside float32's range: float64 computes them.
        var = rng.random((n, d)) * 10.0 ** rng.integers(-200, 200, (n, d)) + 1e-300
        before = var.copy()
        want = ctx.fisher_gaussian(mean, var)
        assert np.all(np.isfinite(want[:, :d, :d].diagonal(axis1=1, axis2=2)))
        dm = ctx.asarray(mean, strategy="balanced")
        dv = ctx.asarray(var, strategy="capability")
        for m, v, like in [(dm, dv, dv), (mean, dv, dv), (dm, var, dm)]:
            got = ctx.fisher_gaussian(m, v)
            _same(got, want)
            assert got.sharding == _scaled(like.sharding, 2 * d)
        assert np.array_equal(var, before)
        # Correctly rounded float64 divisions: 1 / var exactly as numpy divides.
        diag = want.diagonal(axis1=1, axis2=2)
        assert np.array_equal(diag[:, :d], 1.0 / var)


def test_past_the_loop_cap_on_lavapipe(contexts: dict[str, ag.MultiGpuContext]) -> None:
    # 70,000 rows on one lavapipe device: every row checked and mapped.
    ctx = contexts["lavapipe"]
    p = _probs(21, 70_000, 3)
    p[69_999] = [0.25, 0.25, 0.25]  # the last row sums to 0.75
    with pytest.raises(ag.InvalidArgumentError) as numpy_path:
        ctx.fisher_categorical(p)
    with pytest.raises(ag.InvalidArgumentError) as resident:
        ctx.fisher_categorical(ctx.asarray(p))
    assert str(resident.value) == str(numpy_path.value)
    assert "row 69999" in str(resident.value)
    p[69_999] = [0.5, 0.25, 0.25]
    _same(ctx.fisher_categorical(ctx.asarray(p)), ctx.fisher_categorical(p))


def test_float64_rows_never_sit_on_the_gl_device(contexts: dict[str, ag.MultiGpuContext]) -> None:
    ctx = contexts["lavapipe+gl"]
    gl = gl_device_ids(ctx)
    p = _probs(3, 2_000, 4)
    dp = ctx.asarray(p)
    with ctx.profile() as prof:
        got = ctx.fisher_categorical(dp)
        ctx.fisher_gaussian(p, ctx.asarray(p + 1.0))
    assert not {d for d, _, _ in got.sharding} & gl
    assert not {e["device"] for e in prof.events if e["kind"] == "kernel"} & gl
    _same(got, ctx.fisher_categorical(p))


@pytest.mark.parametrize("name", ["host", "2 lavapipe+host"])
def test_errors_are_the_numpy_paths(contexts: dict[str, ag.MultiGpuContext], name: str) -> None:
    ctx = contexts[name]
    p = _probs(7, 300, 5)
    cases = [(250, 2, np.nan), (17, 0, -1e-300), (299, 4, np.inf), (3, 1, 0.5), (9, 3, 1e300)]
    for row, col, value in cases:
        q = p.copy()
        q[row, col] = value
        want = _error(ctx.fisher_categorical, q)
        assert _error(ctx.fisher_categorical, ctx.asarray(q, strategy="balanced")) == want
    logits = np.zeros((300, 5))
    logits[123, 4] = np.inf
    want = _error(ctx.fisher_categorical, logits=logits)
    assert _error(ctx.fisher_categorical, logits=ctx.asarray(logits)) == want
    mean = np.zeros((300, 4))
    var = np.ones((300, 4))
    for row, value in [(200, 0.0), (3, -1e-300), (299, np.inf), (5, -0.0)]:
        v = var.copy()
        v[row, 1] = value
        want = _error(ctx.fisher_gaussian, mean, v)
        assert _error(ctx.fisher_gaussian, mean, ctx.asarray(v)) == want
        assert _error(ctx.fisher_gaussian, ctx.asarray(mean), v) == want
    m = mean.copy()
    m[150, 2] = np.nan
    want = _error(ctx.fisher_gaussian, m, var)
    assert _error(ctx.fisher_gaussian, ctx.asarray(m), ctx.asarray(var)) == want
    assert _error(ctx.fisher_gaussian, ctx.asarray(m), var) == want


def test_rows_near_the_tolerance_pass_as_on_the_numpy_path(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    # A sum within the tolerance by less than the devices' float32 slack: flagged there,
    # cleared by the exact float64 check; a float64 difference float32 cannot hold passes.
    ctx = contexts["2 lavapipe+host"]
    p = np.zeros((16, 300))
    p[:, 0] = 0.5
    p[:, 1] = 0.5
    p[7, 1] = 0.500999
    p[8, 1] = 0.5 + 1e-12
    _same(ctx.fisher_categorical(ctx.asarray(p, strategy="balanced")), ctx.fisher_categorical(p))


def test_dtypes_promote_as_numpy_and_other_dtypes_are_refused(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    ctx = contexts["2 lavapipe+host"]
    p = _probs(8, 50, 3)
    # A float64 DeviceArray with a float32 numpy partner: float64, the partner converted.
    var32 = (p + 1.0).astype(np.float32)
    got = ctx.fisher_gaussian(var32, ctx.asarray(p + 1.0))
    _same(got, ctx.fisher_gaussian(var32.astype(np.float64), p + 1.0))
    # A float32 DeviceArray with a float64 numpy partner: float64, which it does not hold.
    with pytest.raises(
        ag.InvalidArgumentError, match=r"mean: expected a DeviceArray of float64 .*float32"
    ):
        ctx.fisher_gaussian(ctx.asarray(p.astype(np.float32)), p + 1.0)
    with pytest.raises(
        ag.InvalidArgumentError, match=r"var: expected a DeviceArray of float64 .*float32"
    ):
        ctx.fisher_gaussian(p, ctx.asarray((p + 1.0).astype(np.float32)))
    # dtype= does not convert a DeviceArray.
    with pytest.raises(
        ag.InvalidArgumentError, match=r"probs: expected a DeviceArray of float32 .*float64"
    ):
        ctx.fisher_categorical(ctx.asarray(p), dtype=np.float32)
    # float16 DeviceArrays: refused, naming the argument and the conversion.
    p4 = _probs(8, 50, 4)  # float16 rows hold an even number of values
    x16 = ctx.asarray(p4.astype(np.float16))
    with pytest.raises(
        ag.InvalidArgumentError,
        match=r"probs: expected a DeviceArray of float32 .*float16.*dtype=numpy.float32",
    ):
        ctx.fisher_categorical(x16)
    with pytest.raises(ag.InvalidArgumentError, match=r"var: expected a DeviceArray of float32"):
        ctx.fisher_gaussian(p4.astype(np.float32), ctx.asarray((p4 + 1.0).astype(np.float16)))


def test_out_device_array_and_numpy(contexts: dict[str, ag.MultiGpuContext]) -> None:
    ctx = contexts["2 lavapipe+host"]
    p = _probs(9, 120, 4)
    want = ctx.fisher_categorical(p)
    dp = ctx.asarray(p, strategy="balanced")
    out = ctx.asarray(np.zeros((120, 4, 4)), strategy="capability")
    assert ctx.fisher_categorical(dp, out=out) is out
    assert out.dtype == np.float64
    assert out.numpy().tobytes() == want.tobytes()
    host_out = np.full((120, 4, 4), np.nan)
    assert ctx.fisher_categorical(dp, out=host_out) is host_out
    assert host_out.tobytes() == want.tobytes()
    var = p + 0.5
    g_out = np.empty((120, 8, 8))
    assert ctx.fisher_gaussian(p, ctx.asarray(var), out=g_out) is g_out
    assert g_out.tobytes() == ctx.fisher_gaussian(p, var).tobytes()
    wrong = ctx.asarray(np.zeros((120, 4, 4), np.float32))
    with pytest.raises((ag.InvalidArgumentError, TypeError), match="out"):
        ctx.fisher_categorical(dp, out=wrong)
    assert np.all(wrong.numpy() == 0.0)
    with pytest.raises((ag.InvalidArgumentError, TypeError), match="out"):
        ctx.fisher_categorical(dp, out=np.empty((120, 4, 4), np.float32))


def test_probabilities_stay_on_the_devices(contexts: dict[str, ag.MultiGpuContext]) -> None:
    # The checks read back one word per run of rows, not the rows; the result stays.
    ctx = contexts["2 lavapipe+host"]
    p = _probs(11, 4096, 16)
    dp = ctx.asarray(p, strategy="balanced")
    before = sum(s["bytes_down"] for s in ctx.stats())
    got = ctx.fisher_categorical(dp)
    down = sum(s["bytes_down"] for s in ctx.stats()) - before
    assert down < p.nbytes / 10, down
    _same(got, ctx.fisher_categorical(p))
