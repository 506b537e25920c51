"""Geometric algebra: batches of multivectors of Cl(p, q, r) in bitmask blade order.

Blade ``i`` is the product of the basis vectors of the set bits of ``i``, in ascending order:
in Cl(3,0) the 8 blades are 1, e1, e2, e12, e3, e13, e23, e123. Each operation runs a kernel
generated from the algebra's multiplication table (fully unrolled, zero terms dropped) on
every healthy device of the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _shapes
from ._ga_base import _algebra, _blade_list
from .algebra import Algebra
from .array import DeviceArray
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
    followed by 2ⁿ (``scalar_product``: the leading shape alone).

    Dtypes are kept as numpy keeps them: float32 in, float32 out; float64 in, float64 out (computed
    in float64 on the devices that run it: the host device and adapters with wgpu's ``SHADER_F64``,
    such as lavapipe); mixed operands promote as ``np.result_type`` does (float32 with float64 gives
    float64); bool and integer operands compute in float64; float16 in, float16 out (stored as
    float16 on the devices with wgpu's ``SHADER_F16``, such as lavapipe, and on the host device;
    computed by the float32 kernel's chains and rounded once to float16; ``scalar_product``'s one
    value per row is computed by the float32 kernel on the widened operands, on every device, and
    rounded once to float16 on the host). ``dtype=`` overrides, e.g.
    ``dtype=np.float32`` to compute float64 inputs in float32 or ``dtype=np.float16`` float32 ones
    in float16 storage. Complex, object and other dtypes raise ``TypeError``. A call in float64
    or float16 on a context none of whose devices runs it raises ``InvalidArgumentError`` naming
    every device and what it lacks. Inputs are never modified
    (a converted copy is made when needed); results are new arrays, or ``out=``: an array of the
    result's dtype, C-contiguous, writeable, of exactly the result's shape and sharing no memory
    with the operands, which the devices' results are written into and which is returned (the numpy
    ufunc convention). An operand that is a :class:`DeviceArray` (``ctx.asarray``, float32) makes
    the call run where its rows live, in float32, and return a DeviceArray; ``out=`` may then be a
    DeviceArray of the result's shape (the result replaces its shards; it is returned) or a float32
    numpy array (the result is gathered)."""

    def _product(
        self,
        operation: str,
        names: tuple[str, str],
        left: Any,
        right: Any,
        algebra: Any,
        options: tuple[Any, Any, Any],
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """A product; ``options``: the call's ``strategy``, ``out`` and ``dtype``."""
        strategy, out, dtype = options
        named = [(names[0], left), (names[1], right)]
        return self._apply(operation, _algebra(algebra), named, 0, strategy, out, dtype)

    @_shapes.shaped[_shapes.GaBinary]
    def geometric_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Geometric product ``a b`` row by row, Cl(3,0) unless ``algebra`` says otherwise.

        In Cl(3,0), rows are 8 coefficients of 1, e1, e2, e12, e3, e13, e23, e123 (bitmask
        order): ``(N, 8)`` times ``(N, 8)``, ``(8,)`` or the other way round gives ``(N, 8)``;
        leading batch axes broadcast like numpy's (``(2, 4, 8)`` times ``(4, 8)`` gives
        ``(2, 4, 8)``). Returns the operands' dtype (float32 or float64, see the class).
        """
        return self._product("geometric_product", ("a", "b"), a, b, algebra, (strategy, out, dtype))

    @_shapes.shaped[_shapes.GaBinary]
    def outer_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Outer (wedge) product ``a ∧ b``: of the blade products e_i e_j, those of disjoint
        blades (grade(i) + grade(j) = grade of the result)."""
        return self._product("outer_product", ("a", "b"), a, b, algebra, (strategy, out, dtype))

    @_shapes.shaped[_shapes.GaBinary]
    def inner_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Inner product as the LEFT CONTRACTION ``a ⌋ b``: of the blade products e_i e_j,
        those where e_i's vectors are all in e_j (grade(j) - grade(i) = grade of the result);
        0 when grade(i) > grade(j). Scalars contract to ``s ⌋ b = s b``."""
        return self._product("inner_product", ("a", "b"), a, b, algebra, (strategy, out, dtype))

    @_shapes.shaped[_shapes.GaBinary]
    def scalar_product(
        self,
        a: Any,
        b: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Scalar product ``⟨a b⟩₀``: the operands' broadcast leading shape, e.g. (N,), or ()
        for two single multivectors; float16, float32 or float64 as the class says (float16:
        the float32 product of the operands' float16 values rounded once, past 65504 to
        infinity; DeviceArray operands in float32 or float64 only, a float16 DeviceArray
        of one value per row being a layout DeviceArrays do not hold)."""
        return self._product("scalar_product", ("a", "b"), a, b, algebra, (strategy, out, dtype))

    @_shapes.shaped[_shapes.GaSandwich]
    def sandwich(
        self,
        r: Any,
        x: Any,
        algebra: Algebra | None = None,
        *,
        dtype: npt.DTypeLike | None = None,
        blades: Sequence[int] | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """``r x r̃`` (r̃ the reverse of r): applies the rotor (or versor) ``r`` to ``x``. The
        common case is one rotor of shape (2ⁿ,) applied to a batch ``x`` of shape (N, 2ⁿ).
        Computed as (r x) r̃, with no normalisation of ``r``.

        ``blades=``: distinct blade indices (bitmask order) that ``x``'s rows hold, e.g.
        ``(7, 11, 13, 14)`` for the points (grade 3) of Cl(3,0,1): ``x`` is then (N, k) (or
        (k,)), column ``j`` the coefficient of blade ``blades[j]`` (the caller's order), and
        the result holds the same blades. ``r`` must be one rotor whose sandwich keeps those
        blades among themselves (else ``InvalidArgumentError`` names the blade it reaches)."""
        if blades is None:
            return self._product("sandwich", ("r", "x"), r, x, algebra, (strategy, out, dtype))
        named = [("r", r), ("x", x)]
        return self._apply(
            "sandwich", _algebra(algebra), named, _blade_list(blades), strategy, out, dtype
        )
