"""The geometric-algebra methods as an API: broadcasting of single multivectors, result
shapes, the Cl(3,0) default, dtype conversion, empty batches, NaN, zero-norm rows in
``normalize``, and errors that name the argument (shapes, grades, algebras, strategies)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _ga_helpers import assert_close, normalize, product, random_rows, sandwich
from amari_gpu import Algebra, InvalidArgumentError, ShapeError

PGA = Algebra(3, 0, 1)
BINARY = ["geometric_product", "outer_product", "inner_product", "scalar_product", "sandwich"]
UNARY = ["reverse", "grade_involution", "normalize", "dual"]


def _call(ctx, method, *args, **kwargs):
    return getattr(ctx, method)(*args, **kwargs)


# --- broadcasting ---------------------------------------------------------------------------


@pytest.mark.parametrize("alg", [Algebra(3), PGA, Algebra(1)], ids=str)
@pytest.mark.parametrize("method", BINARY)
def test_single_operand_equals_its_repetition_bit_for_bit(default_ctx, method, alg):
    n, w = 1000, alg.n_blades
    batch = random_rows(n, w, 1)
    one = random_rows(1, w, 2)[0]
    repeated = np.repeat(one[None, :], n, axis=0)
    left = _call(default_ctx, method, one, batch, alg)
    if method == "sandwich":
        # One rotor is its linear map, a rotor per row the two-stage (r x) r~ (docs/api.md):
        # both within the float32 bound of the exact sandwich, not the same bits.
        want, bound = sandwich(alg.signature, one, batch)
        assert_close(left, want, bound, "one rotor")
        assert_close(_call(default_ctx, method, repeated, batch, alg), want, bound, "per row")
    else:
        assert left.tobytes() == _call(default_ctx, method, repeated, batch, alg).tobytes()
    right = _call(default_ctx, method, batch, one, alg)
    assert right.tobytes() == _call(default_ctx, method, batch, repeated, alg).tobytes()
    assert left.shape == right.shape == ((n,) if method == "scalar_product" else (n, w))


@pytest.mark.parametrize("method", BINARY)
def test_two_single_multivectors_give_a_single_result(default_ctx, method):
    a, b = random_rows(2, 16, 3)
    got = _call(default_ctx, method, a, b, PGA)
    batch = _call(default_ctx, method, a[None, :], b[None, :], PGA)
    assert got.shape == (() if method == "scalar_product" else (16,))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, batch[0])


@pytest.mark.parametrize("method", UNARY)
def test_unary_methods_keep_the_shape(default_ctx, method):
    x = random_rows(5, 16, 4)
    assert _call(default_ctx, method, x, PGA).shape == (5, 16)
    single = _call(default_ctx, method, x[2], PGA)
    assert single.shape == (16,)
    np.testing.assert_array_equal(single, _call(default_ctx, method, x, PGA)[2])
    assert default_ctx.grade_projection(x[2], 1, PGA).shape == (16,)


def test_rotor_broadcast_over_a_large_batch(default_ctx):
    # The common case: one motor of PGA applied to a million points (e123-dual form).
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1_000_000, 16), dtype=np.float32)
    r = rng.standard_normal(16).astype(np.float32)
    got = default_ctx.sandwich(r, x, PGA)
    assert default_ctx.last_plan is not None and default_ctx.last_plan.items == 1_000_000
    rows = np.r_[0:500, 999_500:1_000_000]
    want, bound = sandwich(PGA.signature, r, x[rows])
    assert_close(got[rows], want, bound, "PGA sandwich, broadcast rotor")


# --- defaults, dtypes, empty batches, plans --------------------------------------------------


def test_algebra_defaults_to_cl3(default_ctx):
    a, b = random_rows(100, 8, 6), random_rows(100, 8, 7)
    explicit = default_ctx.outer_product(a, b, Algebra(3, 0, 0))
    np.testing.assert_array_equal(default_ctx.outer_product(a, b), explicit)
    np.testing.assert_array_equal(default_ctx.outer_product(a, b, None), explicit)
    want, bound = product("outer", (3, 0, 0), a, b)
    assert_close(explicit, want, bound, "default algebra")


def test_inputs_of_any_real_dtype_are_converted_and_left_alone(default_ctx):
    x = np.arange(48, dtype=np.int64).reshape(3, 16) - 20
    before = x.copy()
    # Integers compute in float64, as numpy's true division would (docs/api.md, dtypes).
    got = default_ctx.reverse(x, PGA)
    np.testing.assert_array_equal(x, before)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, default_ctx.reverse(x.astype(np.float64), PGA))
    in32 = default_ctx.reverse(x, PGA, dtype=np.float32)
    assert in32.dtype == np.float32
    np.testing.assert_array_equal(in32, default_ctx.reverse(x.astype(np.float32), PGA))
    lists = default_ctx.geometric_product([0, 1, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(lists, [0, 0, 0, 1, 0, 0, 0, 0])  # e1 e2 = e12


@pytest.mark.parametrize("method", [*BINARY, *UNARY, "grade_projection"])
def test_empty_batches_give_empty_results(default_ctx, method):
    empty = np.empty((0, 16), dtype=np.float32)
    if method == "grade_projection":
        got = default_ctx.grade_projection(empty, 2, PGA)
    elif method in UNARY:
        got = _call(default_ctx, method, empty, PGA)
    else:
        got = _call(default_ctx, method, random_rows(1, 16, 8)[0], empty, PGA)
    assert got.dtype == np.float32
    assert got.shape == ((0,) if method == "scalar_product" else (0, 16))


def test_strategy_is_used_and_plan_recorded(default_ctx):
    x = random_rows(5000, 32, 9)
    default_ctx.reverse(x, Algebra(4, 1), strategy="balanced")
    assert default_ctx.last_plan.requested_strategy == "balanced"
    assert default_ctx.last_plan.items == 5000
    with pytest.raises(InvalidArgumentError, match=r"strateg"):
        default_ctx.reverse(x, Algebra(4, 1), strategy="fastest")


# --- normalize: zero and null rows, NaN --------------------------------------------------------


def test_normalize_leaves_zero_and_null_rows_unchanged(default_ctx):
    pga = np.zeros((4, 16), dtype=np.float32)
    pga[1, 8] = 3.0  # e4: squares to 0 (an ideal element)
    pga[2, [8, 9, 10]] = [1.0, -2.0, 5.0]  # e4, e14, e24: all null
    pga[3, [1, 8]] = [2.0, 7.0]  # 2 e1 + 7 e4: norm 2
    got = default_ctx.normalize(pga, PGA)
    np.testing.assert_array_equal(got[:3], pga[:3])
    # Computed as (x / 7) / sqrt((2/7)²): float32 rounding, not exactly x / 2.
    np.testing.assert_allclose(got[3], pga[3] / 2, rtol=1e-6)
    cga = np.zeros((2, 32), dtype=np.float32)
    cga[0, [8, 16]] = [1.5, 1.5]  # 1.5 (e4 + e5) with e4² = 1, e5² = -1: a null vector
    cga[1, [0, 16]] = [0.0, 4.0]  # 4 e5: ⟨x x̃⟩₀ = -16, normalised by sqrt(16)
    got = default_ctx.normalize(cga, Algebra(4, 1))
    np.testing.assert_array_equal(got[0], cga[0])
    np.testing.assert_allclose(got[1], cga[1] / 4, rtol=1e-6)


def test_normalize_is_scale_free(default_ctx):
    # Rows near the ends of float32's range neither overflow nor underflow.
    x = random_rows(64, 8, 10)
    scales = np.float32(10.0) ** np.arange(-30, 34, dtype=np.float32)
    scaled = x * scales[:, None]
    got = default_ctx.normalize(scaled)
    want, _ = normalize((3, 0, 0), x.astype(np.float64))
    assert_close(got, want, np.ones_like(want) * 4, "normalize over 64 decades")


def test_nan_and_inf_follow_the_documented_rule(default_ctx):
    # NaN spreads over its row; an infinite norm makes the infinite entry NaN and the finite
    # ones x / inf = 0 (every case and device kind: test_ga_normalize_special.py).
    x = random_rows(4, 8, 11)
    x[1, 3] = np.nan
    x[2, 0] = np.inf
    got = default_ctx.normalize(x)
    assert np.isnan(got[1]).all()
    assert np.isnan(got[2, 0]) and (got[2, 1:] == 0).all()
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got[2], x[2] / np.inf)
    assert np.isfinite(got[[0, 3]]).all()


# --- errors naming the argument ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "shapes", "argument", "message"),
    [
        ("geometric_product", [(5, 15), (5, 16)], "a", "expected shape (..., 16), got (5, 15)"),
        (
            "outer_product",
            [(5, 16), (4, 16)],
            "b",
            "expected leading dimensions that broadcast with a's (5,), got shape (4, 16)",
        ),
        ("inner_product", [(16,), (5, 8)], "b", "expected shape (..., 16), got (5, 8)"),
        ("sandwich", [(8,), (5, 16)], "r", "expected shape (..., 16), got (8,)"),
        (
            "sandwich",
            [(3, 16), (2, 16)],
            "x",
            "expected leading dimensions that broadcast with r's (3,), got shape (2, 16)",
        ),
        ("sandwich", [(16,), (2, 16, 1)], "x", "expected shape (..., 16), got (2, 16, 1)"),
        ("reverse", [(5, 8)], "x", "expected shape (..., 16), got (5, 8)"),
        ("normalize", [()], "x", "expected shape (..., 16), got ()"),
        ("dual", [(16, 5)], "x", "expected shape (..., 16), got (16, 5)"),
    ],
)
def test_wrong_shapes_name_the_argument(default_ctx, method, shapes, argument, message):
    arrays = [np.zeros(s, dtype=np.float32) for s in shapes]
    pattern = rf"^{argument}: {re.escape(message)}$"
    with pytest.raises(ShapeError, match=pattern):
        _call(default_ctx, method, *arrays, PGA)


@pytest.mark.parametrize(
    ("k", "message"),
    [
        (5, r"^k: expected grades in 0\.\.4 for Cl\(3,0,1\), got 5$"),
        (-1, r"^k: expected grades in 0\.\.4 .*got -1$"),
        ([1, 7], r"^k: .*got 7$"),
        ([], r"^k: expected at least one grade"),
        (1.0, r"^k: expected a grade in 0\.\.4 or a sequence of them, got 1\.0$"),
        (True, r"^k: expected a grade in 0\.\.4 or a sequence of them, got True$"),
        (["1"], r"^k: .*got '1'$"),
        (None, r"^k: expected a grade"),
    ],
)
def test_bad_grades_name_k(default_ctx, k, message):
    with pytest.raises(InvalidArgumentError, match=message):
        default_ctx.grade_projection(np.zeros((2, 16)), k, PGA)


@pytest.mark.parametrize("bad", [(3, 0, 1), "Cl(3,0,1)", 3])
def test_algebra_must_be_an_algebra(default_ctx, bad):
    with pytest.raises(InvalidArgumentError, match=r"^algebra: expected an amari_gpu\.Algebra"):
        default_ctx.geometric_product(np.zeros(8), np.zeros(8), bad)


@pytest.mark.parametrize("argument", ["r", "x"])
def test_non_real_dtypes_raise_type_error_naming_the_argument(default_ctx, argument):
    good = np.zeros((3, 16), dtype=np.float32)
    bad = np.zeros((3, 16), dtype=np.complex64)
    args = (bad, good) if argument == "r" else (good, bad)
    with pytest.raises(TypeError, match=rf"^{argument}: .*complex64"):
        default_ctx.sandwich(*args, PGA)


def test_strategy_and_algebra_are_keyword_friendly(default_ctx):
    x = random_rows(3, 16, 12)
    got = default_ctx.grade_projection(x, k=[1, 3], algebra=PGA, strategy="latency")
    assert got.shape == (3, 16)
    with pytest.raises(TypeError):
        default_ctx.reverse(x, PGA, "latency")  # strategy is keyword-only
