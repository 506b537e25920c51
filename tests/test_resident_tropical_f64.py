"""Tropical products of float64 DeviceArrays (issue 28 item 4: resident chains keep the
dtype): computed in float64 where the rows live (the host device, lavapipe with
``SHADER_F64``; never llvmpipe GL, which holds no float64 rows), a float64 DeviceArray
bit-identical to the numpy path's float64 result and to the float64 rule, on every device
count and kind; the numpy path's errors (NaN at its position, float64 overflow); inner
dimensions long enough that lavapipe's 65,535-trip limit would cut one walk; float16 and
mismatched DeviceArrays refused by name, saying what to do."""

from __future__ import annotations

from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import gl_device_ids
from _tropical_helpers import SEMIRINGS, reference_matmul64
from amari_gpu.errors import InvalidArgumentError

# Values a float32 evaluation would round (so a float32 run cannot pass), ties, ±inf, and
# magnitudes only float64 holds.
EDGES = [0.0, -0.0, 0.1, -3.25, 1.0 + 2.0**-52, 1e300, -1e300, np.inf, -np.inf]

SHAPES = [
    ((700, 37), (37, 130)),
    ((4, 90, 37), (4, 37, 70)),
    ((5, 7, 9), (5, 9, 66)),
    ((1, 1, 1), (1, 1, 1)),
]


def _bits(x: object) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64)).view(np.uint64)


def _operand(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).choice(EDGES, size=shape)


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, ag.MultiGpuContext]]:
    made = {
        "host": ag.MultiGpuContext(backends=["host"]),
        "lavapipe": ag.MultiGpuContext(backends=["vulkan"], chunk_items=64),
        "3 lavapipe": ag.MultiGpuContext(
            backends=["vulkan"], devices_per_adapter=3, chunk_items=64
        ),
        "2 lavapipe+host": ag.MultiGpuContext(
            backends=["vulkan", "host"], devices_per_adapter=2, chunk_items=64
        ),
        "lavapipe+gl": ag.MultiGpuContext(backends=["vulkan", "gl"], chunk_items=64),
    }
    yield made
    for ctx in made.values():
        ctx.close()


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_float64_device_arrays_give_the_numpy_paths_bits_everywhere(
    contexts: dict[str, ag.MultiGpuContext], semiring: str
) -> None:
    for seed, (a_shape, b_shape) in enumerate(SHAPES):
        a, b = _operand(2 * seed, a_shape), _operand(2 * seed + 1, b_shape)
        a_before, b_before = a.copy(), b.copy()
        want = reference_matmul64(a, b, semiring)
        x = b[..., 0].copy()
        want_x = reference_matmul64(a, x[..., None], semiring)[..., 0]
        for name, ctx in contexts.items():
            for strategy in ["balanced", "capability"]:
                da = ctx.asarray(a, strategy=strategy)
                assert da.dtype == np.float64
                got = ctx.tropical_matmul(da, b, semiring)
                assert isinstance(got, ag.DeviceArray) and got.dtype == np.float64, name
                assert got.shape == want.shape
                assert [s[1:] for s in got.sharding] == [s[1:] for s in da.sharding]
                assert np.array_equal(_bits(got), _bits(want)), (name, a_shape)
                host_path = ctx.tropical_matmul(a, b, semiring)
                assert np.array_equal(_bits(got), _bits(host_path)), (name, a_shape)
                got_x = ctx.tropical_matvec(da, x, semiring)
                assert isinstance(got_x, ag.DeviceArray) and got_x.dtype == np.float64
                assert np.array_equal(_bits(got_x), _bits(want_x)), (name, a_shape)
        assert np.array_equal(_bits(a), _bits(a_before))
        assert np.array_equal(_bits(b), _bits(b_before))


def test_float64_rows_never_sit_on_the_gl_device(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    ctx = contexts["lavapipe+gl"]
    gl = gl_device_ids(ctx)
    a, b = _operand(1, (300, 20)), _operand(2, (20, 9))
    for strategy in ag.STRATEGIES:
        da = ctx.asarray(a, strategy=strategy)
        plan = ctx.last_plan
        assert plan is not None and set(dict(plan.left_out)) == gl, strategy
        got = ctx.tropical_matmul(da, b, "max_plus")
        chained = ctx.tropical_matmul(got, _operand(3, (9, 4)), "min_plus")
        for array in (da, got, chained):
            assert not {device for device, _, _ in array.sharding} & gl, strategy
        assert chained.dtype == np.float64
        want = reference_matmul64(
            reference_matmul64(a, b, "max_plus"), _operand(3, (9, 4)), "min_plus"
        )
        assert np.array_equal(_bits(chained), _bits(want)), strategy


def test_float64_device_array_errors_are_the_numpy_paths(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    a = _operand(5, (3, 50, 11))
    a[2, 41, 7] = np.nan
    b = _operand(6, (3, 11, 4))
    # Finite terms beyond float64 that decide entries: the exact check after a gather.
    big = np.full((70, 3), 1e308)
    for name, ctx in contexts.items():
        with pytest.raises(InvalidArgumentError) as numpy_path:
            ctx.tropical_matmul(a, b)
        with pytest.raises(InvalidArgumentError) as resident:
            ctx.tropical_matmul(ctx.asarray(a), b)
        assert str(resident.value) == str(numpy_path.value), name
        assert "NaN at [2, 41, 7] of shape (3, 50, 11)" in str(resident.value)
        with pytest.raises(InvalidArgumentError, match="overflow float64") as numpy_path:
            ctx.tropical_matmul(big, np.full((3, 2), 1e308))
        with pytest.raises(InvalidArgumentError, match="overflow float64") as resident:
            ctx.tropical_matmul(ctx.asarray(big), np.full((3, 2), 1e308))
        assert str(resident.value) == str(numpy_path.value), name
        # Near the edge without overflowing: computed from the gathered rows, same bits.
        edge = np.full((3, 2), -1e308)
        got = ctx.tropical_matmul(ctx.asarray(big), edge, "min_plus")
        assert got.dtype == np.float64 and isinstance(got, ag.DeviceArray)
        assert np.array_equal(_bits(got), _bits(reference_matmul64(big, edge, "min_plus")))


def test_inner_dimensions_past_lavapipes_loop_limit(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    # 70,000 values per row: one walk would run 70,000 trips of the row statistics and more
    # of the product's loops; the passes keep every invocation within 65,535.
    k = 70_000
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, k))
    b = rng.standard_normal((k, 2))
    a[1, 69_990] = 50.0
    b[69_990, 1] = 60.0
    want = reference_matmul64(a, b, "max_plus")
    assert want[1, 1] == 110.0
    for name in ["lavapipe", "2 lavapipe+host"]:
        ctx = contexts[name]
        got = ctx.tropical_matmul(ctx.asarray(a), b, "max_plus")
        assert np.array_equal(_bits(got), _bits(want)), name
        nan = a.copy()
        nan[2, 69_999] = np.nan
        with pytest.raises(InvalidArgumentError, match=r"NaN at \[2, 69999\] of shape"):
            ctx.tropical_matmul(ctx.asarray(nan), b)


def test_out_arrays_take_the_float64_result(contexts: dict[str, ag.MultiGpuContext]) -> None:
    ctx = contexts["2 lavapipe+host"]
    a, b = _operand(8, (130, 6)), _operand(9, (6, 5))
    want = reference_matmul64(a, b, "max_plus")
    da = ctx.asarray(a)
    out = ctx.asarray(np.zeros((130, 5)))
    assert ctx.tropical_matmul(da, b, out=out) is out
    assert np.array_equal(_bits(out), _bits(want))
    host_out = np.zeros((130, 5))
    assert ctx.tropical_matmul(da, b, out=host_out) is host_out
    assert np.array_equal(_bits(host_out), _bits(want))
    with pytest.raises(TypeError, match="out: expected dtype float64"):
        ctx.tropical_matmul(da, b, out=ctx.asarray(np.zeros((130, 5), dtype=np.float32)))


def test_shortest_paths_of_a_float64_device_array_are_the_numpy_paths(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    rng = np.random.default_rng(4)
    w = np.where(rng.random((40, 40)) < 0.3, rng.random((40, 40)) + 0.1, np.inf)
    for name, ctx in contexts.items():
        got = ctx.shortest_paths(ctx.asarray(w))
        assert got.dtype == np.float64
        assert np.array_equal(_bits(got), _bits(ctx.shortest_paths(w))), name


def test_device_arrays_of_another_dtype_are_refused_by_name(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    ctx = contexts["2 lavapipe+host"]
    b = np.ones((4, 3))
    x16 = ctx.asarray(np.ones((5, 4), dtype=np.float16))
    with pytest.raises(
        InvalidArgumentError,
        match=r"a: expected a DeviceArray of float32 .* got one of float16.*dtype=numpy.float32",
    ):
        ctx.tropical_matmul(x16, b.astype(np.float32))
    x32 = ctx.asarray(np.ones((5, 4), dtype=np.float32))
    with pytest.raises(
        InvalidArgumentError, match=r"a: expected a DeviceArray of float64 .* got one of float32"
    ):
        ctx.tropical_matmul(x32, b)
    x64 = ctx.asarray(np.ones((5, 4)))
    with pytest.raises(
        InvalidArgumentError, match=r"a: expected a DeviceArray of float32 .* got one of float64"
    ):
        ctx.tropical_matvec(x64, np.ones(4), dtype=np.float32)
