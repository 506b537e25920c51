"""float64 numpy references of the domain-decomposition rules, written independently of the
package: the heat equation by slicing (Dirichlet) or np.roll (periodic), Life by np.roll."""

from __future__ import annotations

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
