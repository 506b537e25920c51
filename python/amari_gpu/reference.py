"""Float64 CPU references of the kernels, for checking GPU results (demo, doctor, benches)."""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt


def _reorder_sign(a: int, b: int) -> int:
    """Sign of moving the basis vectors of blade ``a`` past those of blade ``b``."""
    swaps = 0
    a >>= 1
    while a:
        swaps += bin(a & b).count("1")
        a >>= 1
    return -1 if swaps & 1 else 1


@cache
def cayley_tensor(p: int, q: int = 0, r: int = 0) -> npt.NDArray[np.float64]:
    """``T[i, j, k]`` with ``(x y)_k = sum T[i, j, k] x_i y_j`` in Cl(p, q, r), bitmask order."""
    n = p + q + r
    squares = [1.0] * p + [-1.0] * q + [0.0] * r
    size = 1 << n
    t = np.zeros((size, size, size))
    for i in range(size):
        for j in range(size):
            metric = 1.0
            for bit in range(n):
                if i & j & (1 << bit):
                    metric *= squares[bit]
            t[i, j, i ^ j] = _reorder_sign(i, j) * metric
    t.setflags(write=False)
    return t


def geometric_product(
    a: npt.ArrayLike, b: npt.ArrayLike, p: int = 3, q: int = 0, r: int = 0
) -> npt.NDArray[np.float64]:
    """Row-wise geometric product in float64."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    product = np.einsum("ni,nj,ijk->nk", a64, b64, cayley_tensor(p, q, r), optimize=True)
    return np.asarray(product, dtype=np.float64)
