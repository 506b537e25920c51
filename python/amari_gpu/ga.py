"""Geometric algebra: batches of multivectors of Cl(p, q, r) in bitmask blade order.

Blade ``i`` is the product of the basis vectors of the set bits of ``i``, in ascending order:
in Cl(3,0) the 8 blades are 1, e1, e2, e12, e3, e13, e23, e123. Each operation runs a kernel
generated from the algebra's multiplication table (fully unrolled, zero terms dropped) on
every healthy device of the context.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ._ga_base import _algebra, _operand, _rows
from ._validate import output, shape_text
from .algebra import Algebra
from .array import DeviceArray, is_resident, resident_ga
from .errors import ShapeError
from .ga_unary import UnaryOperationsMixin


class GeometricAlgebraMixin(UnaryOperationsMixin):
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
        rows = [_rows(names[0], a, lead), _rows(names[1], b, lead)]
        result = self._run(operation, alg, rows, 0, strategy, target)
        return result.reshape(shape) if target is None else target

    @overload
    def geometric_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]: ...
    @overload
    def geometric_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
    ) -> DeviceArray: ...
    @overload
    def geometric_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
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
        out: npt.NDArray[np.float32] | DeviceArray | None = None,
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
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]: ...
    @overload
    def outer_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
    ) -> DeviceArray: ...
    @overload
    def outer_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
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
        out: npt.NDArray[np.float32] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Outer (wedge) product ``a ∧ b``: of the blade products e_i e_j, those of disjoint
        blades (grade(i) + grade(j) = grade of the result)."""
        return self._product("outer_product", ("a", "b"), a, b, algebra, strategy, out)

    @overload
    def inner_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]: ...
    @overload
    def inner_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
    ) -> DeviceArray: ...
    @overload
    def inner_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
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
        out: npt.NDArray[np.float32] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Inner product as the LEFT CONTRACTION ``a ⌋ b``: of the blade products e_i e_j,
        those where e_i's vectors are all in e_j (grade(j) - grade(i) = grade of the result);
        0 when grade(i) > grade(j). Scalars contract to ``s ⌋ b = s b``."""
        return self._product("inner_product", ("a", "b"), a, b, algebra, strategy, out)

    @overload
    def scalar_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]: ...
    @overload
    def scalar_product(
        self,
        a: DeviceArray,
        b: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
    ) -> DeviceArray: ...
    @overload
    def scalar_product(
        self,
        a: Any,
        b: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
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
        out: npt.NDArray[np.float32] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Scalar product ``⟨a b⟩₀``, float32: the operands' broadcast leading shape, e.g.
        (N,), or () for two single multivectors."""
        return self._product("scalar_product", ("a", "b"), a, b, algebra, strategy, out)

    @overload
    def sandwich(
        self,
        r: Any,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]: ...
    @overload
    def sandwich(
        self,
        r: DeviceArray,
        x: Any,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
    ) -> DeviceArray: ...
    @overload
    def sandwich(
        self,
        r: Any,
        x: DeviceArray,
        algebra: Algebra | None = None,
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
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
        out: npt.NDArray[np.float32] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """``r x r̃`` (r̃ the reverse of r): applies the rotor (or versor) ``r`` to ``x``. The
        common case is one rotor of shape (2ⁿ,) applied to a batch ``x`` of shape (N, 2ⁿ).
        Computed as (r x) r̃, with no normalisation of ``r``."""
        return self._product("sandwich", ("r", "x"), r, x, algebra, strategy, out)
