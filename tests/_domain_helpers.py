"""float64 numpy references of the domain-decomposition rules, written independently of the
package: the heat equation by slicing (Dirichlet) or np.roll (periodic), Life by np.roll; and
the heat steps as the kernels round them, in float32 or float64 (``heat_bits``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np


def heat_reference(grid: Any, steps: int, alpha: float, boundary: str) -> np.ndarray:
    u = np.asarray(grid, dtype=np.float64).copy()
    for _ in range(steps):
        if boundary == "periodic":
            s = np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1)
            u = u + alpha * (s - 4.0 * u)
        else:
            inner = u[1:-1, 1:-1]
            nxt = u.copy()
            nxt[1:-1, 1:-1] = inner + alpha * (
                u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * inner
            )
            u = nxt
    return u


def life_reference(grid: Any, steps: int) -> np.ndarray:
    g = np.asarray(grid, dtype=np.int64)
    for _ in range(steps):
        n = sum(
            np.roll(np.roll(g, dr, 0), dc, 1)
            for dr in (-1, 0, 1)
            for dc in (-1, 0, 1)
            if (dr, dc) != (0, 0)
        )
        g = ((n == 3) | ((n == 2) & (g == 1))).astype(np.int64)
    return g.astype(np.uint8)


def heat_bits(
    grid: np.ndarray,
    steps: int,
    alpha: Any,
    boundary: str,
    fused: bool,
    dtype: type[np.floating[Any]] = np.float32,
) -> np.ndarray:
    """The heat steps as the kernels compute them in ``dtype`` (float32 or float64): ``s =
    (up + down) + (left + right)`` and ``s - 4u`` rounded to ``dtype``, then ``fma(alpha, s -
    4u, u)`` rounded once (``fused``: float32's product is exact in float64 and the sum is
    rounded to float32 from there; float64's is formed exactly in rationals and rounded
    correctly by Python's ``float(Fraction)``) or as a product then a sum in ``dtype``."""
    u = np.asarray(grid, dtype).copy()
    a = dtype(alpha)
    for _ in range(steps):
        if boundary == "periodic":
            up, down = np.roll(u, 1, 0), np.roll(u, -1, 0)
            left, right = np.roll(u, 1, 1), np.roll(u, -1, 1)
            at = u
        else:
            if u.shape[0] < 3 or u.shape[1] < 3:
                continue
            at = u[1:-1, 1:-1]
            up, down, left, right = u[:-2, 1:-1], u[2:, 1:-1], u[1:-1, :-2], u[1:-1, 2:]
        d = ((up + down) + (left + right)) - dtype(4) * at
        if not fused:
            new = (a * d) + at
        elif dtype == np.float32:
            new = (np.float64(a) * d.astype(np.float64) + at.astype(np.float64)).astype(np.float32)
        else:
            exact = Fraction(float(a))
            cells = zip(d.ravel().tolist(), at.ravel().tolist(), strict=True)
            new = np.array([float(exact * Fraction(x) + Fraction(y)) for x, y in cells])
            new = new.reshape(at.shape)
        if boundary == "periodic":
            u = new
        else:
            u = u.copy()
            u[1:-1, 1:-1] = new
    return u
