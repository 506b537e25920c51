"""A DeviceArray acts like an array (issue 26): row indexing gives resident copies, the
elementwise ufuncs run where the rows live and give numpy's float32 bits (any NaN standing
for any NaN: numpy promises no payload), on the host device, on lavapipe and on a mixed
context, for any sharding; numpy functions that would gather are refused."""

from __future__ import annotations

import operator

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import SHARDINGS, assert_faults_change_nothing, sharding_settings
from _resident_helpers import same_bits as _same
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# numpy's references meet inf and NaN on purpose (the device side warns of nothing).
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

CONTEXTS = ["host", "ctx2", "mixed"]

EDGES = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38, 1.1754944e-38, 1e-40,
     -3e-42, 1.0, -2.0, 0.5, 3.0],
    dtype=np.float32,
)  # fmt: skip

BINARY = [np.add, np.subtract, np.multiply, np.divide]
COMPARE = [np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal]
UNARY = [np.negative, np.absolute, np.sqrt]


def _data(rows: int, cols: int, seed: int) -> np.ndarray:
    """Random float32 rows with every edge value mixed in."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((rows, cols)) * 10).astype(np.float32)
    flat = a.reshape(-1)
    flat[::3] = EDGES[rng.integers(0, len(EDGES), len(flat[::3]))]
    return a


@pytest.fixture(params=CONTEXTS)
def ctx(request: pytest.FixtureRequest) -> ag.MultiGpuContext:
    return request.getfixturevalue(request.param)


def test_the_issue_example_matches_numpy_bit_for_bit_everywhere(
    host: ag.MultiGpuContext, ctx2: ag.MultiGpuContext, mixed: ag.MultiGpuContext
) -> None:
    a, b = _data(300, 4, 1), _data(300, 4, 2)
    with np.errstate(all="ignore"):
        wants = [a[0], a[10:20], a[-1], a + 1, np.sqrt(a), a * b, 1 / a, a - b, -a, np.abs(a)]
    for ctx in (host, ctx2, mixed):
        for strategy in ("balanced", "capability", "memory"):
            x, y = ctx.asarray(a, strategy=strategy), ctx.asarray(b, strategy="balanced")
            with np.errstate(all="ignore"):
                gots = [x[0], x[10:20], x[-1], x + 1, np.sqrt(x), x * y, 1 / x, x - y, -x, abs(x)]
            for k, (got, want) in enumerate(zip(gots, wants, strict=True)):
                assert isinstance(got, ag.DeviceArray), k
                assert _same(np.asarray(got), want), (ctx.devices, strategy, k)


@given(
    a=hnp.arrays(np.float32, st.tuples(st.integers(1, 90), st.integers(1, 5))),
    seed=st.integers(0, 2**32 - 1),
    strategy=SHARDINGS,
)
@sharding_settings(12)
def test_binary_ufuncs_are_numpys_on_edge_values(
    ctx: ag.MultiGpuContext, a: np.ndarray, seed: int, strategy: str
) -> None:
    rng = np.random.default_rng(seed)
    b = EDGES[rng.integers(0, len(EDGES), a.shape)]
    row = EDGES[rng.integers(0, len(EDGES), a.shape[1])]
    scalar = float(EDGES[rng.integers(0, len(EDGES))])
    x, y = ctx.asarray(a, strategy=strategy), ctx.asarray(b, strategy="balanced")
    with np.errstate(all="ignore"):
        for f in BINARY + COMPARE:
            for got, want in [
                (f(x, y), f(a, b)),
                (f(x, b), f(a, b)),
                (f(b, x), f(b, a)),
                (f(x, row), f(a, row)),
                (f(row, x), f(row, a)),
                (f(x, scalar), f(a, scalar)),
                (f(scalar, x), f(scalar, a)),
            ]:
                assert _same(np.asarray(got), want), f.__name__
        for f in UNARY:
            assert _same(np.asarray(f(x)), f(a)), f.__name__
    # The operands are unchanged.
    assert _same(x.numpy(), a) and _same(y.numpy(), b)


def test_results_are_the_same_bits_for_any_device_count_and_kind(
    host: ag.MultiGpuContext,
    ctx2: ag.MultiGpuContext,
    ctx3: ag.MultiGpuContext,
    mixed: ag.MultiGpuContext,
) -> None:
    a, b = _data(1000, 3, 5), _data(1000, 3, 6)
    results = []
    for ctx in (host, ctx2, ctx3, mixed):
        for strategy in ("balanced", "memory", "auto"):
            x, y = ctx.asarray(a, strategy=strategy), ctx.asarray(b, strategy="capability")
            with np.errstate(all="ignore"):
                got = [np.sqrt(x * y + 1) / x, (x < y), -(x[100:900] - 2.5)]
                want = [np.sqrt(a * b + 1) / a, (a < b), -(a[100:900] - 2.5)]
            assert all(_same(np.asarray(g), w) for g, w in zip(got, want, strict=True))
            results.append([np.asarray(g) for g in got])
    for other in results[1:]:
        assert all(_same(g, w) for g, w in zip(other, results[0], strict=True))


# --- row indexing ---------------------------------------------------------------------------


def test_row_indexing_is_numpys_first_axis(ctx: ag.MultiGpuContext) -> None:
    cube = _data(24, 5, 3).reshape(4, 6, 5)
    x = ctx.asarray(cube)
    for key in [0, 3, -1, -4, np.int64(2), slice(1, 3), slice(None), slice(-3, None),
                slice(2, 1), slice(5, 9), (1,)]:  # fmt: skip
        got = x[key]
        assert isinstance(got, ag.DeviceArray) and got.shape == cube[key].shape, key
        assert _same(got.numpy(), cube[key]), key
    flat = ctx.asarray(cube.reshape(-1))
    assert flat[7].shape == () and _same(np.asarray(flat[7]), cube.reshape(-1)[7])
    rows = ctx.asarray(cube.reshape(24, 5))
    assert rows[5].shape == (5,) and _same(rows[5].numpy(), cube.reshape(24, 5)[5])
    assert [r.shape for r in rows[:3]] == [(5,)] * 3  # iteration stops at IndexError


def test_bad_row_keys_are_refused_like_numpy_or_named(ctx: ag.MultiGpuContext) -> None:
    x = ctx.asarray(_data(10, 3, 4))
    for index in (10, -11):
        message = f"index {index} is out of bounds for axis 0 with size 10"
        with pytest.raises(IndexError, match=message):
            x[index]
    with pytest.raises(ag.InvalidArgumentError, match="step 1, got step 2"):
        x[::2]
    with pytest.raises(ag.InvalidArgumentError, match=r"rows only.*2-part index"):
        x[1, 2]
    for key in (True, [1, 2], np.array([0, 1]), None, ..., 1.5):
        with pytest.raises(ag.InvalidArgumentError, match="expected an integer or a slice"):
            x[key]
    with pytest.raises(IndexError, match="0-d DeviceArray"):
        ctx.asarray(np.ones(3))[0][0]


def test_a_row_copy_outlives_its_parent(ctx2: ag.MultiGpuContext) -> None:
    a = _data(200, 4, 7)
    x = ctx2.asarray(a, strategy="balanced")
    part, row = x[50:150], x[120]
    assert {d for d, _, _ in part.sharding} == {0, 1}  # each shard's rows stayed put
    x.free()
    assert _same(part.numpy(), a[50:150]) and _same(row.numpy(), a[120])
    with pytest.raises(ag.InvalidArgumentError, match="freed"):
        x[0]
    with pytest.raises(ag.InvalidArgumentError, match="freed"):
        x + 1


# --- dtypes, broadcasting, out= --------------------------------------------------------------


def test_numpy_2_promotion_keeps_float32_or_refuses(ctx: ag.MultiGpuContext) -> None:
    a = _data(6, 3, 8)
    x = ctx.asarray(a)
    for other in (0.1, 3, True, 10**40, np.float32(0.1), np.int16(7), np.ones(3, np.int8)):
        with np.errstate(all="ignore"):
            assert _same(np.asarray(x * other), a * other), other
    for other in (np.float64(0.1), np.ones(3), np.ones(3, np.int64), 1j, np.ones(3, complex)):
        with pytest.raises(ag.InvalidArgumentError, match="expected a float32 operand"):
            x * other


def test_broadcasts_that_keep_the_device_arrays_shape(ctx: ag.MultiGpuContext) -> None:
    cube = _data(12, 4, 9).reshape(3, 4, 4)
    x = ctx.asarray(cube)
    for other in (cube[0], cube[0, 0], cube[:, :1], cube[:1], cube[..., :1], np.float32(2)):
        assert _same(np.asarray(x - other), cube - other)
        assert _same(np.asarray(other / x), other / cube)
    with pytest.raises(ag.ShapeError, match=r"broadcasts to the DeviceArray's shape \(3, 4, 4\)"):
        x + np.ones((2, 3, 4, 4), np.float32)
    with pytest.raises(ag.ShapeError, match="got \\(3, 4, 4\\) and \\(4, 4\\)"):
        x + ctx.asarray(cube[0])


def test_out_takes_a_device_array_of_the_results_shape(ctx: ag.MultiGpuContext) -> None:
    a, b = _data(40, 2, 10), _data(40, 2, 11)
    x, out = ctx.asarray(a), ctx.asarray(np.zeros_like(a))
    assert np.add(x, b, out=out) is out and _same(out.numpy(), a + b)
    assert _same(x.numpy(), a)
    y = x
    y *= 2
    assert y is x and _same(x.numpy(), a * 2)
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(40, 2\)"):
        np.add(x, 1, out=ctx.asarray(np.zeros((40, 3))))
    with pytest.raises(ag.InvalidArgumentError, match="out: expected a DeviceArray"):
        np.add(x, 1, out=np.zeros_like(a))
    with pytest.raises(ag.InvalidArgumentError, match="bool array, so it takes no out="):
        np.less(x, 1, out=out)
    with pytest.raises(ag.InvalidArgumentError, match="where is not supported"):
        np.add(x, 1, where=True)


# --- what is refused -------------------------------------------------------------------------


def test_np_sum_and_other_gathering_functions_are_refused(ctx: ag.MultiGpuContext) -> None:
    a = _data(30, 2, 12)
    x = ctx.asarray(a)
    for call, name in [
        (lambda: np.sum(x), "np.sum"),
        (lambda: np.mean(x, axis=0), "np.mean"),
        (lambda: np.concatenate([x, x]), "np.concatenate"),
        (lambda: np.add.reduce(x), "np.add.reduce"),
        (lambda: np.exp(x), "np.exp"),
        (lambda: x @ x, "np.matmul"),
        (lambda: x**2, "np.power"),
    ]:
        with pytest.raises(ag.InvalidArgumentError, match=rf"{name} .*np\.asarray\(x\)"):
            call()
    # The explicit way home, and what needs no data.
    with np.errstate(all="ignore"):
        assert _same(np.sum(np.asarray(x)), np.sum(a))
    assert (np.shape(x), np.ndim(x), np.size(x)) == ((30, 2), 2, 60)


# --- faults ----------------------------------------------------------------------------------


def test_a_fault_during_an_elementwise_call_loses_nothing(ctx3: ag.MultiGpuContext) -> None:
    a, b = _data(500, 4, 13), _data(500, 4, 14)
    with np.errstate(all="ignore"):
        want = [np.sqrt(a * b), a[100:400] - b[100:400]]

    def same(operands: tuple[ag.DeviceArray, ag.DeviceArray]) -> bool:
        x, y = operands
        with np.errstate(all="ignore"):
            got = [np.sqrt(x * y), x[100:400] - y[100:400]]
        return all(_same(g.numpy(), w) for g, w in zip(got, want, strict=True))

    def upload() -> tuple[ag.DeviceArray, ag.DeviceArray]:
        return ctx3.asarray(a, strategy="balanced"), ctx3.asarray(b, strategy="balanced")

    assert_faults_change_nothing(ctx3, upload, same, attempts=3)


def test_a_row_copy_lost_with_a_device_is_rebuilt_after_its_parent_is_freed(
    ctx3: ag.MultiGpuContext,
) -> None:
    # The copy's lineage is its parent's rows, offset: freeing the parent keeps it.
    a = _data(300, 2, 17)
    for device in range(len(ctx3.devices)):
        ctx3.reset_health()
        x = ctx3.asarray(a, strategy="balanced")
        part = x[70:260]
        x.free()
        ctx3.inject_fault(device, after_chunks=0)
        try:
            assert _same((part + 1).numpy(), a[70:260] + 1), device
            assert not ctx3.health()[device]["healthy"], device
            assert _same(part.numpy(), a[70:260]), device
        finally:
            ctx3.reset_health()


def test_empty_arrays_and_rows_wider_than_a_pass(ctx: ag.MultiGpuContext) -> None:
    x = ctx.asarray(np.ones((10, 3)))
    empty = x[5:5]
    assert empty.shape == (0, 3) and empty.sharding == []
    for got in (empty + 1, empty * empty, np.sqrt(empty), empty - np.ones(3, np.float32)):
        assert got.shape == (0, 3) and got.numpy().shape == (0, 3)
    assert (empty < 1).shape == (0, 3)
    wide = _data(3, 40_000, 18)
    assert _same(np.asarray(ctx.asarray(wide) * wide[0]), wide * wide[0])


def test_operators_are_numpys(ctx2: ag.MultiGpuContext) -> None:
    a, b = _data(20, 3, 15), _data(20, 3, 16)
    x, y = ctx2.asarray(a), ctx2.asarray(b)
    with np.errstate(all="ignore"):
        for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.lt,
                   operator.le, operator.gt, operator.ge, operator.eq, operator.ne):  # fmt: skip
            assert _same(np.asarray(op(x, y)), op(a, b)), op
            assert _same(np.asarray(op(x, 2.5)), op(a, 2.5)), op
            assert _same(np.asarray(op(2.5, x)), op(2.5, a)), op
