"""Geometric algebra: batches of multivectors of Cl(p, q, r) in bitmask blade order.

Blade ``i`` is the product of the basis vectors of the set bits of ``i``, in ascending order:
in Cl(3,0) the 8 blades are 1, e1, e2, e12, e3, e13, e23, e123. Each operation runs a kernel
generated from the algebra's multiplication table (fully unrolled, zero terms dropped) on
every healthy device of the context.
"""

from __future__ import annotations

import math
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ._mixin import KernelHost
from ._validate import output, real_array, shape_text
from .algebra import CL3, Algebra
from .array import DeviceArray, is_resident, resident_ga
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


def _rows(array: np.ndarray[Any, Any], lead: tuple[int, ...]) -> npt.NDArray[np.float32]:
    """``array`` as float32 rows for the core: one row when its batch has one multivector
    (the core applies it to every row of the other operand, uploaded once), else its rows
    broadcast to the leading shape ``lead`` (a copy only when broadcasting repeats rows)."""
    width = array.shape[-1]
    if math.prod(array.shape[:-1]) == 1:
        flat = array.reshape(1, width)
    elif array.shape[:-1] == lead:
        flat = array.reshape(-1, width)
    else:
        flat = np.broadcast_to(array, (*lead, width)).reshape(-1, width)
    return np.require(flat, dtype=np.float32, requirements=["C", "A"])


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
    records the plan it followed in ``ctx.last_plan``. Operands have shape (..., 2ⁿ): the
    last axis holds one multivector's coefficients and any leading axes are batch axes, as
    in a numpy gufunc. The leading shapes of a two-operand method broadcast against each
    other (numpy rules): a single multivector (2ⁿ,) is applied to every multivector of the
    other operand (uploaded once per device), (N, 2ⁿ) with (N, 2ⁿ) pairs rows, and
    (2, 1, 2ⁿ) with (3, 2ⁿ) gives (2, 3, 2ⁿ). Results have the broadcast leading shape
    followed by 2ⁿ (``scalar_product``: the leading shape alone). Inputs of any real dtype
    (float64 included) are converted to float32 (a copy; inputs are never modified);
    results are new float32 arrays, or ``out=``: a float32, C-contiguous, writeable array of
    exactly the result's shape that shares no memory with the operands, which the devices'
    results are written into and which is returned (the numpy ufunc convention). An operand
    that is a :class:`DeviceArray` (``ctx.asarray``) makes the call run where its rows live
    and return a DeviceArray; ``out=`` may then be a DeviceArray of the result's shape (the
    result replaces its shards; it is returned) or a numpy array (the result is gathered).
    """

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

    def _product(
        self,
        operation: str,
        names: tuple[str, str],
        left: Any,
        right: Any,
        algebra: Any,
        strategy: Any,
        out: Any,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        alg = _algebra(algebra)
        if is_resident(left, right):
            named = [(names[0], left), (names[1], right)]
            return resident_ga(self, operation, alg, named, 0, out)
        a = _operand(names[0], left, alg.n_blades)
        b = _operand(names[1], right, alg.n_blades)
        try:
            lead = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
        except ValueError:
            raise ShapeError(
                f"{names[1]}: expected leading dimensions that broadcast with {names[0]}'s "
                f"{shape_text(a.shape[:-1])}, got shape {shape_text(b.shape)}"
            ) from None
        shape = lead if operation == "scalar_product" else (*lead, alg.n_blades)
        target = output(out, shape, np.float32, {names[0]: left, names[1]: right})
        rows = [_rows(a, lead), _rows(b, lead)]
        result = self._run(operation, alg, rows, 0, strategy, target)
        return result.reshape(shape) if target is None else target

    def _unary(
        self, operation: str, x: Any, alg: Algebra, strategy: Any, out: Any, grades: int = 0
    ) -> npt.NDArray[np.float32] | DeviceArray:
        if isinstance(x, DeviceArray):
            return resident_ga(self, operation, alg, [("x", x)], grades, out)
        x2 = _operand("x", x, alg.n_blades)
        lead = x2.shape[:-1]
        target = output(out, x2.shape, np.float32, {"x": x})
        result = self._run(operation, alg, [_rows(x2, lead)], grades, strategy, target)
        return result.reshape(x2.shape) if target is None else target

    @overload
    def geometric_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def geometric_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def geometric_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def geometric_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Geometric product ``a b`` row by row, Cl(3,0) unless ``algebra`` says otherwise.

        In Cl(3,0), rows are 8 coefficients of 1, e1, e2, e12, e3, e13, e23, e123 (bitmask
        order): ``(N, 8)`` times ``(N, 8)``, ``(8,)`` or the other way round gives ``(N, 8)``;
        leading batch axes broadcast like numpy's (``(2, 4, 8)`` times ``(4, 8)`` gives
        ``(2, 4, 8)``). Returns float32 whatever the input dtype.
        """
        return self._product("geometric_product", ("a", "b"), a, b, algebra, strategy, out)

    @overload
    def outer_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def outer_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def outer_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def outer_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Outer (wedge) product ``a ∧ b``: of the blade products e_i e_j, those of disjoint
        blades (grade(i) + grade(j) = grade of the result)."""
        return self._product("outer_product", ("a", "b"), a, b, algebra, strategy, out)

    @overload
    def inner_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def inner_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def inner_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def inner_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Inner product as the LEFT CONTRACTION ``a ⌋ b``: of the blade products e_i e_j,
        those where e_i's vectors are all in e_j (grade(j) - grade(i) = grade of the result);
        0 when grade(i) > grade(j). Scalars contract to ``s ⌋ b = s b``."""
        return self._product("inner_product", ("a", "b"), a, b, algebra, strategy, out)

    @overload
    def scalar_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def scalar_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def scalar_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def scalar_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Scalar product ``⟨a b⟩₀``, float32: the operands' broadcast leading shape, e.g.
        (N,), or () for two single multivectors."""
        return self._product("scalar_product", ("a", "b"), a, b, algebra, strategy, out)

    @overload
    def sandwich(
        self,
        r: DeviceArray,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def sandwich(
        self,
        r: Any,
        x: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def sandwich(
        self,
        r: Any,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def sandwich(
        self,
        r: Any,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """``r x r̃`` (r̃ the reverse of r): applies the rotor (or versor) ``r`` to ``x``. The
        common case is one rotor of shape (2ⁿ,) applied to a batch ``x`` of shape (N, 2ⁿ).
        Computed as (r x) r̃, with no normalisation of ``r``."""
        return self._product("sandwich", ("r", "x"), r, x, algebra, strategy, out)

    @overload
    def reverse(
        self,
        x: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def reverse(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def reverse(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Reverse ``x̃``: grade-g parts times (-1)^(g(g-1)/2)."""
        return self._unary("reverse", x, _algebra(algebra), strategy, out)

    @overload
    def grade_involution(
        self,
        x: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def grade_involution(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def grade_involution(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Grade involution ``x̂``: grade-g parts times (-1)^g."""
        return self._unary("grade_involution", x, _algebra(algebra), strategy, out)

    @overload
    def grade_projection(
        self,
        x: DeviceArray,
        k: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def grade_projection(
        self,
        x: Any,
        k: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def grade_projection(
        self,
        x: Any,
        k: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """``⟨x⟩_k``: the grade-``k`` part of ``x`` (other coefficients 0). ``k`` is a grade
        in 0..n or a sequence of grades, whose parts are summed."""
        alg = _algebra(algebra)
        return self._unary("grade_projection", x, alg, strategy, out, _grade_mask(k, alg))

    @overload
    def normalize(
        self,
        x: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def normalize(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def normalize(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """``x / sqrt(|⟨x x̃⟩₀|)`` row by row, computed on x scaled exactly by a power of two
        near 1 / max|x_i|, so that large and small rows neither overflow nor underflow.
        Rows whose ``⟨x x̃⟩₀`` is 0 in float32 (zero rows, and null ones such as ideal
        elements of PGA or null vectors of CGA) are returned unchanged. NaN and ±inf follow
        IEEE arithmetic: a NaN spreads over its row; an infinite entry becomes NaN and the
        other entries of its row 0. In indefinite metrics a row close to null is
        ill-conditioned: float32 rounding of ``⟨x x̃⟩₀`` may decide whether it is null."""
        return self._unary("normalize", x, _algebra(algebra), strategy, out)

    @overload
    def dual(
        self,
        x: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> DeviceArray: ...
    @overload
    def dual(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32]: ...
    def dual(
        self,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Dual of ``x``. Non-degenerate algebras (r = 0): ``x I⁻¹``, with I the pseudoscalar
        e1...en (in Cl(3,0), ``dual(e1) = -e23``). Degenerate algebras (r > 0), where I has
        no inverse: the right complement, the linear map with ``e_i ∧ dual(e_i) = I`` for
        every blade (in Cl(3,0,1), ``dual(e1) = e234``, ``dual(1) = I``)."""
        return self._unary("dual", x, _algebra(algebra), strategy, out)
