"""Cl(3,0) cross-checked against the ``clifford`` package (a test dependency only).

clifford orders blades by grade (1, e1, e2, e3, e12, e13, e23, e123); amari_gpu by bitmask
(1, e1, e2, e12, e3, e13, e23, e123), so rows are permuted between the two. Products use
clifford's own multiplication tensors (``gmt``, ``omt``, ``lcmt``: out_k = Σ a_i T[i, k, j] b_j),
the dual its pseudoscalar, the unary maps its ``MultiVector`` methods; these avoid clifford's
slowest just-in-time compilations. Tolerances are those of ``_ga_helpers``.
"""

from __future__ import annotations

from functools import cache

import clifford
import numpy as np
import pytest
from _ga_helpers import assert_close, product, random_rows
from amari_gpu import Algebra

N = 200
LAYOUT, _ = clifford.Cl(3)
OURS = Algebra(3).blade_names
# Column c of clifford's layout is our blade TO_OURS[c].
TO_OURS = np.array([OURS.index(name or "1") for name in LAYOUT.names])


def to_clifford(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)[:, TO_OURS]


def from_clifford(v: np.ndarray) -> np.ndarray:
    out = np.empty_like(v)
    out[:, TO_OURS] = v
    return out


@cache
def dense(name: str) -> np.ndarray:
    """clifford's sparse tensor ``name`` as a dense array, built from its coordinates (sparse's
    own ``todense`` compiles with numba first, which takes seconds)."""
    tensor = getattr(LAYOUT, name)
    out = np.zeros(tensor.shape)
    out[tuple(tensor.coords)] = tensor.data
    return out


def tensor_product(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return from_clifford(np.einsum("ni,ikj,nj->nk", to_clifford(a), t, to_clifford(b)))


def each_row(x: np.ndarray, f) -> np.ndarray:
    rows = [f(LAYOUT.MultiVector(value=row)).value for row in to_clifford(x)]
    return from_clifford(np.array(rows))


@pytest.fixture(scope="module")
def ab() -> tuple[np.ndarray, np.ndarray]:
    return random_rows(N, 8, 101), random_rows(N, 8, 102)


def test_version_is_recorded():
    assert clifford.__version__  # the cross-check ran against this version


@pytest.mark.parametrize(
    ("method", "tensor", "kind"),
    [
        ("geometric_product", "gmt", "geometric"),
        ("outer_product", "omt", "outer"),
        ("inner_product", "lcmt", "inner"),  # clifford's left contraction
    ],
)
def test_products_match_clifford(default_ctx, ab, method, tensor, kind):
    a, b = ab
    got = getattr(default_ctx, method)(a, b)
    want = tensor_product(dense(tensor), a, b)
    _, bound = product(kind, (3, 0, 0), a, b)
    assert_close(got, want, bound, f"{method} vs clifford")


def test_scalar_product_and_sandwich_match_clifford(default_ctx, ab):
    a, b = ab
    gmt = dense("gmt")
    want_scalar = tensor_product(gmt, a, b)[:, 0]
    bound_scalar = product("scalar", (3, 0, 0), a, b)[1]
    assert_close(default_ctx.scalar_product(a, b), want_scalar, bound_scalar, "scalar product")
    r = np.repeat(a[:1], N, axis=0)
    r_rev = each_row(r, lambda m: ~m)
    want = tensor_product(gmt, tensor_product(gmt, r, b), r_rev)
    abs_gmt = np.abs(gmt)
    bound = tensor_product(abs_gmt, tensor_product(abs_gmt, np.abs(r), np.abs(b)), np.abs(r_rev))
    assert_close(default_ctx.sandwich(a[0], b), want, bound, "sandwich vs clifford")


def test_unary_maps_match_clifford(default_ctx, ab):
    x, _ = ab
    ctx = default_ctx
    np.testing.assert_array_equal(ctx.reverse(x), each_row(x, lambda m: ~m))
    np.testing.assert_array_equal(ctx.grade_involution(x), each_row(x, lambda m: m.gradeInvol()))
    for k in range(4):
        want = each_row(x, lambda m, k=k: m(k))
        np.testing.assert_array_equal(ctx.grade_projection(x, k), want)


def test_dual_and_normalize_match_clifford(default_ctx, ab):
    x, _ = ab
    gmt = dense("gmt")
    pseudo = LAYOUT.pseudoScalar.value
    i_squared = np.einsum("i,ikj,j->k", pseudo, gmt, pseudo)[0]
    i_inv = from_clifford((pseudo / i_squared)[None, :])  # clifford's dual is x I⁻¹
    want_dual = tensor_product(gmt, x, np.repeat(i_inv, N, axis=0))
    np.testing.assert_array_equal(default_ctx.dual(x), want_dual.astype(np.float32))
    x_rev = each_row(x, lambda m: ~m)
    norms = np.sqrt(np.abs(tensor_product(gmt, x, x_rev)[:, 0]))  # clifford's abs()
    want = x / norms[:, None]
    scale = np.abs(want).max(axis=1, keepdims=True) * np.ones_like(want)
    assert_close(default_ctx.normalize(x), want, scale, "normalize vs clifford")
