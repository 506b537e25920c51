"""``tropical_matvec`` with a resident ``a``: computed where the rows live, a DeviceArray
bit-identical to the numpy path whatever the sharding (several lavapipe devices, and with
the host device), with the numpy path's errors (NaN positions, shapes, overflow) word for
word, and a device failing mid-call."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest

M, K = 700, 37


def _matrix(seed: int, *shape: int) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    a.reshape(-1)[::11] = -np.inf  # the max-plus zero, absorbing
    return a


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
@pytest.mark.parametrize("strategy", ["balanced", "capability"])
def test_resident_matvec_equals_the_numpy_path(
    fixture: str, semiring: str, strategy: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    a, x = _matrix(1, M, K), _matrix(2, K)
    da = ctx.asarray(a, strategy=strategy)
    got = ctx.tropical_matvec(da, x, semiring)
    assert isinstance(got, ag.DeviceArray) and got.shape == (M,)
    assert [s[1:] for s in got.sharding] == [s[1:] for s in da.sharding]
    assert np.array_equal(got.numpy(), ctx.tropical_matvec(a, x, semiring))
    # Batched, and on a computed (not uploaded) array.
    a3, x2 = _matrix(3, 4, 90, K), _matrix(4, 4, K)
    d3 = ctx.asarray(a3, strategy=strategy)
    got = ctx.tropical_matvec(d3, x2, semiring)
    assert got.shape == (4, 90)
    assert np.array_equal(got.numpy(), ctx.tropical_matvec(a3, x2, semiring))
    shifted = ctx.map_rows(
        f"fn row(a: array<f32, {K}>) -> array<f32, {K}> {{ var r = a; r[1] = 0.5; return r; }}",
        da,
        out_cols=K,
    )
    host = shifted.numpy()
    assert np.array_equal(
        ctx.tropical_matvec(shifted, x, semiring).numpy(), ctx.tropical_matvec(host, x, semiring)
    )
    out = np.zeros(M, np.float32)
    assert ctx.tropical_matvec(da, x, semiring, out=out) is out
    assert np.array_equal(out, ctx.tropical_matvec(a, x, semiring))


def _message(ctx: ag.MultiGpuContext, a, x) -> str:
    """The error ``tropical_matvec(a, x)`` raises: its type and text."""
    with pytest.raises(ag.AmariGpuError) as info:
        ctx.tropical_matvec(a, x)
    return f"{type(info.value).__name__}: {info.value}"


def test_errors_are_the_numpy_paths_word_for_word(ctx3: ag.MultiGpuContext) -> None:
    a, x = _matrix(5, M, K), _matrix(6, K)
    bad = a.copy()
    bad[321, 7] = np.nan
    bad[400, 2] = np.nan
    cases = [
        (bad, x),  # NaN in a: its first position
        (a, np.where(np.arange(K) == 3, np.nan, x).astype(np.float32)),  # NaN in x
        (a, x[:-1]),  # x of the wrong shape
        # A finite term beyond float32 decides entries: the overflow error.
        (np.full((M, K), 3e38, np.float32), np.full(K, 3e38, np.float32)),
    ]
    for host_a, host_x in cases:
        want = _message(ctx3, host_a, host_x)
        assert _message(ctx3, ctx3.asarray(host_a), host_x) == want
    bad3 = _matrix(7, 3, 50, K)
    bad3[2, 49, 36] = np.nan
    want = _message(ctx3, bad3, _matrix(8, 3, K))
    assert _message(ctx3, ctx3.asarray(bad3), _matrix(8, 3, K)) == want
    # Large but not overflowing magnitudes: the numpy path's exact check, same bits.
    big = np.full((M, K), 3e38, np.float32)
    small = np.full(K, -3e38, np.float32)
    got = ctx3.tropical_matvec(ctx3.asarray(big), small)
    assert np.array_equal(got.numpy(), ctx3.tropical_matvec(big, small))
    with pytest.raises(ag.InvalidArgumentError, match="out: expected a numpy array or None"):
        ctx3.tropical_matvec(ctx3.asarray(a), x, out=ctx3.asarray(np.zeros(M, np.float32)))


def test_a_device_failing_mid_call_changes_nothing(ctx3: ag.MultiGpuContext) -> None:
    a, x = _matrix(9, M, K), _matrix(10, K)
    want = ctx3.tropical_matvec(a, x)
    try:
        for device in range(len(ctx3.devices)):
            for k in range(3):
                ctx3.reset_health()
                da = ctx3.asarray(a)
                ctx3.inject_fault(device, after_chunks=k)
                assert np.array_equal(ctx3.tropical_matvec(da, x).numpy(), want), (device, k)
    finally:
        ctx3.reset_health()
