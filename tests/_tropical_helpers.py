"""Independent references for the tropical tests, written from the definitions with numpy.

Products are evaluated in float32, like the kernels: a max (or min) of float32 sums is exact,
so the GPU result must be bit-equal to these (``np.array_equal``, infinities included). The
tropical zero is absorbing: a term ``-inf + inf`` (NaN in IEEE arithmetic) is the zero of the
semiring, -inf in max-plus and +inf in min-plus. Shortest paths are checked against a plain
Floyd-Warshall in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

ZERO = {"max_plus": -np.inf, "min_plus": np.inf}
"""Tropical zero of each semiring."""

SEMIRINGS = ["max_plus", "min_plus"]


def random_cases(
    examples: int, infs: Sequence[float], **dims: st.SearchStrategy[int]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Hypothesis cases of a product test: the sizes ``dims``, a semiring, a share of
    infinite entries from ``infs`` and an RNG seed."""

    def decorate(test: Callable[..., Any]) -> Callable[..., Any]:
        cases = given(
            **dims,
            semiring=st.sampled_from(SEMIRINGS),
            inf=st.sampled_from(list(infs)),
            seed=st.integers(0, 2**32 - 1),
        )
        return settings(max_examples=examples, deadline=None)(cases(test))

    return decorate


def batched_products(
    batches: int, rows: int, inner: tuple[int, int], cols: int
) -> dict[str, st.SearchStrategy[Any]]:
    """Hypothesis arguments of a batched product (``batch`` x ``m`` x ``k`` by ``k`` x ``n``,
    ``k`` within ``inner``) and its semiring, for ``given(**...)``."""
    return {
        "batch": st.integers(1, batches),
        "m": st.integers(1, rows),
        "k": st.integers(*inner),
        "n": st.integers(1, cols),
        "semiring": st.sampled_from(SEMIRINGS),
    }


def reference_matmul64(a: np.ndarray, b: np.ndarray, semiring: str) -> np.ndarray:
    """``a ⊗ b`` by the kernels' rule in float64: terms k in order, a NaN term (-inf + inf,
    the tropical zero meeting the other infinity) never taken, a tie keeping the earlier
    term."""
    sign = 1.0 if semiring == "max_plus" else -1.0
    with np.errstate(invalid="ignore", over="ignore"):
        terms = sign * a[..., :, :, None] + sign * b[..., None, :, :]
    acc = np.full(terms.shape[:-2] + terms.shape[-1:], -np.inf)
    for k in range(terms.shape[-2]):
        t = terms[..., k, :]
        acc = np.where(t > acc, t, acc)
    return sign * acc


def reference_matmul(a: np.ndarray, b: np.ndarray, semiring: str) -> np.ndarray:
    """``a ⊗ b`` for (..., m, k) and (..., k, n) float32 arrays, in float32."""
    a32 = np.asarray(a, dtype=np.float32)
    b32 = np.asarray(b, dtype=np.float32)
    zero = np.float32(ZERO[semiring])
    shape = (*a32.shape[:-1], b32.shape[-1])
    if a32.shape[-1] == 0:
        return np.full(shape, zero, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        terms = a32[..., :, :, None] + b32[..., None, :, :]
    terms = np.where(np.isnan(terms), zero, terms)
    reduce = np.max if semiring == "max_plus" else np.min
    out = reduce(terms, axis=-2)
    assert out.dtype == np.float32 and out.shape == shape
    return out


def reference_matvec(a: np.ndarray, x: np.ndarray, semiring: str) -> np.ndarray:
    """``a ⊗ x`` for (..., m, k) and (..., k) float32 arrays, in float32."""
    return reference_matmul(a, np.asarray(x)[..., None], semiring)[..., 0]


def floyd_warshall(w: np.ndarray) -> np.ndarray:
    """Shortest path lengths in float64; the diagonal starts at min(w[i, i], 0)."""
    d = np.array(w, dtype=np.float64)
    n = d.shape[0]
    np.fill_diagonal(d, np.minimum(np.diagonal(d), 0.0))
    for k in range(n):
        d = np.minimum(d, d[:, k : k + 1] + d[k : k + 1, :])
    return d


def sprinkle(
    rng: np.random.Generator, array: np.ndarray, fraction: float, values: tuple[float, ...]
) -> np.ndarray:
    """A copy of ``array`` with about ``fraction`` of its entries set to one of ``values``."""
    out = array.copy()
    mask = rng.random(out.shape) < fraction
    out[mask] = rng.choice(np.array(values, dtype=out.dtype), size=int(mask.sum()))
    return out


def random_operand(rng: np.random.Generator, shape: tuple[int, ...], inf: float) -> np.ndarray:
    """float32 values in [-100, 100) (on a 1/8 grid, so ties happen) with ±inf sprinkled."""
    base = (rng.integers(-800, 800, size=shape) / 8.0).astype(np.float32)
    return sprinkle(rng, base, inf, (-np.inf, np.inf))


def graph_without_negative_cycles(
    rng: np.random.Generator, n: int, density: float, integer: bool
) -> np.ndarray:
    """A dense (n, n) float32 weight matrix with inf for missing edges and negative edges.

    Weights are w(u, v) = c(u, v) + p(u) - p(v) with c >= 0: every cycle keeps its weight
    c >= 0, so there is no negative cycle, while many single edges are negative. The last
    vertex has no in-edges (unreachable from the others). With ``integer`` the weights are
    small integers, so every path sum is exact in float32.
    """
    if integer:
        cost = rng.integers(0, 20, size=(n, n)).astype(np.float64)
        potential = rng.integers(-15, 15, size=n).astype(np.float64)
    else:
        cost = rng.uniform(0.5, 10.0, size=(n, n))
        potential = rng.uniform(-5.0, 5.0, size=n)
    w = cost + potential[:, None] - potential[None, :]
    w[rng.random((n, n)) >= density] = np.inf
    if n > 1:
        w[:, n - 1] = np.inf
    np.fill_diagonal(w, np.where(rng.random(n) < 0.3, np.abs(w.diagonal()) + 1.0, np.inf))
    return w.astype(np.float32)
