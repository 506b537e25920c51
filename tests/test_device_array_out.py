"""``out=`` on calls with DeviceArray operands: a DeviceArray ``out`` takes the result (on
its own sharding, operands resharded to match) and is returned; a numpy ``out`` gets the
result gathered into it. Bit-identical to the numpy path; errors as for numpy ``out``, raised
before any work, leaving ``out`` as it was."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest

ROWS = 1000

SHIFT = "fn row(a: array<f32, 8>) -> array<f32, 8> { var r = a; r[0] += params.s; return r; }"


def _batch(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 8), dtype=np.float32)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_a_device_array_out_takes_the_result_on_its_own_sharding(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    a, b = _batch(ROWS, 1), _batch(ROWS, 2)
    da = ctx.asarray(a, strategy="balanced")
    db = ctx.asarray(b, strategy="capability")
    out = ctx.asarray(np.zeros((ROWS, 8), np.float32), strategy="adaptive")
    layout = out.sharding
    for _ in range(3):  # repeated calls reuse the same out
        assert ctx.geometric_product(da, db, out=out) is out
        assert np.array_equal(out.numpy(), ctx.geometric_product(a, b))
        assert out.sharding == layout
    assert ctx.reverse(out, out=out) is out  # an operand may be its own out
    assert np.array_equal(out.numpy(), ctx.reverse(ctx.geometric_product(a, b)))
    scalars = ctx.asarray(np.zeros(ROWS, np.float32))
    assert ctx.scalar_product(da, db, out=scalars) is scalars
    assert np.array_equal(scalars.numpy(), ctx.scalar_product(a, b))
    got = ctx.map_rows(SHIFT, da, out_cols=8, params={"s": 2}, out=out)
    assert got is out
    assert np.array_equal(out.numpy(), ctx.map_rows(SHIFT, a, out_cols=8, params={"s": 2}))


def test_a_device_array_out_holds_no_more_than_one_result(ctx3: ag.MultiGpuContext) -> None:
    da = ctx3.asarray(_batch(ROWS, 3))
    out = ctx3.reverse(da)
    held = sum(s["resident_bytes"] for s in ctx3.stats())
    for _ in range(5):
        ctx3.reverse(da, out=out)
    assert sum(s["resident_bytes"] for s in ctx3.stats()) == held


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_a_numpy_out_gets_the_result_gathered(fixture: str, request: pytest.FixtureRequest) -> None:
    ctx = request.getfixturevalue(fixture)
    a, b = _batch(ROWS, 4), _batch(ROWS, 5)
    da = ctx.asarray(a)
    held = sum(s["resident_bytes"] for s in ctx.stats())
    out = np.full((ROWS, 8), -1.0, np.float32)
    assert ctx.sandwich(da, b, out=out) is out
    assert np.array_equal(out, ctx.sandwich(a, b))
    assert ctx.map_rows(SHIFT, da, out_cols=8, params={"s": 1}, out=out) is out
    assert np.array_equal(out, ctx.map_rows(SHIFT, a, out_cols=8, params={"s": 1}))
    # The resident result behind a numpy out is released.
    assert sum(s["resident_bytes"] for s in ctx.stats()) == held


def test_bad_outs_are_refused_before_any_work(ctx3: ag.MultiGpuContext) -> None:
    a = _batch(ROWS, 6)
    da = ctx3.asarray(a)
    short = ctx3.asarray(np.zeros((ROWS - 1, 8), np.float32))
    before = short.numpy()
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(1000, 8\) \(the result's\)"):
        ctx3.reverse(da, out=short)
    assert np.array_equal(short.numpy(), before)
    with pytest.raises(TypeError, match="out: expected dtype float32"):
        ctx3.reverse(da, out=np.zeros((ROWS, 8), np.float64))
    with pytest.raises(ag.InvalidArgumentError, match="out: expected a writeable array"):
        frozen = np.zeros((ROWS, 8), np.float32)
        frozen.flags.writeable = False
        ctx3.reverse(da, out=frozen)
    with pytest.raises(ag.InvalidArgumentError, match="overlaps b"):
        ctx3.geometric_product(da, a, out=a)
    freed = ctx3.asarray(np.zeros((ROWS, 8), np.float32))
    freed.free()
    with pytest.raises(ag.InvalidArgumentError, match="out: expected a live DeviceArray"):
        ctx3.reverse(da, out=freed)
    other = ag.MultiGpuContext(backends=["vulkan"])
    try:
        with pytest.raises(ag.InvalidArgumentError, match="out: expected a DeviceArray of this"):
            ctx3.reverse(da, out=other.asarray(np.zeros((ROWS, 8), np.float32)))
    finally:
        other.close()
    # A DeviceArray out on a call with only numpy operands: refused, naming what is taken.
    with pytest.raises(TypeError, match=r"out: expected a numpy\.ndarray or None"):
        ctx3.reverse(a, out=ctx3.asarray(np.zeros((ROWS, 8), np.float32)))
