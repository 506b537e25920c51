"""Geometric algebra: batches of multivectors of Cl(p, q, r) in bitmask blade order.

Blade ``i`` is the product of the basis vectors of the set bits of ``i``, in ascending order:
in Cl(3,0) the 8 blades are 1, e1, e2, e12, e3, e13, e23, e123. Each operation runs a kernel
generated from the algebra's multiplication table (fully unrolled, zero terms dropped) on
every healthy device of the context.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _native
from ._mixin import KernelHost
from ._validate import real_array, shape_text
from .algebra import CL3, Algebra
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


def _operand(
    name: str, value: Any, width: int, rows: int | None
) -> tuple[npt.NDArray[np.float32], bool]:
    """``value`` as a float32 (N, width) batch, and whether it was one (width,) multivector
    (returned as one row). ``rows`` pins N to the other operand's."""
    array = real_array(name, value)
    if array.ndim == 1 and array.shape[0] == width:
        return np.ascontiguousarray(array.reshape(1, width), dtype=np.float32), True
    if array.ndim == 2 and array.shape[1] == width and rows in (None, array.shape[0]):
        return np.ascontiguousarray(array, dtype=np.float32), False
    expected = "N" if rows is None else str(rows)
    raise ShapeError(
        f"{name}: expected shape ({expected}, {width}) or ({width},), got {shape_text(array.shape)}"
    )


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


class GeometricAlgebraMixin(KernelHost):
    """Geometric-algebra methods of ``MultiGpuContext``.

    Every method takes ``algebra=`` (an :class:`Algebra`; ``None`` means Cl(3,0)) and
    ``strategy=`` (how the rows are split over the devices; default: the context's), and
    records the plan it followed in ``ctx.last_plan``. Operands are batches of shape
    (N, 2ⁿ) or single multivectors of shape (2ⁿ,). A single operand of a two-operand method
    is applied to every row of the other (uploaded once per device); two single operands
    give a single result. Inputs of any real dtype are converted to float32 (a copy; inputs
    are never modified); results are new float32 arrays.
    """

    def _run(
        self, operation: str, algebra: Algebra, operands: list[Any], grades: int, strategy: Any
    ) -> npt.NDArray[np.float32]:
        out, plan = _native.ga_apply(
            self._native,
            operation,
            algebra.signature,
            operands,
            grades,
            optional_strategy(strategy),
        )
        self._record(plan)
        return out

    def _product(
        self,
        operation: str,
        names: tuple[str, str],
        left: Any,
        right: Any,
        algebra: Any,
        strategy: Any,
    ) -> npt.NDArray[np.float32]:
        alg = _algebra(algebra)
        a, a_single = _operand(names[0], left, alg.n_blades, None)
        b, b_single = _operand(names[1], right, alg.n_blades, None if a_single else a.shape[0])
        out = self._run(operation, alg, [a, b], 0, strategy)
        if operation == "scalar_product":
            return out.reshape(()) if a_single and b_single else out.reshape(-1)
        return out.reshape(-1) if a_single and b_single else out

    def _unary(
        self, operation: str, x: Any, alg: Algebra, strategy: Any, grades: int = 0
    ) -> npt.NDArray[np.float32]:
        x2, single = _operand("x", x, alg.n_blades, None)
        out = self._run(operation, alg, [x2], grades, strategy)
        return out.reshape(-1) if single else out

    def geometric_product(
        self, a: Any, b: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Geometric product ``a b`` row by row, Cl(3,0) unless ``algebra`` says otherwise.

        In Cl(3,0), rows are 8 coefficients of 1, e1, e2, e12, e3, e13, e23, e123 (bitmask
        order): ``(N, 8)`` times ``(N, 8)``, ``(8,)`` or the other way round gives ``(N, 8)``.
        """
        return self._product("geometric_product", ("a", "b"), a, b, algebra, strategy)

    def outer_product(
        self, a: Any, b: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Outer (wedge) product ``a ∧ b``: of the blade products e_i e_j, those of disjoint
        blades (grade(i) + grade(j) = grade of the result)."""
        return self._product("outer_product", ("a", "b"), a, b, algebra, strategy)

    def inner_product(
        self, a: Any, b: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Inner product as the LEFT CONTRACTION ``a ⌋ b``: of the blade products e_i e_j,
        those where e_i's vectors are all in e_j (grade(j) - grade(i) = grade of the result);
        0 when grade(i) > grade(j). Scalars contract to ``s ⌋ b = s b``."""
        return self._product("inner_product", ("a", "b"), a, b, algebra, strategy)

    def scalar_product(
        self, a: Any, b: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Scalar product ``⟨a b⟩₀``: shape (N,), or () for two single multivectors."""
        return self._product("scalar_product", ("a", "b"), a, b, algebra, strategy)

    def sandwich(
        self, r: Any, x: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """``r x r̃`` (r̃ the reverse of r): applies the rotor (or versor) ``r`` to ``x``. The
        common case is one rotor of shape (2ⁿ,) applied to a batch ``x`` of shape (N, 2ⁿ).
        Computed as (r x) r̃, with no normalisation of ``r``."""
        return self._product("sandwich", ("r", "x"), r, x, algebra, strategy)

    def reverse(
        self, x: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Reverse ``x̃``: grade-g parts times (-1)^(g(g-1)/2)."""
        return self._unary("reverse", x, _algebra(algebra), strategy)

    def grade_involution(
        self, x: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Grade involution ``x̂``: grade-g parts times (-1)^g."""
        return self._unary("grade_involution", x, _algebra(algebra), strategy)

    def grade_projection(
        self, x: Any, k: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """``⟨x⟩_k``: the grade-``k`` part of ``x`` (other coefficients 0). ``k`` is a grade
        in 0..n or a sequence of grades, whose parts are summed."""
        alg = _algebra(algebra)
        return self._unary("grade_projection", x, alg, strategy, _grade_mask(k, alg))

    def normalize(
        self, x: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """``x / sqrt(|⟨x x̃⟩₀|)`` row by row, computed on x scaled exactly by a power of two
        near 1 / max|x_i|, so that large and small rows neither overflow nor underflow.
        Rows whose ``⟨x x̃⟩₀`` is 0 in float32 (zero rows, and null ones such as ideal
        elements of PGA or null vectors of CGA) are returned unchanged. NaN and ±inf follow
        IEEE arithmetic: a NaN spreads over its row; an infinite entry becomes NaN and the
        other entries of its row 0. In indefinite metrics a row close to null is
        ill-conditioned: float32 rounding of ``⟨x x̃⟩₀`` may decide whether it is null."""
        return self._unary("normalize", x, _algebra(algebra), strategy)

    def dual(
        self, x: Any, algebra: Algebra | None = None, *, strategy: str | None = None
    ) -> npt.NDArray[np.float32]:
        """Dual of ``x``. Non-degenerate algebras (r = 0): ``x I⁻¹``, with I the pseudoscalar
        e1...en (in Cl(3,0), ``dual(e1) = -e23``). Degenerate algebras (r > 0), where I has
        no inverse: the right complement, the linear map with ``e_i ∧ dual(e_i) = I`` for
        every blade (in Cl(3,0,1), ``dual(e1) = e234``, ``dual(1) = I``)."""
        return self._unary("dual", x, _algebra(algebra), strategy)
