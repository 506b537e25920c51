"""``MultiGpuContext.tropical_matvec``: tropical matrix-vector products, batched or not,
bit-equal to the float32 reference (infinities included), and its argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from _tropical_helpers import SEMIRINGS, ZERO, random_cases, random_operand, reference_matvec
from amari_gpu import InvalidArgumentError, MultiGpuContext, ShapeError
from hypothesis import strategies as st


@random_cases(10, [0.0, 0.1, 0.4], m=st.integers(1, 300), k=st.integers(1, 200))
def test_matvec_equals_the_float32_reference(
    adapter_ctx: MultiGpuContext, m: int, k: int, semiring: str, inf: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a = random_operand(rng, (m, k), inf)
    x = random_operand(rng, (k,), inf)
    got = adapter_ctx.tropical_matvec(a, x, semiring)
    assert got.dtype == np.float32 and got.shape == (m,)
    assert np.array_equal(got, reference_matvec(a, x, semiring))


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_batched_matvec_spread_over_devices(devices3: MultiGpuContext, semiring: str) -> None:
    rng = np.random.default_rng(3)
    a = random_operand(rng, (4, 1_000, 70), 0.1)
    x = random_operand(rng, (4, 70), 0.1)
    got = devices3.tropical_matvec(a, x, semiring=semiring, strategy="balanced")
    assert got.shape == (4, 1_000)
    assert np.array_equal(got, reference_matvec(a, x, semiring))


def test_empty_and_single_element_cases(default_ctx: MultiGpuContext) -> None:
    for semiring in SEMIRINGS:
        zero = np.float32(ZERO[semiring])
        assert np.array_equal(
            default_ctx.tropical_matvec(np.zeros((3, 0)), np.zeros(0), semiring),
            np.full(3, zero, dtype=np.float32),
        )
    assert default_ctx.tropical_matvec(np.zeros((0, 3)), np.zeros(3)).shape == (0,)
    assert np.array_equal(default_ctx.tropical_matvec([[2.5]], [-1.0]), np.array([1.5], np.float32))


def test_inputs_are_not_modified(default_ctx: MultiGpuContext) -> None:
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    x = np.linspace(-1, 1, 5)
    a_copy, x_copy = a.copy(), x.copy()
    got = default_ctx.tropical_matvec(a, x, "min_plus")
    assert np.array_equal(
        got, reference_matvec(a.astype(np.float32), x.astype(np.float32), "min_plus")
    )
    assert np.array_equal(a, a_copy) and np.array_equal(x, x_copy)


def test_errors_name_the_argument(default_ctx: MultiGpuContext) -> None:
    a = np.zeros((3, 4), dtype=np.float32)
    with pytest.raises(ShapeError, match=r"^x: expected shape \(4,\), got \(3,\)"):
        default_ctx.tropical_matvec(a, np.zeros(3))
    with pytest.raises(ShapeError, match=r"^x: expected shape \(2, 4\), got \(4,\)"):
        default_ctx.tropical_matvec(np.zeros((2, 3, 4)), np.zeros(4))
    with pytest.raises(ShapeError, match=r"^a: expected shape"):
        default_ctx.tropical_matvec(np.zeros(4), np.zeros(4))
    x = np.zeros(4, dtype=np.float32)
    x[2] = np.nan
    with pytest.raises(InvalidArgumentError, match=r"^x: expected no NaN"):
        default_ctx.tropical_matvec(a, x)
    with pytest.raises(InvalidArgumentError, match=r"^semiring: "):
        default_ctx.tropical_matvec(a, np.zeros(4), semiring="max")
    with pytest.raises(
        TypeError,
        match=r"^x: expected an array of bool, integer, float16, .* got dtype complex",
    ):
        default_ctx.tropical_matvec(a, np.zeros(4, dtype=complex))
