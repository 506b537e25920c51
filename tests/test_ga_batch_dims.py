"""Leading batch dimensions of GA operands work like a numpy gufunc's (issue 14, item 16):
any number of leading axes, broadcast against each other by numpy's rules, the result shaped
like the broadcast leading axes; the same bits as the flat (N, 2ⁿ) call."""

from __future__ import annotations

import re

import numpy as np
import pytest
from amari_gpu import Algebra, ShapeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

PRODUCTS = ("geometric_product", "outer_product", "inner_product", "scalar_product", "sandwich")
UNARY = ("reverse", "grade_involution", "normalize", "dual")


def _values(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("method", PRODUCTS)
def test_a_2_4_8_batch_times_one_multivector_keeps_its_shape(default_ctx, method):
    a, r = _values((2, 4, 8), 1), _values((8,), 2)
    got = getattr(default_ctx, method)(a, r)
    flat = getattr(default_ctx, method)(a.reshape(8, 8), r)
    lead = (2, 4) if method == "scalar_product" else (2, 4, 8)
    assert got.shape == lead and got.dtype == np.float32
    np.testing.assert_array_equal(got, flat.reshape(lead))


@pytest.mark.parametrize("method", UNARY)
def test_unary_operations_keep_leading_dimensions(default_ctx, method):
    x = _values((3, 1, 2, 8), 3)
    got = getattr(default_ctx, method)(x)
    assert got.shape == (3, 1, 2, 8)
    np.testing.assert_array_equal(
        got, getattr(default_ctx, method)(x.reshape(-1, 8)).reshape(got.shape)
    )
    projected = default_ctx.grade_projection(x, [0, 2])
    np.testing.assert_array_equal(
        projected, default_ctx.grade_projection(x.reshape(-1, 8), [0, 2]).reshape(x.shape)
    )


def test_empty_leading_dimensions(default_ctx):
    assert default_ctx.geometric_product(np.zeros((0, 3, 8)), np.ones(8)).shape == (0, 3, 8)
    assert default_ctx.scalar_product(np.zeros((2, 0, 8)), np.ones((2, 0, 8))).shape == (2, 0)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    method=st.sampled_from(PRODUCTS),
    seed=st.integers(0, 2**16),
)
def test_broadcast_equals_the_flat_call_on_numpy_broadcast_operands(
    default_ctx, shapes, method, seed
):
    (sa, sb), lead = shapes.input_shapes, shapes.result_shape
    a, b = _values((*sa, 8), seed), _values((*sb, 8), seed + 1)
    got = getattr(default_ctx, method)(a, b)
    fa = np.broadcast_to(a, (*lead, 8)).reshape(-1, 8)
    if method == "sandwich" and a.size == 8:
        # One rotor is its linear map whatever the leading shape; a rotor per row is not
        # (docs/api.md): the flat call takes the one rotor too.
        fa = a.reshape(8)
    fb = np.broadcast_to(b, (*lead, 8)).reshape(-1, 8)
    want = getattr(default_ctx, method)(fa, fb)
    out_lead = lead if method == "scalar_product" else (*lead, 8)
    assert got.shape == out_lead
    np.testing.assert_array_equal(got, want.reshape(out_lead))


def test_other_algebras_and_dtypes(default_ctx):
    pga = Algebra(3, 0, 1)
    a, b = _values((2, 3, 16), 5).astype(np.float64), _values((3, 16), 6)
    got = default_ctx.geometric_product(a, b, pga)
    # float64 with float32 promotes to float64, as numpy does.
    assert got.shape == (2, 3, 16) and got.dtype == np.float64
    want = default_ctx.geometric_product(a.reshape(6, 16), np.tile(b, (2, 1)), pga)
    np.testing.assert_array_equal(got, want.reshape(2, 3, 16))


@pytest.mark.parametrize(
    ("shapes", "argument", "message"),
    [
        ([(5, 15), (5, 16)], "a", "expected shape (..., 16), got (5, 15)"),
        ([(16,), (5, 8)], "b", "expected shape (..., 16), got (5, 8)"),
        ([(), (16,)], "a", "expected shape (..., 16), got ()"),
        (
            [(5, 16), (4, 16)],
            "b",
            "expected leading dimensions that broadcast with a's (5,), got shape (4, 16)",
        ),
        (
            [(2, 3, 16), (2, 16)],
            "b",
            "expected leading dimensions that broadcast with a's (2, 3), got shape (2, 16)",
        ),
    ],
)
def test_shapes_that_do_not_broadcast_name_the_argument(default_ctx, shapes, argument, message):
    a, b = (np.zeros(s, np.float32) for s in shapes)
    with pytest.raises(ShapeError, match=f"^{argument}: {re.escape(message)}$"):
        default_ctx.geometric_product(a, b, Algebra(3, 0, 1))
