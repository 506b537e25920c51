"""Independent float64 references of the geometric-algebra operations, and test-data helpers.

Written from the textbook definitions, not from amari_gpu: blade i is the product of the basis
vectors of the set bits of i in ascending order; e_i e_j = sign * metric * e_(i^j), where sign
counts the swaps of anticommuting vectors that sort the concatenation and metric is the product
of the squares of the vectors i and j share. The outer product keeps the grade-(r+s) part of
the product of a grade-r and a grade-s part, the left contraction the grade-(s-r) part when
s >= r (and nothing when s < r), the scalar product the grade-0 part.

Tolerance: GPU results are float32. Every output coefficient is a sum of signed products of
inputs, and its float32 error is at most a small multiple of float32's epsilon times the sum of
the absolute values of those products (its *magnitude bound*), whatever the cancellation. We
accept |got - want| <= REL_TOL * bound per coefficient (bounds of 0 mean exactly 0).
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

REL_TOL = 1e-5
"""Accepted error relative to the magnitude bound of each coefficient (see above)."""

SIGNATURES = [(3, 0, 0), (1, 3, 0), (3, 0, 1), (4, 1, 0), (6, 0, 0)]
"""Euclidean 3-space, spacetime, projective (PGA), conformal (CGA) and Cl(6,0)."""


class Table(NamedTuple):
    """The multiplication table of Cl(p, q, r) as parallel arrays of non-zero terms."""

    n: int
    i: np.ndarray
    j: np.ndarray
    k: np.ndarray
    coef: np.ndarray
    grade: np.ndarray  # grade of each blade


def _sort_sign(i: int, j: int, n: int) -> int:
    """(-1)^(pairs x in i, y in j with x > y): the swaps that sort e_i e_j."""
    swaps = sum(1 for x in range(n) for y in range(n) if (i >> x) & 1 and (j >> y) & 1 and x > y)
    return -1 if swaps % 2 else 1


@cache
def table(p: int, q: int = 0, r: int = 0) -> Table:
    """The non-zero products e_i e_j = coef e_k of Cl(p, q, r)."""
    n = p + q + r
    squares = [1] * p + [-1] * q + [0] * r
    rows = []
    for i in range(1 << n):
        for j in range(1 << n):
            metric = 1
            for v in range(n):
                if (i >> v) & 1 and (j >> v) & 1:
                    metric *= squares[v]
            if metric:
                rows.append((i, j, i ^ j, _sort_sign(i, j, n) * metric))
    i, j, k, coef = (np.array(c) for c in zip(*rows))
    grade = np.array([bin(b).count("1") for b in range(1 << n)])
    return Table(n, i, j, k, coef.astype(np.float64), grade)


def _bilinear(t: Table, a: np.ndarray, b: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sum of the kept terms, and the magnitude bound, for (N, 2ⁿ) batches (broadcasting)."""
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(b, dtype=np.float64))
    i, j, k, coef = t.i[keep], t.j[keep], t.k[keep], t.coef[keep]
    terms = a[:, i] * b[:, j] * coef  # (N, terms)
    rows = max(a.shape[0], b.shape[0])
    out = np.zeros((rows, 1 << t.n))
    bound = np.zeros((rows, 1 << t.n))
    np.add.at(out.T, k, terms.T)
    np.add.at(bound.T, k, np.abs(terms).T)
    return out, bound


def product(kind: str, sig: tuple[int, int, int], a: np.ndarray, b: np.ndarray):
    """(result, bound) of the product ``kind`` ("geometric", "outer", "inner", "scalar")."""
    t = table(*sig)
    gi, gj, gk = t.grade[t.i], t.grade[t.j], t.grade[t.k]
    keep = {
        "geometric": np.ones_like(gk, dtype=bool),
        "outer": gk == gi + gj,
        "inner": (gj >= gi) & (gk == gj - gi),
        "scalar": gk == 0,
    }[kind]
    out, bound = _bilinear(t, a, b, keep)
    if kind == "scalar":
        return out[:, 0], bound[:, 0]
    return out, bound


def reverse_signs(sig: tuple[int, int, int]) -> np.ndarray:
    """(-1)^(g(g-1)/2) per blade."""
    g = table(*sig).grade
    return np.where((g * (g - 1) // 2) % 2 == 0, 1.0, -1.0)


def involution_signs(sig: tuple[int, int, int]) -> np.ndarray:
    """(-1)^g per blade."""
    return np.where(table(*sig).grade % 2 == 0, 1.0, -1.0)


def projection(sig: tuple[int, int, int], x: np.ndarray, grades) -> np.ndarray:
    """The parts of the given grades, other coefficients 0."""
    keep = np.isin(table(*sig).grade, list(grades))
    return np.where(keep, np.asarray(x, dtype=np.float64), 0.0)


def sandwich(sig: tuple[int, int, int], r: np.ndarray, x: np.ndarray):
    """(r x r̃, bound): the bound sums |r_i x_j r_l| over every path to each coefficient."""
    rt = np.asarray(r, dtype=np.float64) * reverse_signs(sig)
    rx, rx_bound = product("geometric", sig, r, x)
    out, _ = product("geometric", sig, rx, rt)
    bound, _ = _abs_product(sig, rx_bound, np.abs(rt))
    return out, bound


def _abs_product(sig: tuple[int, int, int], a: np.ndarray, b: np.ndarray):
    t = table(*sig)
    abs_table = t._replace(coef=np.abs(t.coef))
    return _bilinear(abs_table, a, b, np.ones_like(t.k, dtype=bool))


def norm2(sig: tuple[int, int, int], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(⟨x x̃⟩₀, Σ of the absolute values of its terms) per row."""
    xt = np.atleast_2d(np.asarray(x, dtype=np.float64)) * reverse_signs(sig)
    return product("scalar", sig, x, xt)


def normalize(sig: tuple[int, int, int], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x / sqrt|⟨x x̃⟩₀| with null rows unchanged, per-row condition number).

    The condition number (Σ|terms of ⟨x x̃⟩₀|) / |⟨x x̃⟩₀| bounds how much the cancellation in
    the norm magnifies float32 rounding; it is 1 in Euclidean algebras and infinite for null
    rows, whose float32 norm may be rounding noise instead of 0.
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n2, terms = norm2(sig, x)
    null = n2 == 0
    scale = np.sqrt(np.abs(np.where(null, 1.0, n2)))
    out = np.where(null[:, None], x, x / scale[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        return out, np.where(null, np.inf, terms / np.abs(n2))


WELL_CONDITIONED = 1e4
"""Largest condition number of a row whose normalisation is compared with the reference: past
it, float32 rounding of ⟨x x̃⟩₀ (relative error ~1e-7 of the sum of its terms) may decide
whether the row is null at all."""


def assert_normalized(got: np.ndarray, sig: tuple[int, int, int], x: np.ndarray) -> None:
    """``got`` is ``x`` normalised, for the rows that are well-conditioned (see above); the
    error may be magnified by the condition number. A coefficient whose exact value rounds
    past float32's range (a large null part over a tiny norm) must be that infinity."""
    want, condition = normalize(sig, x)
    ok = condition <= WELL_CONDITIONED
    got, want = got[ok], want[ok]
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)
    past = np.isinf(want32)
    np.testing.assert_array_equal(got[past], want32[past], "past float32")
    got, want = np.where(past, 0, got), np.where(past, 0.0, want)
    bound = np.abs(want).max(axis=1, keepdims=True) * condition[ok, None]
    assert_close(got, want, bound * np.ones_like(want), f"normalize in Cl{sig}")


def dual(sig: tuple[int, int, int], x: np.ndarray) -> np.ndarray:
    """x I⁻¹ (I⁻¹ = I / (I I)) when r = 0; else the right complement, e_i ∧ dual(e_i) = I."""
    t = table(*sig)
    size = 1 << t.n
    full = size - 1
    basis = np.eye(size)
    if sig[2] == 0:
        i_sq, _ = product("scalar", sig, basis[full], basis[full])
        i_inv = basis[full] / i_sq[0]
        matrix = product("geometric", sig, basis, i_inv)[0]  # row b: e_b I⁻¹
    else:
        matrix = np.zeros((size, size))
        for b in range(size):
            wedge = product("outer", sig, basis[b], basis[full ^ b])[0][0]
            matrix[b, full ^ b] = wedge[full]  # sign making e_b ∧ dual(e_b) = +I
    return np.atleast_2d(np.asarray(x, dtype=np.float64)) @ matrix


def assert_close(got: np.ndarray, want: np.ndarray, bound: np.ndarray, what: str = "") -> None:
    """|got - want| <= REL_TOL * bound coefficient-wise, with the worst offender reported."""
    got = np.asarray(got)
    assert got.dtype == np.float32, got.dtype
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    err = np.abs(got.astype(np.float64) - want)
    limit = REL_TOL * np.asarray(bound) + 1e-30
    bad = err > limit
    if bad.any():
        at = np.unravel_index(np.argmax(err - limit), err.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} coefficients off; worst at {at}: got {got[at]!r}, "
            f"want {want[at]!r}, bound {np.asarray(bound)[at]!r}"
        )


def random_rows(n: int, width: int, seed: int) -> np.ndarray:
    """(n, width) float32 standard normal numbers."""
    return np.random.default_rng(seed).standard_normal((n, width), dtype=np.float32)
