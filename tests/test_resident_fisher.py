"""``fisher_information`` (and ``natural_gradient``) of resident scores: reduced where the
rows live (several lavapipe devices, the host device alone, both together), bit-identical to
the numpy path whatever the sharding, the chunk grid, the scaling (tiny, huge and subnormal
values), the weights; the numpy path's errors word for word; a device failing mid-call;
``out=``; the scores never crossing to the host.

The numpy path is itself checked against float64 references in test_fisher*.py; here it is
the reference, compared bit for bit."""

from __future__ import annotations

from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import SHARDINGS, assert_faults_change_nothing, sharding_settings
from hypothesis import given
from hypothesis import strategies as st

# (N, P): one row; P below, at and above 4 and 64 (vec4 padding; 8 x 8 blocks or 64 x 64
# tiles); N not a multiple of the 64-row chunks of the test contexts.
SHAPES = [(1, 1), (5, 3), (130, 9), (700, 64), (333, 65), (1000, 130), (64, 4)]


@pytest.fixture(scope="module")
def default_grid() -> Iterator[ag.MultiGpuContext]:
    """Two lavapipe devices and the host device on the default chunk grid (chunks of
    thousands of rows, so shard boundaries cut chunks and shards hold several)."""
    ctx = ag.MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2)
    yield ctx
    ctx.close()


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return (
        got.dtype == np.float64
        and got.shape == want.shape
        and np.array_equal(_bits(got), _bits(want))
    )


def _scores(seed: int, n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((n, p)).astype(np.float32),
        rng.random(n).astype(np.float32),
    )


@pytest.mark.parametrize("fixture", ["ctx3", "mixed", "host", "default_grid"])
@pytest.mark.parametrize("strategy", ["balanced", "capability"])
def test_resident_fisher_equals_the_numpy_path(
    fixture: str, strategy: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    for seed, (n, p) in enumerate(SHAPES):
        s, w = _scores(seed, n, p)
        s_before, w_before = s.copy(), w.copy()
        d = ctx.asarray(s, strategy=strategy)
        for weights in (None, w):
            want = ctx.fisher_information(s, weights)
            got = ctx.fisher_information(d, weights)
            assert _same(got, want), (n, p, d.sharding, weights is None)
        assert np.array_equal(d.numpy(), s)
        assert np.array_equal(s, s_before) and np.array_equal(w, w_before)


def test_many_chunks_per_shard_and_cut_chunks_on_the_default_grid(
    default_grid: ag.MultiGpuContext,
) -> None:
    # Enough rows for several default-sized chunks on every device, so each shard runs a
    # batch of chunks and each boundary between shards cuts one.
    s, w = _scores(7, 70_001, 16)
    d = default_grid.asarray(s, strategy="balanced")
    assert len(d.sharding) == 3
    assert _same(default_grid.fisher_information(d, w), default_grid.fisher_information(s, w))


# Columns tiny, huge, ordinary and all zero; values spanning so far below a column's largest
# that scaling the column brings them into float32's subnormal range (rounded there).
def _extreme(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((n, 6)).astype(np.float64)
    s[:, 0] *= 1e-25
    s[:, 1] *= 1e30
    s[:, 2] *= 10.0 ** rng.uniform(-40, 30, n)
    s[:, 3] = 0.0
    s[:, 4] *= 1e-42  # subnormal scores
    return s.astype(np.float32)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed", "host"])
@pytest.mark.parametrize(
    "weights", [None, "subnormal", "huge", "sparse"], ids=["none", "sub", "huge", "sparse"]
)
def test_scaled_inputs_equal_the_numpy_path(
    fixture: str, weights: str | None, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    s = _extreme(11, 301)
    w = None
    if weights is not None:
        rng = np.random.default_rng(12)
        w = rng.random(301).astype(np.float32)
        if weights == "subnormal":
            w *= np.float32(1e-43)
        elif weights == "huge":
            w *= np.float32(1e36)
        else:
            w[rng.random(301) < 0.9] = 0.0
            w[0] = 1.0
    want = ctx.fisher_information(s, w)
    assert np.isfinite(want).all()
    got = ctx.fisher_information(ctx.asarray(s, strategy="balanced"), w)
    assert _same(got, want)


@sharding_settings(25)
@given(
    n=st.integers(1, 400),
    p=st.integers(1, 70),
    scale=st.integers(0, 120),
    weighted=st.booleans(),
    strategy=SHARDINGS,
    seed=st.integers(0, 2**32 - 1),
)
def test_property_any_sharding_gives_the_numpy_bits(
    mixed: ag.MultiGpuContext,
    n: int,
    p: int,
    scale: int,
    weighted: bool,
    strategy: str,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    s = (rng.standard_normal((n, p)) * 2.0 ** rng.integers(-scale, scale + 1, p)).astype(np.float32)
    w = rng.random(n).astype(np.float32) if weighted else None
    want = mixed.fisher_information(s, w)
    got = mixed.fisher_information(mixed.asarray(s, strategy=strategy), w)
    assert _same(got, want)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_a_device_failing_mid_call_changes_nothing(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    s, w = _scores(20, 900, 10)  # P = 10: the prepared (padded) copy runs too
    want = ctx.fisher_information(s, w)
    assert_faults_change_nothing(
        ctx,
        lambda: ctx.asarray(s, strategy="balanced"),
        lambda d: _same(ctx.fisher_information(d, w), want),
        attempts=4,
    )


def test_weights_as_a_device_array_and_out(mixed: ag.MultiGpuContext) -> None:
    s, w = _scores(30, 500, 12)
    want = mixed.fisher_information(s, w)
    d, dw = mixed.asarray(s), mixed.asarray(w)
    assert _same(mixed.fisher_information(d, dw), want)
    out = np.full((12, 12), np.nan)
    assert mixed.fisher_information(d, w, out=out) is out
    assert _same(out, want)
    with pytest.raises(TypeError, match=r"out: expected a numpy\.ndarray or None"):
        mixed.fisher_information(d, w, out=mixed.asarray(np.zeros((12, 12), np.float32)))
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(12, 12\)"):
        mixed.fisher_information(d, w, out=np.zeros((12, 11)))


def test_natural_gradient_of_resident_scores(mixed: ag.MultiGpuContext) -> None:
    s, w = _scores(31, 400, 7)
    g = np.random.default_rng(32).standard_normal(7)
    want = mixed.natural_gradient(s, g, 1e-3, weights=w)
    got = mixed.natural_gradient(mixed.asarray(s), g, 1e-3, weights=w)
    assert _same(got, want)
    with pytest.raises(ag.ShapeError, match=r"grad: expected shape \(7,\) or \(7, M\)"):
        mixed.natural_gradient(mixed.asarray(s), np.zeros(6), 1e-3, weights=w)


def _error(ctx: ag.MultiGpuContext, scores: object, weights: object) -> tuple[type, str]:
    with pytest.raises(ag.AmariGpuError) as info:
        ctx.fisher_information(scores, weights)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed", "host"])
def test_errors_are_the_numpy_paths(fixture: str, request: pytest.FixtureRequest) -> None:
    ctx = request.getfixturevalue(fixture)
    s, w = _scores(40, 300, 5)
    cases = []
    for bad in (np.nan, np.inf, -np.inf):
        t = s.copy()
        t[257, 3] = bad
        cases.append((t, w))
    cases += [
        (s, w[:-1]),
        (s, -w),
        (s, np.zeros_like(w)),
        (s, np.where(np.arange(300) == 9, np.nan, w).astype(np.float32)),
        (np.zeros((2, 4097), np.float32), None),
    ]
    for scores, weights in cases:
        want = _error(ctx, scores, weights)
        assert _error(ctx, ctx.asarray(scores, strategy="balanced"), weights) == want, want


def test_bad_device_arrays_are_named(ctx2: ag.MultiGpuContext, mixed: ag.MultiGpuContext) -> None:
    s, _ = _scores(50, 100, 4)
    freed = ctx2.asarray(s)
    freed.free()
    with pytest.raises(ag.InvalidArgumentError, match="scores: expected a live DeviceArray"):
        ctx2.fisher_information(freed)
    with pytest.raises(ag.InvalidArgumentError, match="scores: expected a DeviceArray of this"):
        ctx2.fisher_information(mixed.asarray(s))
    with pytest.raises(ag.InvalidArgumentError, match="weights: expected a DeviceArray of this"):
        ctx2.fisher_information(ctx2.asarray(s), mixed.asarray(np.ones(100, np.float32)))
    with pytest.raises(ag.ShapeError, match=r"scores: expected shape \(N, W\), got \(100,\)"):
        ctx2.fisher_information(ctx2.asarray(s[:, 0]))
    with pytest.raises(ag.ShapeError, match=r"weights: expected shape \(100,\), got \(99,\)"):
        ctx2.fisher_information(ctx2.asarray(s), np.ones(99))


def test_scores_stay_on_the_devices(ctx2: ag.MultiGpuContext) -> None:
    # What crosses to the host is the partials and the weights, not the 4 MiB of scores:
    # chunks of 64 rows, so the two shards' boundary cuts at most one chunk.
    s, w = _scores(60, 8192, 128)
    d = ctx2.asarray(s, strategy="balanced")
    held = [x["resident_bytes"] for x in ctx2.stats()]
    before = [(x["bytes_up"], x["bytes_down"]) for x in ctx2.stats()]
    got = ctx2.fisher_information(d, w)
    after = [(x["bytes_up"], x["bytes_down"]) for x in ctx2.stats()]
    up = sum(a[0] - b[0] for a, b in zip(after, before))
    assert up < s.nbytes / 20, up
    assert [x["resident_bytes"] for x in ctx2.stats()] == held
    assert _same(got, ctx2.fisher_information(s, w))


def test_the_profile_shows_the_passes_on_the_devices(mixed: ag.MultiGpuContext) -> None:
    s, w = _scores(70, 2000, 6)
    d = mixed.asarray(s, strategy="balanced")
    with mixed.profile() as prof:
        mixed.fisher_information(d, w)
    kernels = {c["kernel"] for c in prof.kernel_calls}
    assert {"resident/fisher_column_max", "resident/fisher_rows"} <= kernels, kernels
    devices = {e["device"] for e in prof.events if e["kind"] == "kernel"}
    assert devices == {x for x, _, _ in d.sharding}


def test_shards_of_a_failed_device_are_rebuilt_once_and_kept(mixed: ag.MultiGpuContext) -> None:
    s, w = _scores(80, 1500, 9)
    want = mixed.fisher_information(s, w)
    try:
        d = mixed.asarray(s, strategy="balanced")
        device = d.sharding[0][0]
        mixed.inject_fault(device, after_chunks=0)
        assert _same(mixed.fisher_information(d, w), want)
        assert not mixed.health()[device]["healthy"]
        # The next call finds the rows on a healthy device: the first call rebuilt them
        # there, or this one does before it runs, and keeps them.
        assert _same(mixed.fisher_information(d, w), want)
        assert device not in {x for x, _, _ in d.sharding}
        assert np.array_equal(d.numpy(), s)
    finally:
        mixed.reset_health()
