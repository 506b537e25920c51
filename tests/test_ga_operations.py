"""Every geometric-algebra operation against the float64 references of ``_ga_helpers``, in
Cl(3,0), spacetime Cl(1,3), PGA Cl(3,0,1), CGA Cl(4,1) and Cl(6,0).

Products, sandwiches and normalisation are checked coefficient by coefficient within
``REL_TOL`` of their magnitude bounds (see ``_ga_helpers``); the signed permutations (reverse,
grade involution, projection, dual) must be exact. Fixed random batches cover every operation
in every algebra on one device; hypothesis draws algebras, batch sizes, values and which
operand is a single multivector.
"""

from __future__ import annotations

import numpy as np
import pytest
from _ga_helpers import (
    SIGNATURES,
    assert_close,
    assert_normalized,
    dual,
    involution_signs,
    product,
    projection,
    random_rows,
    reverse_signs,
    sandwich,
)
from amari_gpu import Algebra
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

N = 301  # rows of the fixed batches; several 64-thread workgroups and a ragged last one
IDS = [f"Cl{p}{q}{r}" for p, q, r in SIGNATURES]
PRODUCTS = ["geometric", "outer", "inner", "scalar"]


def _pair(sig: tuple[int, int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    width = 1 << sum(sig)
    return random_rows(N, width, seed), random_rows(N, width, seed + 1)


@pytest.mark.parametrize("kind", PRODUCTS)
@pytest.mark.parametrize("sig", SIGNATURES, ids=IDS)
def test_products_match_reference(default_ctx, sig, kind):
    a, b = _pair(sig, 10)
    got = getattr(default_ctx, f"{kind}_product")(a, b, Algebra(*sig))
    want, bound = product(kind, sig, a, b)
    assert_close(got, want, bound, f"{kind} product in Cl{sig}")


@pytest.mark.parametrize("sig", SIGNATURES, ids=IDS)
def test_sandwich_matches_reference(default_ctx, sig):
    r, x = _pair(sig, 20)
    got = default_ctx.sandwich(r, x, Algebra(*sig))
    want, bound = sandwich(sig, r, x)
    assert_close(got, want, bound, f"sandwich in Cl{sig}")


@pytest.mark.parametrize("sig", SIGNATURES, ids=IDS)
def test_signed_permutations_are_exact(default_ctx, sig):
    alg = Algebra(*sig)
    x, _ = _pair(sig, 30)
    x64 = x.astype(np.float64)
    cases = {
        "reverse": (default_ctx.reverse(x, alg), x64 * reverse_signs(sig)),
        "grade_involution": (default_ctx.grade_involution(x, alg), x64 * involution_signs(sig)),
        "dual": (default_ctx.dual(x, alg), dual(sig, x64)),
    }
    for name, (got, want) in cases.items():
        assert got.dtype == np.float32 and got.shape == x.shape, name
        np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=name)


@pytest.mark.parametrize("sig", SIGNATURES, ids=IDS)
def test_grade_projections_are_exact(default_ctx, sig):
    alg = Algebra(*sig)
    x, _ = _pair(sig, 40)
    selections = [[k] for k in range(alg.dimension + 1)] + [[0, 2], list(range(alg.dimension + 1))]
    for grades in selections:
        arg = grades[0] if len(grades) == 1 else grades
        got = default_ctx.grade_projection(x, arg, alg)
        want = projection(sig, x, grades).astype(np.float32)
        np.testing.assert_array_equal(got, want, err_msg=f"grades {grades}")


@pytest.mark.parametrize("sig", SIGNATURES, ids=IDS)
def test_normalize_matches_reference(default_ctx, sig):
    x, _ = _pair(sig, 50)
    got = default_ctx.normalize(x, Algebra(*sig))
    # Cancellation in an indefinite norm magnifies rounding by the condition number.
    assert_normalized(got, sig, x)


# --- property-based: algebras, sizes, values and broadcasting drawn by hypothesis ----------

SMALL = SIGNATURES[:4]  # Cl(6,0) has its fixed-batch tests above; its kernels compile slowly
VALUES = st.floats(-1e3, 1e3, width=32, allow_subnormal=False)


@st.composite
def product_cases(draw):
    sig = draw(st.sampled_from(SMALL))
    width = 1 << sum(sig)
    rows = draw(st.integers(1, 40))
    single = draw(st.sampled_from(["none", "left", "right"]))
    a_shape = (width,) if single == "left" else (rows, width)
    b_shape = (width,) if single == "right" else (rows, width)
    a = draw(hnp.arrays(np.float32, a_shape, elements=VALUES))
    b = draw(hnp.arrays(np.float32, b_shape, elements=VALUES))
    kind = draw(st.sampled_from([*PRODUCTS, "sandwich"]))
    return sig, kind, a, b


@settings(max_examples=60, deadline=None)
@given(case=product_cases())
def test_drawn_products_match_reference(default_ctx, case):
    sig, kind, a, b = case
    alg = Algebra(*sig)
    if kind == "sandwich":
        got = default_ctx.sandwich(a, b, alg)
        want, bound = sandwich(sig, a, b)
    else:
        got = getattr(default_ctx, f"{kind}_product")(a, b, alg)
        want, bound = product(kind, sig, a, b)
    assert_close(got, want, bound, f"{kind} in Cl{sig}")


@settings(max_examples=40, deadline=None)
@given(
    sig=st.sampled_from(SMALL),
    rows=st.integers(1, 40),
    data=st.data(),
)
def test_drawn_normalize_matches_reference(default_ctx, sig, rows, data):
    width = 1 << sum(sig)
    x = data.draw(hnp.arrays(np.float32, (rows, width), elements=VALUES))
    assert_normalized(default_ctx.normalize(x, Algebra(*sig)), sig, x)


def test_normalize_scales_by_the_blades_that_enter_the_norm(default_ctx):
    # A large null part (e4 in PGA) next to tiny Euclidean parts: scaling by the largest
    # component overall would push the Euclidean squares into underflow and leave the row
    # as if it were null (found by hypothesis).
    x = np.full((1, 16), np.float32(1.1754944e-38))
    x[0, 8] = 1.0
    assert_normalized(default_ctx.normalize(x, Algebra(3, 0, 1)), (3, 0, 1), x)
    # A maximum of 2^-100 is scaled up in two steps (2^64, then 2^36).
    y = np.zeros((1, 8), np.float32)
    y[0, 0] = y[0, 3] = np.float32(2.0**-100)
    assert_normalized(default_ctx.normalize(y, Algebra(3, 0, 0)), (3, 0, 0), y)


@pytest.mark.parametrize("sig", [(3, 0, 1), (2, 0, 1)], ids=["Cl301", "Cl201"])
def test_normalize_keeps_a_large_null_part_finite_beside_tiny_entering_parts(default_ctx, sig):
    # The blades with the null vector (the upper half) do not enter the norm; the others are
    # tiny, so the row is scaled by up to 2^126 before the division: a null x_k of a few
    # units overflowed there although x_k / |x| is finite (found by hypothesis). Null parts
    # up to 0.99 of float32's maximum after the division, and past it (inf); over several
    # devices' chunks.
    width = 1 << sum(sig)
    null = np.arange(width) >= width // 2
    rows = [np.where(null, np.float32(2.0), np.float32(1e-38))]
    for t in [1e-38, 1.2e-38, 3e-38, 1e-37, 1e-30]:
        norm = np.sqrt(width // 2) * float(np.float32(t))
        for frac in [0.3, 0.5, 0.9, 0.99, -0.99, 1.5]:
            rows.append(np.where(null, frac * float(np.finfo(np.float32).max) * norm, t))
    x = np.stack(rows * 16).astype(np.float32)
    got = default_ctx.normalize(x, Algebra(*sig))
    assert_normalized(got, sig, x)
    x64 = x.astype(np.float64)
    largest = np.abs(x64[:, null]).max(axis=1) / np.sqrt((x64[:, ~null] ** 2).sum(axis=1))
    finite = largest < np.finfo(np.float32).max
    assert finite.any() and not finite.all()
    assert np.isfinite(got[finite]).all()
    assert np.isinf(got[~finite][:, null]).all()
