"""Tropical algebra: max-plus and min-plus products, and all-pairs shortest paths.

Semantics. In max-plus, ``a ⊕ b = max(a, b)`` and ``a ⊗ b = a + b``, with tropical zero
``-inf``; in min-plus, ``min`` and ``+inf``. The tropical zero is absorbing for ⊗ even against
the opposite infinity (in max-plus, ``-inf ⊗ +inf = -inf``; in min-plus, ``+inf ⊗ -inf =
+inf``), so no NaN ever appears. NaN inputs raise :class:`InvalidArgumentError`. A product
with an inner dimension of 0 is the tropical zero matrix. Results are exact: every output is
the max (or min) of sums rounded once in the call's dtype, bit-identical to that evaluation
on the host, for any device count, device kind and split strategy.

Dtypes (:mod:`amari_gpu._dtypes`): float32 and float64 are kept, as numpy promotes the
operands (integers and bools in float64; float16 in float32, there being no float16 tropical
kernels yet); ``dtype=`` (float32 or float64) overrides, e.g. ``dtype=np.float32`` to compute
float64 inputs in float32. float64 runs on the devices with float64 kernels (the host device,
Vulkan adapters with ``SHADER_F64`` such as lavapipe; not OpenGL), a context without one
refusing it (``InvalidArgumentError`` naming its devices). A product of a :class:`DeviceArray`
computes in its dtype when that is float32 or float64 (its rows live only on devices that run
it), promoted with the other operand as numpy would; the DeviceArray must hold the call's
dtype (one of another, float16 included, is refused, naming it and the conversion to make).
``shortest_paths`` of a DeviceArray gathers it and computes in its dtype. ``out=`` must have
the result's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _native, _shapes
from ._dtypes import FLOAT32, FLOAT64, resident_dtype, result_dtype
from ._mixin import KernelHost
from ._validate import contiguous, output, real_array, shape_text
from .array import DeviceArray, returned
from .errors import InvalidArgumentError, ShapeError
from .planning import optional_strategy

SEMIRINGS: tuple[str, ...] = _native.SEMIRINGS
"""Names of the tropical semirings."""


def _semiring(value: Any) -> str:
    """``value`` as a semiring name (the core checks it is one of :data:`SEMIRINGS`)."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"semiring: expected one of {list(SEMIRINGS)}, got {value!r}")
    return value


def _kept(named: list[tuple[str, Any]], dtype: Any) -> np.dtype[Any]:
    """The dtype a call on operands ``named`` computes in and returns (see the module): with
    a DeviceArray, the promotion of the operands, which its DeviceArrays must hold."""
    if any(isinstance(value, DeviceArray) for _, value in named):
        return resident_dtype(named, dtype, (FLOAT32, FLOAT64), "a tropical product", DeviceArray)
    return result_dtype(named, dtype, (FLOAT32, FLOAT64))


def _array(name: str, value: Any, kept: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``value`` as a C-contiguous array of dtype ``kept`` (a copy unless it is one)."""
    return contiguous(name, real_array(name, value), kept)


def _left(ctx: Any, a: Any, kept: np.dtype[Any]) -> tuple[Any, tuple[int, ...], bool]:
    """``a`` as the native products take it, its shape, and whether it is resident: a live
    DeviceArray's handle (the handle knows its rows and row width, not the caller's shape),
    else an array of dtype ``kept``."""
    if isinstance(a, DeviceArray):
        return a._live("a", ctx), a.shape, True
    array = _array("a", a, kept)
    return array, array.shape, False


class TropicalMixin(KernelHost):
    """Tropical-algebra methods of ``MultiGpuContext``."""

    @_shapes.shaped[_shapes.TropicalProduct]
    def tropical_matmul(
        self,
        a: Any,
        b: Any,
        semiring: str = "max_plus",
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Tropical matrix product ``a ⊗ b`` in ``semiring`` ("max_plus" or "min_plus").

        ``out[i, j] = max_k (a[i, k] + b[k, j])`` (``min`` in min-plus), with the tropical
        zero absorbing (see the module docstring); batched, one product per batch entry.
        The rows of ``a`` are split across the devices in blocks of 64 rows of one batch
        entry (an item of ``ctx.last_plan`` is such a block; each batch entry's last block is
        padded), and ``b`` is bound whole on each device, so it must fit one storage binding
        of every device. A batch of products with m much smaller than 64 wastes most of
        each block.

        Args:
            a: ``(m, k)`` or ``(batch, m, k)``, any real dtype (converted to the call's
                dtype, see the module; never modified), or a :class:`DeviceArray`.
            b: ``(k, n)`` or ``(batch, k, n)``, any real dtype.
            semiring: "max_plus" or "min_plus".
            dtype: float32 or float64 to compute in, overriding the operands' promotion.
            strategy: how the rows are split (one of ``STRATEGIES``); default the context's.
            out: a C-contiguous, writeable array of the result's shape and dtype sharing no
                memory with ``a`` or ``b``; the product is written into it and it is
                returned.

        Returns:
            ``(m, n)`` or ``(batch, m, n)`` of the call's dtype (float32 or float64); a
            DeviceArray of that dtype when ``a`` is one.

        Raises:
            ShapeError: the shapes do not chain (``a``'s k against ``b``'s), or their batches
                differ.
            InvalidArgumentError: NaN in an operand (named at its position, e.g.
                ``[batch, row, column]``), an unknown ``semiring`` or ``strategy``, a
                finite sum ``a[i, k] + b[k, j]`` beyond the call's dtype that would decide an
                entry ("tropical products overflow float32" / "float64"), never a quiet
                ``inf``/``-inf``; float64 in a context without float64 devices, or a
                DeviceArray of another dtype than the call's (e.g. a float32 one with a
                float64 ``b``, or a float16 one).
            TypeError: a non-real dtype, or ``out`` of another dtype than the result's.

        A :class:`DeviceArray` ``a`` runs where its rows live and gives a DeviceArray of
        shape ``(m, n)`` / ``(batch, m, n)`` with its sharding, bit-identical to the numpy
        path (``strategy`` is not used: the rows stay where they are). ``b``, numpy, is
        uploaded whole to each device holding rows; ``a`` never moves. ``out=`` may then be
        a DeviceArray of the result's shape (the result takes its sharding and replaces its
        shards; nothing changes in it if the call fails) or a numpy array (the result is
        gathered into it). The checks read per-row statistics computed on the devices (8
        bytes per row read back, 12 in float64) and give the numpy path's errors; only when
        a term could overflow (largest finite |a| + |b| beyond the dtype) is ``a`` gathered:
        the product then runs once on its rows, with the numpy path's exact check, and the
        result is put where the rows of ``a`` (or of a DeviceArray ``out``) live. ``n`` must be at
        least 1 (a DeviceArray has no empty rows).
        """
        kept = _kept([("a", a), ("b", b)], dtype)
        native_a, a_shape, resident = _left(self, a, kept)
        right = _array("b", b, kept)
        shape = (*a_shape[:-1], *right.shape[-1:])
        target = output(out, shape, kept, {"a": a, "b": b}, resident=self if resident else None)
        result, plan = self._kernels.tropical_matmul(
            self._native,
            native_a,
            right,
            _semiring(semiring),
            optional_strategy(strategy),
            target._handle if isinstance(target, DeviceArray) else target,
            a_shape if resident else None,
        )
        self._record(plan)
        return returned(self, result, target, shape)

    @_shapes.shaped[_shapes.TropicalMatvec]
    def tropical_matvec(
        self,
        a: Any,
        x: Any,
        semiring: str = "max_plus",
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Tropical matrix-vector product ``a ⊗ x`` in ``semiring``.

        ``out[i] = max_k (a[i, k] + x[k])`` (``min`` in min-plus), same semantics as
        :meth:`tropical_matmul`. Rows of ``a`` are split across the devices; ``x`` is bound
        whole.

        Args:
            a: ``(m, k)`` or ``(batch, m, k)``, any real dtype, or a :class:`DeviceArray`.
            x: ``(k,)`` or ``(batch, k)``, any real dtype.
            semiring: "max_plus" or "min_plus".
            dtype: float32 or float64 to compute in, overriding the operands' promotion.
            strategy: how the rows are split (one of ``STRATEGIES``); default the context's.
            out: as in :meth:`tropical_matmul`, of the result's shape and dtype.

        Returns:
            ``(m,)`` or ``(batch, m)`` of the call's dtype; a DeviceArray when ``a`` is one.

        Raises:
            ShapeError: ``x``'s k differs from ``a``'s, or their batches differ.
            InvalidArgumentError: as for :meth:`tropical_matmul`.
            TypeError: as for :meth:`tropical_matmul`.

        A :class:`DeviceArray` ``a`` runs where its rows live and gives a DeviceArray of
        shape ``a.shape[:-1]`` with its sharding (bit-identical to the numpy path; ``x``,
        numpy, is uploaded to each device; a numpy ``out`` gets the result gathered). The
        checks read per-row statistics computed on the devices, whatever their kind (8
        bytes per row read back, 12 in float64), with the numpy path's errors; only when a
        term could overflow (largest finite |a| + |x| beyond the dtype) is ``a`` gathered:
        the product then runs once on its rows, with the numpy path's exact check, and the
        result is put where ``a``'s rows live.
        """
        kept = _kept([("a", a), ("x", x)], dtype)
        native_a, a_shape, resident = _left(self, a, kept)
        vector = _array("x", x, kept)
        shape = a_shape[:-1]
        target = output(out, shape, kept, {"a": a, "x": x}, resident=self if resident else None)
        result, plan = self._kernels.tropical_matvec(
            self._native,
            native_a,
            vector,
            _semiring(semiring),
            optional_strategy(strategy),
            target._handle if isinstance(target, DeviceArray) else target,
            a_shape if resident else None,
        )
        self._record(plan)
        return returned(self, result, target, shape)

    def shortest_paths(
        self,
        w: Any,
        *,
        dtype: npt.DTypeLike | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | None = None,
    ) -> npt.NDArray[np.float32 | np.float64]:
        """All-pairs shortest path lengths of a weighted digraph, (n, n) in the weights'
        dtype (float32 or float64 kept, integers in float64; see the module).

        ``w[i, j]`` is the weight of the edge i → j, ``inf`` where there is no edge; negative
        weights are allowed, ``-inf`` and NaN are not. The diagonal is a self-loop weight: the
        distance from a vertex to itself is ``min(w[i, i], 0)`` (the empty path costs 0), so a
        negative diagonal entry is a negative cycle. ``out[i, j]`` is the least total weight
        of a path from i to j (``inf`` if j is unreachable). A negative cycle raises
        :class:`InvalidArgumentError` saying so.

        Computed by blocked Floyd-Warshall in the min-plus semiring (n³ tropical steps, rows
        split across the devices); path sums are rounded in the call's dtype, so a float32
        length can differ from a float64 evaluation by float32 rounding along its path; in
        float64 the lengths are those of a float64 Floyd-Warshall wherever its sums are
        exact. ``ctx.last_plan`` holds the plan of the last product the call ran.

        Weights so large that a path could overflow the dtype (2n max|w| above half its
        largest value) are scaled by an exact power of two for the computation and the
        lengths unscaled after (bit-identical for any devices); a shortest path longer than
        the dtype can hold raises :class:`InvalidArgumentError` ("path lengths overflow
        float32" / "float64") rather than reading as ``inf`` (unreachable) or ``-inf``.

        Args:
            w: ``(n, n)`` weights, any real dtype.
            dtype: float32 or float64 to compute in, overriding the weights' own.
            strategy: how each product's rows are split; default the context's.
            out: a C-contiguous, writeable ``(n, n)`` array of the result's dtype sharing no
                memory with ``w``; the lengths are written into it and it is returned.

        Returns:
            ``(n, n)`` path lengths of the call's dtype (``(0, 0)`` for an empty graph).

        Raises:
            ShapeError: ``w`` is not square.
            InvalidArgumentError: NaN or ``-inf`` weights, a negative cycle, a path length
                beyond the dtype ("path lengths overflow ..."), or float64 in a context
                without float64 devices.
            TypeError: a non-real dtype, or ``out`` of another dtype than the result's.
        """
        kept = _kept([("w", w)], dtype)
        weights = _array("w", w, kept)
        if weights.ndim != 2 or weights.shape[0] != weights.shape[1]:
            raise ShapeError(f"w: expected shape (n, n), got {shape_text(weights.shape)}")
        target = output(out, weights.shape, kept, {"w": w})
        result, plan = self._kernels.shortest_paths(
            self._native, weights, optional_strategy(strategy), target
        )
        self._record(plan)
        return result
