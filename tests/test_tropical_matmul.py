"""``MultiGpuContext.tropical_matmul``: max-plus and min-plus products on the devices.

Every result is compared with the float32 reference of ``_tropical_helpers`` with
``np.array_equal`` (bit-exact up to the sign of zero; infinities included): random shapes on
every adapter (1 x 1, K = 1, K = 0, sizes that are not multiples of the 64 x 64 tile, M large
enough that several devices of a chunked context get work), both semirings, ±inf sprinkled in
the inputs, batched products; then argument errors, dtype conversion and input immutability.
"""

from __future__ import annotations

import numpy as np
import pytest
from _tropical_helpers import (
    SEMIRINGS,
    ZERO,
    batched_products,
    random_cases,
    random_operand,
    reference_matmul,
)
from amari_gpu import InvalidArgumentError, MultiGpuContext, ShapeError
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def chunked_ctx() -> MultiGpuContext:
    """Three logical devices on each default adapter, 2 row blocks (128 rows) per chunk."""
    return MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, chunk_items=2)


@random_cases(
    12, [0.0, 0.05, 0.3], m=st.integers(1, 150), k=st.integers(1, 70), n=st.integers(1, 140)
)
def test_products_equal_the_float32_reference(
    adapter_ctx: MultiGpuContext, m: int, k: int, n: int, semiring: str, inf: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a = random_operand(rng, (m, k), inf)
    b = random_operand(rng, (k, n), inf)
    got = adapter_ctx.tropical_matmul(a, b, semiring)
    assert got.dtype == np.float32 and got.shape == (m, n)
    assert np.array_equal(got, reference_matmul(a, b, semiring))


@settings(max_examples=8, deadline=None)
@given(**batched_products(5, 90, (0, 40), 70), seed=st.integers(0, 2**32 - 1))
def test_batched_products_equal_the_reference(
    chunked_ctx: MultiGpuContext, batch: int, m: int, k: int, n: int, semiring: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a = random_operand(rng, (batch, m, k), 0.1)
    b = random_operand(rng, (batch, k, n), 0.1)
    got = chunked_ctx.tropical_matmul(a, b, semiring=semiring)
    assert got.shape == (batch, m, n)
    assert np.array_equal(got, reference_matmul(a, b, semiring))
    assert chunked_ctx.last_plan is not None
    assert chunked_ctx.last_plan.items == batch * -(-m // 64)  # items are 64-row blocks


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (1, 1, 300), (300, 1, 1), (64, 64, 64)])
def test_edge_shapes(adapter_ctx: MultiGpuContext, semiring: str, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = random_operand(rng, (m, k), 0.2)
    b = random_operand(rng, (k, n), 0.2)
    assert np.array_equal(
        adapter_ctx.tropical_matmul(a, b, semiring), reference_matmul(a, b, semiring)
    )


def test_many_rows_spread_over_every_device(chunked_ctx: MultiGpuContext) -> None:
    rng = np.random.default_rng(7)
    a = random_operand(rng, (2_001, 33), 0.05)
    b = random_operand(rng, (33, 97), 0.05)
    for semiring in SEMIRINGS:
        got = chunked_ctx.tropical_matmul(a, b, semiring, strategy="balanced")
        assert np.array_equal(got, reference_matmul(a, b, semiring))
        plan = chunked_ctx.last_plan
        assert plan is not None
        assert len({w.device_id for w in plan if w.items > 0}) == len(chunked_ctx.devices)


INF = np.inf
# Worked by hand from the definition: the zero of the semiring absorbs the opposite infinity.
INF_A = [[-INF, 1.0], [INF, -INF], [2.0, 3.0]]
INF_B = [[INF, -INF, 0.0], [5.0, INF, -INF]]
INF_WANT = {
    # e.g. [0, 0]: max(-inf ⊗ inf, 1 + 5) = max(-inf, 6) = 6.
    "max_plus": [[6.0, INF, -INF], [INF, -INF, INF], [INF, INF, 2.0]],
    # e.g. [1, 1]: min(inf ⊗ -inf, -inf ⊗ inf) = min(inf, inf) = inf.
    "min_plus": [[6.0, -INF, -INF], [-INF, INF, -INF], [8.0, -INF, -INF]],
}


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_infinities_follow_the_absorbing_zero_rule(
    adapter_ctx: MultiGpuContext, semiring: str
) -> None:
    # float32 operands: every adapter computes in float32 (float64 edges are in
    # test_dtypes_tropical.py, on the devices that run float64).
    a, b = np.array(INF_A, dtype=np.float32), np.array(INF_B, dtype=np.float32)
    got = adapter_ctx.tropical_matmul(a, b, semiring)
    want = np.array(INF_WANT[semiring], dtype=np.float32)
    assert np.array_equal(got, want)
    assert np.array_equal(want, reference_matmul(np.array(INF_A), np.array(INF_B), semiring))


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_empty_inner_dimension_gives_the_tropical_zero(
    default_ctx: MultiGpuContext, semiring: str
) -> None:
    got = default_ctx.tropical_matmul(np.zeros((3, 0)), np.zeros((0, 5)), semiring)
    assert np.array_equal(got, np.full((3, 5), ZERO[semiring], dtype=np.float32))
    batched = default_ctx.tropical_matmul(np.zeros((2, 3, 0)), np.zeros((2, 0, 4)), semiring)
    assert np.array_equal(batched, np.full((2, 3, 4), ZERO[semiring], dtype=np.float32))


def test_empty_results_have_the_right_shape(default_ctx: MultiGpuContext) -> None:
    assert default_ctx.tropical_matmul(np.zeros((0, 4)), np.zeros((4, 3))).shape == (0, 3)
    assert default_ctx.tropical_matmul(np.zeros((2, 4)), np.zeros((4, 0))).shape == (2, 0)
    assert default_ctx.tropical_matmul(np.zeros((0, 2, 4)), np.zeros((0, 4, 3))).shape == (0, 2, 3)


def test_any_real_dtype_is_converted_and_inputs_are_not_modified(
    default_ctx: MultiGpuContext,
) -> None:
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    b = np.array([[True, False], [False, True], [True, True], [False, False]])
    a_copy, b_copy = a.copy(), b.copy()
    got = default_ctx.tropical_matmul(a, b, "min_plus")
    assert np.array_equal(
        got, reference_matmul(a.astype(np.float32), b.astype(np.float32), "min_plus")
    )
    assert np.array_equal(a, a_copy) and np.array_equal(b, b_copy)
    # Non-contiguous float32 views are fine too, and stay untouched.
    big = random_operand(np.random.default_rng(1), (8, 10), 0.2)
    before = big.copy()
    view = big[::2, 1::3]
    got = default_ctx.tropical_matmul(view, view.T.copy())
    assert np.array_equal(got, reference_matmul(view, view.T, "max_plus"))
    assert np.array_equal(big, before, equal_nan=False)


@pytest.mark.parametrize(
    ("a", "b", "argument"),
    [
        (np.zeros((2, 3)), np.zeros((4, 2)), "b"),
        (np.zeros(3), np.zeros((3, 2)), "a"),
        (np.zeros((2, 2, 2, 2)), np.zeros((2, 2)), "a"),
        (np.zeros((2, 3)), np.zeros((2, 3, 2)), "b"),
        (np.zeros((2, 2, 3)), np.zeros((3, 3, 2)), "b"),
    ],
)
def test_shape_errors_name_the_argument(
    default_ctx: MultiGpuContext, a: np.ndarray, b: np.ndarray, argument: str
) -> None:
    with pytest.raises(ShapeError, match=rf"^{argument}: expected shape .*, got \("):
        default_ctx.tropical_matmul(a, b)


def test_nan_and_bad_arguments_are_refused(default_ctx: MultiGpuContext) -> None:
    a = np.zeros((3, 3), dtype=np.float32)
    bad = a.copy()
    bad[1, 2] = np.nan
    with pytest.raises(
        InvalidArgumentError, match=r"^a: expected no NaN .*at \[1, 2\] of shape \(3, 3\)"
    ):
        default_ctx.tropical_matmul(bad, a)
    with pytest.raises(ValueError, match=r"^b: expected no NaN"):
        default_ctx.tropical_matmul(a, bad)
    with pytest.raises(InvalidArgumentError, match=r"^semiring: expected one of"):
        default_ctx.tropical_matmul(a, a, "plus_times")
    with pytest.raises(InvalidArgumentError, match=r"^strategy: expected one of"):
        default_ctx.tropical_matmul(a, a, strategy="fastest")
    with pytest.raises(
        TypeError,
        match=r"^a: expected an array of bool, integer, float16, .* got dtype complex",
    ):
        default_ctx.tropical_matmul(a.astype(np.complex64), a)
    with pytest.raises(
        TypeError,
        match=r"^b: expected an array of bool, integer, float16, .* got dtype <U1",
    ):
        default_ctx.tropical_matmul(a, np.array([["x"]]))
