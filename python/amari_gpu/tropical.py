"""Tropical algebra: max-plus and min-plus products, and all-pairs shortest paths.

Semantics. In max-plus, ``a ⊕ b = max(a, b)`` and ``a ⊗ b = a + b``, with tropical zero
``-inf``; in min-plus, ``min`` and ``+inf``. The tropical zero is absorbing for ⊗ even against
the opposite infinity (in max-plus, ``-inf ⊗ +inf = -inf``; in min-plus, ``+inf ⊗ -inf =
+inf``), so no NaN ever appears. NaN inputs raise :class:`InvalidArgumentError`. A product
with an inner dimension of 0 is the tropical zero matrix. Results are exact: every output is
the max (or min) of float32 sums, bit-identical to a float32 evaluation on the host, for any
device count and split strategy.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import numpy.typing as npt

from . import _native
from ._mixin import KernelHost
from ._validate import as_float32, output, shape_text
from .array import DeviceArray, finish_resident
from .errors import InvalidArgumentError, ShapeError
from .planning import optional_strategy

SEMIRINGS: tuple[str, ...] = _native.SEMIRINGS
"""Names of the tropical semirings."""


def _semiring(value: Any) -> str:
    if not isinstance(value, str) or value not in SEMIRINGS:
        raise InvalidArgumentError(f"semiring: expected one of {list(SEMIRINGS)}, got {value!r}")
    return value


def _matrices(name: str, value: Any, expected: str) -> npt.NDArray[np.float32]:
    """``value`` as float32 with 2 or 3 dimensions."""
    array = as_float32(name, value)
    if array.ndim not in (2, 3):
        raise ShapeError(f"{name}: expected shape {expected}, got {shape_text(array.shape)}")
    return array


def _no_nan(name: str, array: npt.NDArray[np.float32]) -> None:
    """Refuses NaN, naming its first position in ``array`` as the caller shaped it: the core
    refuses NaN too, but sees every operand with a batch axis (a (k,) vector as (1, k)),
    so only here can the index have the caller's dimensions."""
    if np.isnan(array).any():
        index = ", ".join(str(int(i)) for i in np.argwhere(np.isnan(array))[0])
        raise InvalidArgumentError(
            f"{name}: expected no NaN (tropical values are numbers or ±inf), got NaN at "
            f"[{index}] of shape {shape_text(array.shape)}"
        )


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _largest_finite(array: npt.NDArray[np.float32]) -> float:
    """The largest finite magnitude in ``array`` (0 without one)."""
    finite = np.abs(array[np.isfinite(array)])
    return float(finite.max()) if finite.size else 0.0


class TropicalMixin(KernelHost):
    """Tropical-algebra methods of ``MultiGpuContext``."""

    @overload
    def tropical_matmul(
        self,
        a: DeviceArray,
        b: Any,
        semiring: str = "max_plus",
        *,
        strategy: str | None = None,
        out: DeviceArray | None = None,
    ) -> DeviceArray: ...
    @overload
    def tropical_matmul(
        self,
        a: DeviceArray,
        b: Any,
        semiring: str = "max_plus",
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]: ...
    @overload
    def tropical_matmul(
        self,
        a: Any,
        b: Any,
        semiring: str = "max_plus",
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32]: ...
    def tropical_matmul(
        self,
        a: Any,
        b: Any,
        semiring: str = "max_plus",
        *,
        strategy: str | None = None,
        out: Any = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Tropical matrix product ``a ⊗ b`` in ``semiring`` ("max_plus" or "min_plus").

        ``(m, k) ⊗ (k, n) → (m, n)``: ``out[i, j] = max_k (a[i, k] + b[k, j])`` (``min`` in
        min-plus), with the tropical zero absorbing (see the module docstring). Batched:
        ``(batch, m, k) ⊗ (batch, k, n) → (batch, m, n)``, one product per batch entry.
        Inputs of any real dtype (float64 included) are converted to float32 (inputs are
        never modified); the result is float32. NaN raises :class:`InvalidArgumentError`
        naming its position, e.g. ``[batch, row, column]`` for 3-D operands. The rows of
        ``a`` are split across the devices in blocks of 64 rows of one batch entry (an item
        of ``ctx.last_plan`` is such a block; each batch entry's last block is padded), and
        ``b`` is bound whole on each device, so it must fit one storage binding of every
        device. A batch of products with m much smaller than 64 wastes most of each block.

        A finite sum ``a[i, k] + b[k, j]`` beyond the float32 range that would decide an entry
        raises :class:`InvalidArgumentError` ("tropical products overflow float32"), rather
        than coming back as a quiet ``inf`` or ``-inf`` (the tropical zero).

        ``out=``: a float32, C-contiguous, writeable array of the result's shape sharing no
        memory with ``a`` or ``b``; the product is written into it and it is returned.

        A :class:`DeviceArray` ``a`` runs where its rows live and gives a DeviceArray of
        shape ``(m, n)`` / ``(batch, m, n)`` with its sharding, bit-identical to the numpy
        path (``strategy`` is not used: the rows stay where they are). ``b``, numpy, is
        uploaded whole to each device holding rows; ``a`` never moves. ``out=`` may then be
        a DeviceArray of the result's shape (the result takes its sharding and replaces its
        shards; nothing changes in it if the call fails) or a numpy array (the result is
        gathered into it). The checks read per-row statistics computed on the devices (8
        bytes per row read back) and give the numpy path's errors; only when a term could
        overflow (largest finite |a| + |b| beyond float32) is ``a`` gathered, for the
        numpy path's exact check, before the resident product runs. ``n`` must be at least
        1 (a DeviceArray has no empty rows).
        """
        semiring = _semiring(semiring)
        if isinstance(a, DeviceArray):
            return self._matmul_resident(a, b, semiring, out)
        a32 = _matrices("a", a, "(m, k) or (batch, m, k)")
        b32 = _matrices("b", b, "(k, n) or (batch, k, n)")
        batched = a32.ndim == 3
        if b32.ndim != a32.ndim:
            want = "(batch, k, n)" if batched else "(k, n)"
            raise ShapeError(f"b: expected shape {want} like a, got {shape_text(b32.shape)}")
        _no_nan("a", a32)
        _no_nan("b", b32)
        a3 = a32 if batched else a32[None]
        b3 = b32 if batched else b32[None]
        if b3.shape[0] != a3.shape[0] or b3.shape[1] != a3.shape[2]:
            want = f"({a3.shape[0]}, {a3.shape[2]}, n)" if batched else f"({a3.shape[2]}, n)"
            raise ShapeError(f"b: expected shape {want}, got {shape_text(b32.shape)}")
        shape = (a3.shape[0], a3.shape[1], b3.shape[2])
        target = output(out, shape if batched else shape[1:], np.float32, {"a": a, "b": b})
        result, plan = self._kernels.tropical_matmul(
            self._native,
            a3,
            b3,
            semiring,
            optional_strategy(strategy),
            target if target is None or batched else target[None],
        )
        self._record(plan)
        if target is not None:
            return target
        return result if batched else result[0]

    @overload
    def tropical_matvec(
        self,
        a: DeviceArray,
        x: Any,
        semiring: str = "max_plus",
        *,
        strategy: str | None = None,
        out: None = None,
    ) -> DeviceArray: ...
    @overload
    def tropical_matvec(
        self,
        a: Any,
        x: Any,
        semiring: str = "max_plus",
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32]: ...
    def tropical_matvec(
        self,
        a: Any,
        x: Any,
        semiring: str = "max_plus",
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Tropical matrix-vector product ``a ⊗ x`` in ``semiring``.

        ``(m, k) ⊗ (k,) → (m,)``: ``out[i] = max_k (a[i, k] + x[k])`` (``min`` in min-plus),
        same semantics as :meth:`tropical_matmul`. Batched: ``(batch, m, k) ⊗ (batch, k) →
        (batch, m)``. Rows of ``a`` are split across the devices; ``x`` is bound whole.
        Returns float32 whatever the input dtype; ``out=`` as in :meth:`tropical_matmul`.

        A :class:`DeviceArray` ``a`` runs where its rows live and gives a DeviceArray of
        shape ``a.shape[:-1]`` with its sharding (bit-identical to the numpy path; ``x``,
        numpy, is uploaded to each device; a numpy ``out`` gets the result gathered). The
        checks read per-row statistics computed on the devices, whatever their kind (8
        bytes per row read back), with the numpy path's errors; only when a term could
        overflow (largest finite |a| + |x| beyond float32) is ``a`` gathered, for the numpy
        path's exact check, before the resident product runs.
        """
        semiring = _semiring(semiring)
        if isinstance(a, DeviceArray):
            return self._matvec_resident(a, x, semiring, out)
        a32 = _matrices("a", a, "(m, k) or (batch, m, k)")
        x32 = as_float32("x", x)
        batched = a32.ndim == 3
        want = (a32.shape[0], a32.shape[2]) if batched else (a32.shape[1],)
        if x32.shape != want:
            raise ShapeError(f"x: expected shape {shape_text(want)}, got {shape_text(x32.shape)}")
        _no_nan("a", a32)
        _no_nan("x", x32)
        a3 = a32 if batched else a32[None]
        x2 = x32 if batched else x32[None]
        shape = a32.shape[:-1]
        target = output(out, shape, np.float32, {"a": a, "x": x})
        result, plan = self._kernels.tropical_matvec(
            self._native,
            a3,
            x2,
            semiring,
            optional_strategy(strategy),
            target if target is None or batched else target[None],
        )
        self._record(plan)
        if target is not None:
            return target
        return result if batched else result[0]

    def _matvec_resident(
        self, a: DeviceArray, x: Any, semiring: str, out: Any
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """``tropical_matvec`` with a resident ``a``: the same checks and errors as the numpy
        path, from per-row statistics computed where the rows live (first NaN column and
        largest finite magnitude: 8 bytes per row read back, not the k words); then the
        matvec kernel runs on the devices holding the rows, result a DeviceArray."""
        a._live("a", self)
        if a.ndim not in (2, 3):
            raise ShapeError(
                f"a: expected shape (m, k) or (batch, m, k), got {shape_text(a.shape)}"
            )
        x32 = as_float32("x", x)
        batched = a.ndim == 3
        want = (a.shape[0], a.shape[2]) if batched else (a.shape[1],)
        if x32.shape != want:
            raise ShapeError(f"x: expected shape {shape_text(want)}, got {shape_text(x32.shape)}")
        shape = a.shape[:-1]
        target = output(out, shape, np.float32, {"a": a, "x": x}, resident=self)
        if isinstance(target, DeviceArray):
            raise InvalidArgumentError(
                "out: expected a numpy array or None for tropical_matvec of a DeviceArray, "
                "got DeviceArray"
            )
        if self._resident_checks(a, "x", x32):
            # A term could overflow: the numpy path's exact check needs a's rows.
            self.tropical_matvec(a.numpy(), x32, semiring)
        x2 = np.ascontiguousarray(x32 if batched else x32[None])
        handle = _native.resident_tropical_matvec(self._native, a._handle, x2, semiring)
        return finish_resident(self, handle, tuple(shape), target)

    def _matmul_resident(
        self, a: DeviceArray, b: Any, semiring: str, out: Any
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """``tropical_matmul`` with a resident ``a``: the numpy path's shape checks and
        errors, then the checks of :meth:`_resident_checks`, then ``matmul_rows`` on the
        devices holding the rows (``b`` bound whole on each); result a DeviceArray, written
        into a DeviceArray ``out`` or gathered into a numpy one."""
        a._live("a", self)
        if a.ndim not in (2, 3):
            raise ShapeError(
                f"a: expected shape (m, k) or (batch, m, k), got {shape_text(a.shape)}"
            )
        b32 = _matrices("b", b, "(k, n) or (batch, k, n)")
        batched = a.ndim == 3
        if b32.ndim != a.ndim:
            want = "(batch, k, n)" if batched else "(k, n)"
            raise ShapeError(f"b: expected shape {want} like a, got {shape_text(b32.shape)}")
        batch, m, k = a.shape if batched else (1, *a.shape)
        b3 = b32 if batched else b32[None]
        if b3.shape[0] != batch or b3.shape[1] != k:
            want = f"({batch}, {k}, n)" if batched else f"({k}, n)"
            raise ShapeError(f"b: expected shape {want}, got {shape_text(b32.shape)}")
        n = b3.shape[2]
        if n == 0:
            raise ShapeError(
                f"b: expected at least one column when a is a DeviceArray (a DeviceArray "
                f"has no empty rows), got shape {shape_text(b32.shape)}"
            )
        shape = (batch, m, n) if batched else (m, n)
        target = output(out, shape, np.float32, {"a": a, "b": b}, resident=self)
        if self._resident_checks(a, "b", b32):
            # A term could overflow: the numpy path's exact check needs a's rows.
            self.tropical_matmul(a.numpy(), b32, semiring)
        b_flat = np.ascontiguousarray(b3)
        if isinstance(target, DeviceArray):
            _native.resident_tropical_matmul(
                self._native, a._handle, b_flat, semiring, target._live("out", self)
            )
            return target
        handle = _native.resident_tropical_matmul(self._native, a._handle, b_flat, semiring)
        assert handle is not None  # a new array when no out is given
        return finish_resident(self, handle, shape, target)

    def _resident_checks(
        self, a: DeviceArray, other_name: str, other: npt.NDArray[np.float32]
    ) -> bool:
        """The numpy path's NaN checks of a resident ``a`` and a host ``other``, from per-row
        statistics computed where a's rows live (first NaN column and largest finite
        magnitude: 8 bytes per row read back, not the k words). Returns whether a term could
        overflow float32 (largest finite |a| + |other| beyond its range), which only the
        numpy path's exact check, on a's gathered rows, can settle."""
        handle = _native.resident_tropical_row_stats(self._native, a._handle)
        try:
            stats = _native.resident_gather(self._native, handle)
        finally:
            handle.free()
        nan_rows = np.flatnonzero(stats[:, 0] >= 0)
        if nan_rows.size:
            r, j = int(nan_rows[0]), int(stats[nan_rows[0], 0])
            m = a.shape[-2]
            index = (r // m, r % m, j) if a.ndim == 3 else (r, j)
            raise InvalidArgumentError(
                f"a: expected no NaN (tropical values are numbers or ±inf), got NaN at "
                f"[{', '.join(map(str, index))}] of shape {shape_text(a.shape)}"
            )
        _no_nan(other_name, other)
        top_a = float(stats[:, 1].max()) if stats.size else 0.0
        return top_a + _largest_finite(other) > _FLOAT32_MAX

    def shortest_paths(
        self,
        w: Any,
        *,
        strategy: str | None = None,
        out: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float32]:
        """All-pairs shortest path lengths of a weighted digraph, float32 (n, n) whatever the
        input dtype (float64 weights are rounded to float32 first).

        ``w[i, j]`` is the weight of the edge i → j, ``inf`` where there is no edge; negative
        weights are allowed, ``-inf`` and NaN are not. The diagonal is a self-loop weight: the
        distance from a vertex to itself is ``min(w[i, i], 0)`` (the empty path costs 0), so a
        negative diagonal entry is a negative cycle. ``out[i, j]`` is the least total weight
        of a path from i to j (``inf`` if j is unreachable). A negative cycle raises
        :class:`InvalidArgumentError` saying so.

        Computed by blocked Floyd-Warshall in the min-plus semiring (n³ tropical steps, rows
        split across the devices); path sums are float32, so a length can differ from a
        float64 evaluation by float32 rounding along its path. ``ctx.last_plan`` holds the
        plan of the last product the call ran.

        Weights so large that a path could overflow float32 (2n max|w| above about 1.7e38)
        are scaled by an exact power of two for the computation and the lengths unscaled
        after (bit-identical for any devices); a shortest path longer than float32 can hold
        raises :class:`InvalidArgumentError` ("path lengths overflow float32") rather than
        reading as ``inf`` (unreachable) or ``-inf``.

        ``out=``: a float32, C-contiguous, writeable (n, n) array sharing no memory with
        ``w``; the lengths are written into it and it is returned.
        """
        w32 = as_float32("w", w)
        if w32.ndim != 2 or w32.shape[0] != w32.shape[1]:
            raise ShapeError(f"w: expected shape (n, n), got {shape_text(w32.shape)}")
        target = output(out, w32.shape, np.float32, {"w": w})
        result, plan = self._kernels.shortest_paths(
            self._native, w32, optional_strategy(strategy), target
        )
        self._record(plan)
        return result
