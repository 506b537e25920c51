"""Independent float64 reference of the Cl(3,0) geometric product, and test-data helpers.

Written from the definition: blade i is the product of the basis vectors given by the set bits
of i (bitmask order 1, e1, e2, e12, e3, e13, e23, e123); blade_i * blade_j = sign * blade_(i^j),
where the sign counts the swaps of anticommuting vectors needed to sort the concatenation, and
every basis vector squares to +1. It deliberately does not use ``amari_gpu.reference``, so the
tests cannot share a mistake with the package.
"""

from __future__ import annotations

import numpy as np

BLADES = 8
"""Number of blades of Cl(3,0): 1, e1, e2, e12, e3, e13, e23, e123 (bitmask order)."""

REL_TOL = 1e-5
"""Largest accepted error relative to max(|reference row|, 1e-3)."""


def _swap_sign(i: int, j: int) -> float:
    """Sign of reordering the basis vectors of blade ``i`` followed by blade ``j``.

    Every pair (x in i, y in j) with x > y needs one swap of adjacent anticommuting vectors
    to reach canonical (ascending) order.
    """
    swaps = sum(1 for x in range(3) for y in range(3) if (i >> x) & 1 and (j >> y) & 1 and x > y)
    return -1.0 if swaps % 2 else 1.0


PRODUCT_TABLE: tuple[tuple[int, int, int, float], ...] = tuple(
    (i, j, i ^ j, _swap_sign(i, j)) for i in range(BLADES) for j in range(BLADES)
)
"""(i, j, k, sign) with blade_i * blade_j = sign * blade_k; metric +1, so no other factor."""


def reference_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Cl(3,0) geometric product of (N, 8) batches, computed in float64."""
    at = np.array(a, dtype=np.float64).T.copy()  # (8, N), one contiguous row per blade
    bt = np.array(b, dtype=np.float64).T.copy()
    out = np.zeros_like(at)
    for i, j, k, sign in PRODUCT_TABLE:
        if sign > 0:
            out[k] += at[i] * bt[j]
        else:
            out[k] -= at[i] * bt[j]
    return out.T


def magnitude_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per output, the sum of |a_i b_j| over the terms that feed it (float64, (N, 8)).

    A float32 evaluation of the 8-term sums is off by at most a small multiple of float32's
    epsilon times this, whatever the cancellation between the terms.
    """
    at = np.abs(np.array(a, dtype=np.float64)).T.copy()
    bt = np.abs(np.array(b, dtype=np.float64)).T.copy()
    out = np.zeros_like(at)
    for i, j, k, _ in PRODUCT_TABLE:
        out[k] += at[i] * bt[j]
    return out.T


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """Max over rows of |got - want| / max(|want row|, 1e-3); 0.0 for empty batches."""
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.size == 0:
        return 0.0
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-3)
    return float((np.abs(got.astype(np.float64) - want) / scale).max())


def random_batch(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two float32 (n, 8) batches of standard normal numbers."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, BLADES), dtype=np.float32)
    b = rng.standard_normal((n, BLADES), dtype=np.float32)
    return a, b
