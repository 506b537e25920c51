"""``fisher_categorical`` and ``fisher_gaussian`` on DeviceArrays: computed where the rows
live (several lavapipe devices, the host device alone, both together), a DeviceArray with
the input's sharding, bit-identical to the numpy path; checks made on the devices with the
numpy path's errors word for word (rows gathered only when one is flagged, and a row the
float32 check could not clear still passes); logits through the host's float64 softmax;
mixed numpy/DeviceArray operands; ``out=``; a device failing mid-call.

The numpy path is itself checked against float64 references in test_fisher_families.py;
here it is the reference, compared bit for bit."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import SHARDINGS, assert_faults_change_nothing, sharding_settings
from hypothesis import given
from hypothesis import strategies as st

SHAPES = [(1, 1), (130, 7), (333, 3), (64, 16), (97, 65)]


def _probs(seed: int, n: int, k: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(k), n).astype(np.float32)


def _scaled(sharding: list[tuple[int, int, int]], rows: int) -> list[tuple[int, int, int]]:
    """A sharding of samples as one of their result's rows (``rows`` per sample)."""
    return [(d, a * rows, b * rows) for d, a, b in sharding]


def _same(got: object, want: np.ndarray) -> None:
    assert isinstance(got, ag.DeviceArray)
    assert got.shape == want.shape and got.dtype == want.dtype
    g = got.numpy()
    assert g.tobytes() == want.tobytes()


@pytest.mark.parametrize("fixture", ["ctx3", "mixed", "host"])
@pytest.mark.parametrize("strategy", ["balanced", "capability"])
def test_categorical_equals_the_numpy_path(
    fixture: str, strategy: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    for seed, (n, k) in enumerate(SHAPES):
        p = _probs(seed, n, k)
        logits = np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32) * 5
        p_before, l_before = p.copy(), logits.copy()
        dp = ctx.asarray(p, strategy=strategy)
        got = ctx.fisher_categorical(dp)
        _same(got, ctx.fisher_categorical(p))
        assert got.sharding == _scaled(dp.sharding, k)
        dl = ctx.asarray(logits, strategy=strategy)
        got = ctx.fisher_categorical(logits=dl)
        _same(got, ctx.fisher_categorical(logits=logits))
        assert got.sharding == _scaled(dl.sharding, k)
        assert np.array_equal(p, p_before) and np.array_equal(logits, l_before)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed", "host"])
def test_gaussian_equals_the_numpy_path_for_every_mix(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    rng = np.random.default_rng(5)
    for n, d in [(1, 1), (200, 3), (90, 20)]:
        mean = rng.standard_normal((n, d)).astype(np.float32)
        var = (rng.random((n, d)) + 1e-3).astype(np.float32)
        want = ctx.fisher_gaussian(mean, var)
        dm, dv = ctx.asarray(mean, strategy="balanced"), ctx.asarray(var, strategy="capability")
        for m, v, like in [(dm, dv, dv), (mean, dv, dv), (dm, var, dm)]:
            got = ctx.fisher_gaussian(m, v)
            _same(got, want)
            assert got.sharding == _scaled(like.sharding, 2 * d)


@sharding_settings(20)
@given(
    n=st.integers(1, 300),
    k=st.integers(1, 24),
    strategy=SHARDINGS,
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_property_any_sharding_gives_the_numpy_bits(
    mixed: ag.MultiGpuContext, n: int, k: int, strategy: str, seed: int, dtype: type
) -> None:
    # float64 DeviceArrays compute in float64 (tests/test_resident_fisher_maps_f64.py).
    p = _probs(seed, n, k).astype(dtype)
    _same(
        mixed.fisher_categorical(mixed.asarray(p, strategy=strategy)), mixed.fisher_categorical(p)
    )
    var = (np.random.default_rng(seed).random((n, k)) * 10.0 ** (seed % 7 - 3)).astype(dtype)
    var += dtype(1e-30)
    _same(
        mixed.fisher_gaussian(np.zeros_like(var), mixed.asarray(var, strategy=strategy)),
        mixed.fisher_gaussian(np.zeros_like(var), var),
    )


def _error(call: object, *args: object, **kwargs: object) -> tuple[type, str]:
    with pytest.raises(ag.AmariGpuError) as info:
        call(*args, **kwargs)  # type: ignore[operator]
    return type(info.value), str(info.value)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed", "host"])
def test_errors_are_the_numpy_paths(fixture: str, request: pytest.FixtureRequest) -> None:
    ctx = request.getfixturevalue(fixture)
    p = _probs(7, 300, 5)
    bad_probs = []
    for row, col, value in [(250, 2, np.nan), (17, 0, -1e-30), (299, 4, np.inf), (3, 1, 0.5)]:
        q = p.copy()
        q[row, col] = value
        bad_probs.append(q)
    for q in bad_probs:
        want = _error(ctx.fisher_categorical, q)
        assert _error(ctx.fisher_categorical, ctx.asarray(q, strategy="balanced")) == want
    logits = np.zeros((300, 5), np.float32)
    logits[123, 4] = np.inf
    want = _error(ctx.fisher_categorical, logits=logits)
    assert _error(ctx.fisher_categorical, logits=ctx.asarray(logits)) == want
    mean = np.zeros((300, 4), np.float32)
    var = np.ones((300, 4), np.float32)
    for name, row, value in [("var", 200, 0.0), ("var", 3, -1.0), ("var", 299, np.inf)]:
        v = var.copy()
        v[row, 1] = value
        want = _error(ctx.fisher_gaussian, mean, v)
        assert _error(ctx.fisher_gaussian, mean, ctx.asarray(v)) == want, name
        assert _error(ctx.fisher_gaussian, ctx.asarray(mean), v) == want, name
    m = mean.copy()
    m[150, 2] = np.nan
    want = _error(ctx.fisher_gaussian, m, var)
    assert _error(ctx.fisher_gaussian, ctx.asarray(m), ctx.asarray(var)) == want
    assert _error(ctx.fisher_gaussian, ctx.asarray(m), var) == want


def test_rows_the_float32_check_cannot_clear_still_pass(mixed: ag.MultiGpuContext) -> None:
    # Sums within the tolerance by less than a float32 sum's rounding slack: flagged on the
    # devices, cleared by the exact check on the gathered rows.
    p = np.zeros((200, 2000), np.float32)
    p[:, 0] = 0.5
    p[:, 1] = 0.5
    p[77, 1] = np.float32(0.500999)
    got = mixed.fisher_categorical(mixed.asarray(p, strategy="balanced"))
    _same(got, mixed.fisher_categorical(p))


def test_shapes_and_arrays_are_named(ctx2: ag.MultiGpuContext, mixed: ag.MultiGpuContext) -> None:
    p = _probs(8, 50, 3)
    freed = ctx2.asarray(p)
    freed.free()
    with pytest.raises(ag.InvalidArgumentError, match="probs: expected a live DeviceArray"):
        ctx2.fisher_categorical(freed)
    with pytest.raises(ag.InvalidArgumentError, match="logits: expected a DeviceArray of this"):
        ctx2.fisher_categorical(logits=mixed.asarray(p))
    with pytest.raises(ag.ShapeError, match=r"probs: expected shape \(N, W\), got \(50,\)"):
        ctx2.fisher_categorical(ctx2.asarray(p[:, 0]))
    with pytest.raises(ag.ShapeError, match=r"var: expected shape \(50, 3\), got \(49, 3\)"):
        ctx2.fisher_gaussian(ctx2.asarray(p), np.ones((49, 3), np.float32))
    with pytest.raises(ag.ShapeError, match=r"var: expected shape \(50, 3\), got \(50, 2\)"):
        ctx2.fisher_gaussian(p, ctx2.asarray(np.ones((50, 2), np.float32)))
    with pytest.raises(ag.InvalidArgumentError, match="probs: expected exactly one"):
        ctx2.fisher_categorical(ctx2.asarray(p), logits=ctx2.asarray(p))


def test_out_device_array_and_numpy(mixed: ag.MultiGpuContext) -> None:
    p = _probs(9, 120, 4)
    want = mixed.fisher_categorical(p)
    dp = mixed.asarray(p, strategy="balanced")
    out = mixed.asarray(np.zeros((120, 4, 4), np.float32), strategy="capability")
    # The result takes out's sharding, each boundary rounded down to a whole sample.
    rounded = [(d, a // 4 * 4, b if b == 480 else b // 4 * 4) for d, a, b in out.sharding]
    assert mixed.fisher_categorical(dp, out=out) is out
    assert out.sharding == [s for s in rounded if s[1] < s[2]]
    assert out.numpy().tobytes() == want.tobytes()
    host_out = np.full((120, 4, 4), np.nan, np.float32)
    assert mixed.fisher_categorical(dp, out=host_out) is host_out
    assert host_out.tobytes() == want.tobytes()
    var = (p + 0.5).astype(np.float32)
    g_out = np.empty((120, 8, 8), np.float32)
    assert mixed.fisher_gaussian(p, mixed.asarray(var), out=g_out) is g_out
    assert g_out.tobytes() == mixed.fisher_gaussian(p, var).tobytes()
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(120, 4, 4\)"):
        mixed.fisher_categorical(dp, out=np.empty((120, 4, 5), np.float32))


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_a_device_failing_mid_call_changes_nothing(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    p = _probs(10, 700, 6)
    want = ctx.fisher_categorical(p)
    var = (p + 1).astype(np.float32)
    want_g = ctx.fisher_gaussian(p, var)

    def same(operands: tuple[ag.DeviceArray, ag.DeviceArray]) -> bool:
        dp, dv = operands
        _same(ctx.fisher_categorical(dp), want)
        _same(ctx.fisher_gaussian(p, dv), want_g)
        return True

    assert_faults_change_nothing(
        ctx,
        lambda: (ctx.asarray(p, strategy="balanced"), ctx.asarray(var, strategy="balanced")),
        same,
        attempts=3,
    )


def test_probabilities_stay_on_the_devices(ctx2: ag.MultiGpuContext) -> None:
    # The checks read back one word per run of 64-row chunks, not the rows; the 16-times
    # larger result stays where it was computed.
    p = _probs(11, 4096, 16)
    dp = ctx2.asarray(p, strategy="balanced")
    before = sum(s["bytes_up"] + s["bytes_down"] for s in ctx2.stats())
    got = ctx2.fisher_categorical(dp)
    moved = sum(s["bytes_up"] + s["bytes_down"] for s in ctx2.stats()) - before
    assert moved < p.nbytes / 10, moved
    _same(got, ctx2.fisher_categorical(p))


def test_a_result_whose_device_fails_is_rebuilt_from_its_lineage(mixed: ag.MultiGpuContext) -> None:
    p = _probs(12, 500, 5)
    var = (p + 0.25).astype(np.float32)
    want, want_g = mixed.fisher_categorical(p), mixed.fisher_gaussian(p, var)
    try:
        for device in range(len(mixed.devices)):
            mixed.reset_health()
            dp = mixed.asarray(p, strategy="balanced")
            got = mixed.fisher_categorical(dp)
            got_g = mixed.fisher_gaussian(dp, var)
            if device not in {d for d, _, _ in got.sharding}:
                continue
            mixed.inject_fault(device, after_chunks=0)
            mixed.fisher_categorical(dp)  # the fault fires on the device's shard
            assert not mixed.health()[device]["healthy"]
            _same(got, want)
            _same(got_g, want_g)
    finally:
        mixed.reset_health()


def test_a_result_feeds_further_resident_calls(mixed: ag.MultiGpuContext) -> None:
    # K = 8: the (N, 8, 8) result is N·8 rows of 8 words, Cl(3,0) multivectors to the GA
    # operations; the chain stays resident and survives a device failing under it.
    p = _probs(13, 300, 8)
    want = mixed.reverse(mixed.geometric_product(mixed.fisher_categorical(p), p[0]))
    try:
        for device in range(len(mixed.devices)):
            mixed.reset_health()
            f = mixed.fisher_categorical(mixed.asarray(p, strategy="balanced"))
            got = mixed.reverse(mixed.geometric_product(f, p[0]))
            assert isinstance(got, ag.DeviceArray) and got.sharding == f.sharding
            if device not in {d for d, _, _ in got.sharding}:
                continue
            mixed.inject_fault(device, after_chunks=0)
            again = mixed.reverse(f)  # the fault fires on the device's shard of f
            assert not mixed.health()[device]["healthy"]
            _same(got, want)
            _same(again, mixed.reverse(mixed.fisher_categorical(p)))
    finally:
        mixed.reset_health()


def test_bad_values_with_a_numpy_out_leave_it_untouched(mixed: ag.MultiGpuContext) -> None:
    # The resident result is made before anything is gathered into a numpy out: a bad row
    # raises the numpy path's error, without the note of a call that began writing.
    probs = _probs(30, 200, 6)
    probs[150, 2] = -0.5
    out = np.full((200, 6, 6), 7.0, np.float32)
    with pytest.raises(ag.InvalidArgumentError) as info:
        mixed.fisher_categorical(probs=mixed.asarray(probs), out=out)
    assert str(info.value).startswith("probs:")
    assert "out may hold part" not in str(info.value)
    assert np.all(out == 7.0)
