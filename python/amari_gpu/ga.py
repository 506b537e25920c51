"""Geometric algebra: batches of multivectors in bitmask blade order."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _native
from ._mixin import KernelHost
from ._validate import batch
from .planning import optional_strategy


class GeometricAlgebraMixin(KernelHost):
    """Geometric-algebra methods of ``MultiGpuContext``."""

    def geometric_product(
        self, a: Any, b: Any, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Geometric product ``a[i] b[i]`` in Cl(3,0) for batches of shape (N, 8).

        Blades are in bitmask order: index i is the blade whose basis vectors are the set
        bits of i: 1, e1, e2, e12, e3, e13, e23, e123. Inputs of any real dtype are converted
        to float32 (a copy; inputs are never modified); the result is a new float32 (N, 8)
        array. Runs on every healthy device of the context, split by ``strategy`` (default:
        the context's); ``ctx.last_plan`` holds the plan the call followed.
        """
        a32 = batch("a", a, 8)
        b32 = batch("b", b, 8, rows=a32.shape[0])
        out, plan = _native.geometric_product(self._native, a32, b32, optional_strategy(strategy))
        self._record(plan)
        return out
