"""Algebraic identities the GPU results must satisfy, on hypothesis-drawn multivectors.

Involutions undo themselves exactly; grade projections sum exactly to the identity; the
scalar product is exactly the scalar part of the geometric product (the same terms in the
same order); duals compose to ±1 exactly; for a vector a, a ∧ B = ½(aB + B̂a) and
a ⌋ B = ½(aB - B̂a); normalised Euclidean rotors preserve the norm and grade of the vectors
they are applied to. Approximate identities use the magnitude bounds of ``_ga_helpers``.
"""

from __future__ import annotations

import numpy as np
from _ga_helpers import SIGNATURES, assert_close, dual, product
from amari_gpu import Algebra
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SMALL = SIGNATURES[:4]
VALUES = st.floats(-100, 100, width=32, allow_subnormal=False)


@st.composite
def batches(draw, signatures=SMALL):
    sig = draw(st.sampled_from(signatures))
    rows = draw(st.integers(1, 30))
    x = draw(hnp.arrays(np.float32, (rows, 1 << sum(sig)), elements=VALUES))
    return Algebra(*sig), x


@settings(max_examples=30, deadline=None)
@given(case=batches())
def test_involutions_undo_themselves(default_ctx, case):
    alg, x = case
    ctx = default_ctx
    np.testing.assert_array_equal(ctx.reverse(ctx.reverse(x, alg), alg), x)
    np.testing.assert_array_equal(ctx.grade_involution(ctx.grade_involution(x, alg), alg), x)


@settings(max_examples=30, deadline=None)
@given(case=batches())
def test_grade_projections_sum_to_the_identity(default_ctx, case):
    alg, x = case
    parts = [default_ctx.grade_projection(x, k, alg) for k in range(alg.dimension + 1)]
    np.testing.assert_array_equal(np.sum(parts, axis=0), x)
    np.testing.assert_array_equal(default_ctx.grade_projection(x, range(alg.dimension + 1), alg), x)


@settings(max_examples=30, deadline=None)
@given(case=batches(), data=st.data())
def test_scalar_product_is_the_scalar_part(default_ctx, case, data):
    alg, a = case
    b = data.draw(hnp.arrays(np.float32, a.shape, elements=VALUES))
    whole = default_ctx.geometric_product(a, b, alg)
    np.testing.assert_array_equal(default_ctx.scalar_product(a, b, alg), whole[:, 0])


@settings(max_examples=20, deadline=None)
@given(case=batches([s for s in SMALL if s[2] == 0]))
def test_double_dual_is_a_sign(default_ctx, case):
    alg, x = case
    full = np.eye(alg.n_blades)[-1]
    sign = dual(alg.signature, dual(alg.signature, full))[0, -1]  # I⁻¹ I⁻¹ = ±1
    np.testing.assert_array_equal(default_ctx.dual(default_ctx.dual(x, alg), alg), sign * x)


@settings(max_examples=30, deadline=None)
@given(case=batches(), data=st.data())
def test_vector_outer_and_inner_from_the_geometric_product(default_ctx, case, data):
    alg, big_b = case
    ctx = default_ctx
    a = ctx.grade_projection(
        data.draw(hnp.arrays(np.float32, big_b.shape, elements=VALUES)), 1, alg
    )
    ab = ctx.geometric_product(a, big_b, alg).astype(np.float64)
    ba = ctx.geometric_product(ctx.grade_involution(big_b, alg), a, alg).astype(np.float64)
    _, bound = product("geometric", alg.signature, np.abs(a), np.abs(big_b))
    assert_close(ctx.outer_product(a, big_b, alg), (ab + ba) / 2, 2 * bound, "a ∧ B")
    assert_close(ctx.inner_product(a, big_b, alg), (ab - ba) / 2, 2 * bound, "a ⌋ B")


@settings(max_examples=20, deadline=None)
@given(
    sig=st.sampled_from([(3, 0, 0), (6, 0, 0)]),
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 50),
)
def test_rotors_preserve_norms_and_grades(default_ctx, sig, seed, rows):
    ctx = default_ctx
    alg = Algebra(*sig)
    rng = np.random.default_rng(seed)
    vectors = ctx.grade_projection(rng.standard_normal((rows + 2, alg.n_blades)), 1, alg)
    u, v, x = vectors[0], vectors[1], vectors[2:]
    rotor = ctx.normalize(ctx.geometric_product(u, v, alg), alg)  # u v / |u||v|: a rotor
    # The rotor repeated per row: the batch kernel, already compiled for the reference tests
    # (broadcasting has its own tests), spares a slow Cl(6,0) compilation.
    y = ctx.sandwich(np.repeat(rotor[None, :], rows, axis=0), x, alg)
    norm_x = ctx.scalar_product(x, x, alg).astype(np.float64)
    norm_y = ctx.scalar_product(y, y, alg).astype(np.float64)
    np.testing.assert_allclose(norm_y, norm_x, rtol=2e-5)
    off_grade = y - ctx.grade_projection(y, 1, alg)
    assert np.abs(off_grade).max() <= 2e-5 * np.sqrt(norm_x.max())
