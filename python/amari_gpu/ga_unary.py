"""Geometric algebra: the one-operand maps (reverse, grade involution and projection,
normalize, dual), each a kernel over rows of multivectors; conventions (dtypes included) as
in :class:`amari_gpu.ga.GeometricAlgebraMixin`."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _shapes
from ._ga_base import GaBase, _algebra, _grade_mask
from .algebra import Algebra
from .array import DeviceArray


class UnaryOperationsMixin(GaBase):
    """One-operand geometric-algebra methods of ``MultiGpuContext``."""

    @_shapes.shaped[_shapes.GaUnary]
    def reverse(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Reverse ``x̃``: grade-g parts times (-1)^(g(g-1)/2)."""
        return self._unary("reverse", x, _algebra(algebra), (strategy, out, dtype))

    @_shapes.shaped[_shapes.GaUnary]
    def grade_involution(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Grade involution ``x̂``: grade-g parts times (-1)^g."""
        return self._unary("grade_involution", x, _algebra(algebra), (strategy, out, dtype))

    @_shapes.shaped[_shapes.GaGrades]
    def grade_projection(
        self,
        x: Any,
        k: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """``⟨x⟩_k``: the grade-``k`` part of ``x`` (other coefficients 0). ``k`` is a grade
        in 0..n or a sequence of grades, whose parts are summed."""
        alg = _algebra(algebra)
        return self._unary("grade_projection", x, alg, (strategy, out, dtype), _grade_mask(k, alg))

    @_shapes.shaped[_shapes.GaUnary]
    def normalize(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """``x / sqrt(|⟨x x̃⟩₀|)`` row by row, computed on x scaled exactly by a power of two
        near 1 / max|x_i|, so that large and small rows neither overflow nor underflow.
        Computes in float32 and float64 (float64 by the float32 kernel's steps, on the host
        and ``SHADER_F64`` devices) and in float16 storage (on the host and ``SHADER_F16``
        devices: the float32 kernel on the widened rows, each result rounded once to float16).
        Rows whose ``⟨x x̃⟩₀`` is 0 in the dtype (zero rows, and null ones such as ideal
        elements of PGA or null vectors of CGA) are returned unchanged. NaN and ±inf follow
        IEEE arithmetic: a NaN spreads over its row; an infinite entry becomes NaN and the
        other entries of its row 0. In indefinite metrics a row close to null is
        ill-conditioned: rounding of ``⟨x x̃⟩₀`` may decide whether it is null."""
        return self._unary("normalize", x, _algebra(algebra), (strategy, out, dtype))

    @_shapes.shaped[_shapes.GaUnary]
    def dual(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Dual of ``x``. Non-degenerate algebras (r = 0): ``x I⁻¹``, with I the pseudoscalar
        e1...en (in Cl(3,0), ``dual(e1) = -e23``). Degenerate algebras (r > 0), where I has
        no inverse: the right complement, the linear map with ``e_i ∧ dual(e_i) = I`` for
        every blade (in Cl(3,0,1), ``dual(e1) = e234``, ``dual(1) = I``)."""
        return self._unary("dual", x, _algebra(algebra), (strategy, out, dtype))
