"""float64 tropical algebra: float64 in, float64 out, computed in float64 on the host device
and on lavapipe (Vulkan, ``SHADER_F64``). Tropical results are exact (a max or min of sums
rounded once), so they equal a float64 numpy evaluation bit for bit, and scipy's float64
shortest paths where path sums are exact; the same bits on every device mix, device count
and strategy; llvmpipe (GL, no float64) is left out of float64 work, and a GL-only context
refuses it. float32 calls keep float32; promotions follow numpy, ``dtype=`` overrides."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import amari_gpu
import numpy as np
import pytest
from _tropical_helpers import reference_matmul64 as _reference
from amari_gpu.errors import InvalidArgumentError
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import shortest_path

EDGES = [0.0, -0.0, 0.1, -3.25, 1.0 + 2.0**-52, 1e300, -1e300, np.inf, -np.inf]


def _context(**options: Any) -> amari_gpu.MultiGpuContext:
    return amari_gpu.MultiGpuContext(chunk_items=1, **options)


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, amari_gpu.MultiGpuContext]]:
    made = {
        "host": _context(backends=["host"]),
        "lavapipe": _context(backends=["vulkan"]),
        "lavapipe+host": _context(backends=["vulkan", "host"]),
        "2 lavapipe+host": _context(backends=["vulkan", "host"], devices_per_adapter=2),
    }
    yield made
    for ctx in made.values():
        ctx.close()


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint64)


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
def test_products_are_the_float64_rule_bit_for_bit_everywhere(
    contexts: dict[str, amari_gpu.MultiGpuContext], semiring: str
) -> None:
    rng = np.random.default_rng(7)
    a = rng.choice(EDGES, size=(2, 70, 19))
    b = rng.choice(EDGES, size=(2, 19, 66))
    a_before, b_before = a.copy(), b.copy()
    want = _reference(a, b, semiring)
    x = b[:, :, 0].copy()
    want_x = _reference(a, x[:, :, None], semiring)[..., 0]
    for name, ctx in contexts.items():
        for strategy in amari_gpu.STRATEGIES:
            got = ctx.tropical_matmul(a, b, semiring, strategy=strategy)
            assert got.dtype == np.float64, name
            np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{name} {strategy}")
        got_x = ctx.tropical_matvec(a, x, semiring)
        assert got_x.dtype == np.float64
        np.testing.assert_array_equal(_bits(got_x), _bits(want_x), err_msg=name)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 9),
    st.integers(0, 9),
    st.integers(1, 9),
    st.sampled_from(["max_plus", "min_plus"]),
    st.data(),
)
def test_hypothesis_edge_values_on_the_host_device(
    m: int, k: int, n: int, semiring: str, data: st.DataObject
) -> None:
    values = st.sampled_from(EDGES) | st.floats(
        allow_nan=False, width=64, min_value=-1e307, max_value=1e307
    )
    a = np.array(data.draw(st.lists(values, min_size=m * k, max_size=m * k)), dtype=np.float64)
    b = np.array(data.draw(st.lists(values, min_size=k * n, max_size=k * n)), dtype=np.float64)
    a, b = a.reshape(m, k), b.reshape(k, n)
    with amari_gpu.MultiGpuContext(backends=["host"]) as ctx:
        got = ctx.tropical_matmul(a, b, semiring)
    np.testing.assert_array_equal(_bits(got), _bits(_reference(a, b, semiring)))


def test_long_inner_dimensions_walk_past_lavapipes_loop_limit_in_float64(
    contexts: dict[str, amari_gpu.MultiGpuContext],
) -> None:
    # k = 70,000: one walk would stop after 65,535 loop trips and miss the last term.
    k = 70_000
    a = -np.arange(2 * k, dtype=np.float64).reshape(2, k) * 0.5
    a[:, -1] = 1e10 + np.array([0.25, 0.5])
    x = np.tile(np.array([0.0, 2.0**-30]), k // 2)
    want = _reference(a, x[:, None], "max_plus")[:, 0]
    got = contexts["lavapipe"].tropical_matvec(a, x)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    b = np.stack([x, -x], axis=1)
    got = contexts["lavapipe"].tropical_matmul(a, b)
    np.testing.assert_array_equal(_bits(got), _bits(_reference(a, b, "max_plus")))


def _graph(n: int, seed: int) -> np.ndarray:
    """Weights that are multiples of 2^-20 below 2^12, so that every path sum is exact in
    float64 (and not in float32), and about 30% of the edges."""
    rng = np.random.default_rng(seed)
    w = rng.integers(1, 2**32, size=(n, n)).astype(np.float64) * 2.0**-20
    w[rng.random((n, n)) > 0.3] = np.inf
    return w


def test_shortest_paths_equal_scipys_float64_bit_for_bit(
    contexts: dict[str, amari_gpu.MultiGpuContext],
) -> None:
    w = _graph(150, 3)
    want = shortest_path(w, method="FW")
    assert np.any(want.astype(np.float32).astype(np.float64) != want), "needs float64"
    for name, ctx in contexts.items():
        for strategy in ("balanced", "auto"):
            got = ctx.shortest_paths(w, strategy=strategy)
            assert got.dtype == np.float64
            np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{name} {strategy}")


def test_float64_work_leaves_gl_out_and_a_gl_only_context_refuses_it() -> None:
    w = _graph(70, 4)
    with amari_gpu.MultiGpuContext(backends=["vulkan", "gl"], chunk_items=1) as ctx:
        got = ctx.shortest_paths(w, strategy="balanced")
        np.testing.assert_array_equal(_bits(got), _bits(shortest_path(w, method="FW")))
        plan = ctx.last_plan
        assert plan is not None
        gl = {d.id for d in ctx.devices if d.adapter.backend == "gl"}
        assert gl and not gl & {item.device_id for item in plan}
        assert {device for device, _ in plan.left_out} == gl
        for _, reason in plan.left_out:
            assert reason.startswith("float64 needs SHADER_F64"), reason
    with amari_gpu.MultiGpuContext(backends=["gl"]) as ctx:
        out = np.full((70, 70), 7.0)
        with pytest.raises(
            InvalidArgumentError, match="dtype: no device of this context computes in float64"
        ):
            ctx.shortest_paths(w, out=out)
        assert np.all(out == 7.0), "nothing written"
        with pytest.raises(InvalidArgumentError, match="computes in float64"):
            ctx.tropical_matmul(w, w)
        # float32 on purpose still runs there.
        assert ctx.tropical_matmul(w, w, dtype=np.float32).dtype == np.float32


def test_dtypes_promote_like_numpy_and_dtype_overrides(
    contexts: dict[str, amari_gpu.MultiGpuContext],
) -> None:
    ctx = contexts["host"]
    a32 = np.array([[1.0, 2.0], [3.0, 0.5]], dtype=np.float32)
    a64 = a32.astype(np.float64) + 2.0**-40
    assert ctx.tropical_matmul(a32, a32).dtype == np.float32
    assert ctx.tropical_matmul(a32, a64).dtype == np.float64
    assert ctx.tropical_matmul(a32.astype(np.int32), a32.astype(np.int64)).dtype == np.float64
    assert ctx.tropical_matmul(a32.astype(np.float16), a32.astype(np.float16)).dtype == np.float32
    got = ctx.tropical_matmul(a64, a64, dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(
        got, ctx.tropical_matmul(a64.astype(np.float32), a64.astype(np.float32))
    )
    assert ctx.shortest_paths(np.zeros((3, 3), dtype=np.int64)).dtype == np.float64
    assert ctx.shortest_paths(a64, dtype="float32").dtype == np.float32
    with pytest.raises(
        InvalidArgumentError,
        match="dtype: this operation computes in float32, float64, got float16",
    ):
        ctx.tropical_matmul(a32, a32, dtype=np.float16)
    with pytest.raises(TypeError, match="b: expected an array of"):
        ctx.tropical_matmul(a32, a32.astype(np.complex64))
    with pytest.raises(
        TypeError, match=r"out: expected dtype float64 \(the result's\), got dtype float32"
    ):
        ctx.tropical_matmul(a64, a64, out=np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(TypeError, match=r"out: expected dtype float64"):
        ctx.shortest_paths(a64, out=np.zeros((2, 2), dtype=np.float32))
    out = np.zeros((2, 2))
    assert ctx.tropical_matmul(a64, a64, out=out) is out


def test_float64_errors_speak_in_float64_terms(
    contexts: dict[str, amari_gpu.MultiGpuContext],
) -> None:
    ctx = contexts["host"]
    with pytest.raises(InvalidArgumentError, match="tropical products overflow float64"):
        ctx.tropical_matmul(np.array([[1e308]]), np.array([[1e308]]))
    inf = np.inf
    with pytest.raises(InvalidArgumentError, match="path lengths overflow float64"):
        ctx.shortest_paths(np.array([[0, 1e308, inf], [inf, 0, 1e308], [inf, inf, 0]]))
    nan = np.array([[0.0, np.nan]])
    with pytest.raises(InvalidArgumentError, match=r"a: expected no NaN .* at \[0, 1\]"):
        ctx.tropical_matmul(nan, np.zeros((2, 1)))


def test_a_device_array_computes_in_the_promoted_dtype_it_holds(
    contexts: dict[str, amari_gpu.MultiGpuContext],
) -> None:
    ctx = contexts["lavapipe"]
    a = np.arange(8.0).reshape(4, 2)
    resident = ctx.asarray(a.astype(np.float32))
    b = np.ascontiguousarray(a.T)
    # float32 rows with float64 b promote to float64, as numpy would: the rows are refused
    # (DeviceArrays are not converted on the devices); dtype=float32 computes in float32.
    with pytest.raises(InvalidArgumentError, match="a: expected a DeviceArray of float64"):
        ctx.tropical_matmul(resident, b)
    got = ctx.tropical_matmul(resident, b, dtype=np.float32)
    assert got.dtype == np.float32
    want = ctx.tropical_matmul(a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(got), want)
    # float64 rows compute in float64 (tests/test_resident_tropical_f64.py).
    got = ctx.tropical_matmul(ctx.asarray(a), b)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(got), ctx.tropical_matmul(a, b))
