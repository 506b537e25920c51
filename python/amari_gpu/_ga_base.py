"""Geometric algebra, what every operation shares: argument conversion (algebra, operands
as rows, grades) and the run of one operation on numpy rows or on DeviceArrays. The
operations themselves are in :mod:`amari_gpu.ga` (products) and :mod:`amari_gpu.ga_unary`
(one-operand maps)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ._mixin import KernelHost
from ._validate import as_float32, output, real_array, shape_text
from .algebra import CL3, Algebra
from .array import DeviceArray, resident_ga
from .errors import InvalidArgumentError, ShapeError
from .planning import optional_strategy


def _algebra(value: Any) -> Algebra:
    if value is None:
        return CL3
    if not isinstance(value, Algebra):
        raise InvalidArgumentError(
            f"algebra: expected an amari_gpu.Algebra or None, got {type(value).__name__}"
        )
    return value


def _operand(name: str, value: Any, width: int) -> np.ndarray[Any, Any]:
    """``value`` as a real array of shape (..., ``width``): any leading batch dimensions,
    like the core dimension of a numpy gufunc."""
    array = real_array(name, value)
    if array.ndim == 0 or array.shape[-1] != width:
        raise ShapeError(f"{name}: expected shape (..., {width}), got {shape_text(array.shape)}")
    return array


def _rows(name: str, array: np.ndarray[Any, Any], lead: tuple[int, ...]) -> npt.NDArray[np.float32]:
    """``array`` as float32 rows for the core: one row when its batch has one multivector
    (the core applies it to every row of the other operand, uploaded once), else its rows
    broadcast to the leading shape ``lead`` (a copy only when broadcasting repeats rows).
    Converted to float32 before broadcasting, so a repeated copy is of float32 rows."""
    width = array.shape[-1]
    array32 = as_float32(name, array)
    if math.prod(array.shape[:-1]) == 1:
        return array32.reshape(1, width)
    if array.shape[:-1] == lead:
        return array32.reshape(-1, width)
    return as_float32(name, np.broadcast_to(array32, (*lead, width))).reshape(-1, width)


def _grade_mask(k: Any, algebra: Algebra) -> int:
    n = algebra.dimension
    single = isinstance(k, (int, np.integer)) and not isinstance(k, bool)
    try:
        grades = [k] if single else list(k)
    except TypeError:
        raise InvalidArgumentError(
            f"k: expected a grade in 0..{n} or a sequence of them, got {k!r}"
        ) from None
    if not grades:
        raise InvalidArgumentError(f"k: expected at least one grade in 0..{n}, got none")
    mask = 0
    for g in grades:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or not 0 <= g <= n:
            raise InvalidArgumentError(f"k: expected grades in 0..{n} for {algebra}, got {g!r}")
        mask |= 1 << int(g)
    return mask


class GaBase(KernelHost):
    """The run of one geometric-algebra operation (see :class:`amari_gpu.ga.GeometricAlgebraMixin`
    for the conventions every operation follows)."""

    def _run(
        self,
        operation: str,
        algebra: Algebra,
        operands: list[Any],
        grades: int,
        strategy: Any,
        target: np.ndarray[Any, Any] | None,
    ) -> npt.NDArray[np.float32]:
        words = 1 if operation == "scalar_product" else algebra.n_blades
        # A C-contiguous array reshapes to the core's (rows, words) as a view of itself.
        flat = None if target is None else target.reshape(-1, words)
        result, plan = self._kernels.ga_apply(
            self._native,
            operation,
            algebra.signature,
            operands,
            grades,
            optional_strategy(strategy),
            flat,
        )
        self._record(plan)
        return result

    def _unary(
        self, operation: str, x: Any, alg: Algebra, strategy: Any, out: Any, grades: int = 0
    ) -> npt.NDArray[np.float32] | DeviceArray:
        if isinstance(x, DeviceArray):
            return resident_ga(self, operation, alg, [("x", x)], grades, out)
        x2 = _operand("x", x, alg.n_blades)
        lead = x2.shape[:-1]
        target = output(out, x2.shape, np.float32, {"x": x})
        result = self._run(operation, alg, [_rows("x", x2, lead)], grades, strategy, target)
        return result.reshape(x2.shape) if target is None else target
