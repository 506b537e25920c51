"""Geometric algebra, what every operation shares: argument conversion (algebra, operands
as rows or DeviceArray handles, grades), the dtype a call computes in (the package's rule,
:mod:`amari_gpu._dtypes`: float16, float32 and float64 kept, every operation having
float64 kernels and float16 ones, ``scalar_product``'s float16 result being its float32 one
rounded once here; DeviceArrays count with their dtype) and the one native call of every
operation. The operations themselves are in
:mod:`amari_gpu.ga` (products) and :mod:`amari_gpu.ga_unary` (one-operand maps)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _native
from ._dtypes import FLOAT16, FLOAT32, KEPT, resident_dtype, result_dtype
from ._mixin import KernelHost
from ._validate import contiguous, output, real_array, shape_text
from .algebra import CL3, Algebra
from .array import DeviceArray, _rows_of, returned
from .errors import AmariGpuError, InvalidArgumentError, ShapeError
from .planning import optional_strategy


def _algebra(value: Any) -> Algebra:
    if value is None:
        return CL3
    if not isinstance(value, Algebra):
        raise InvalidArgumentError(
            f"algebra: expected an amari_gpu.Algebra or None, got {type(value).__name__}"
        )
    return value


def _kept(
    operation: str, named: list[tuple[str, Any]], dtype: Any, resident: bool
) -> np.dtype[Any]:
    """The dtype a call returns: float16, float32 and float64 are kept (numpy's promotion of
    the operands' dtypes, integers to float64, ``dtype=`` overriding). A DeviceArray operand
    counts with its dtype and must hold that dtype (DeviceArrays are not converted on the
    devices): one that does not is refused, naming it; so is a float16 ``scalar_product`` of
    DeviceArrays (see :func:`_scalar_f16`)."""
    if dtype is None and named and type(named[0][1]) is np.ndarray:
        # Plain arrays of one dtype the kernels keep: that dtype (numpy's promotion of equal
        # dtypes), without the general rule's work.
        same = next((k for k in KEPT if k == named[0][1].dtype), None)
        if same is not None and all(
            type(value) is np.ndarray and value.dtype == same for _, value in named
        ):
            return same
    if not resident:
        return result_dtype(named, dtype, KEPT)
    kept = resident_dtype(named, dtype, KEPT, operation, DeviceArray)
    if operation == "scalar_product" and kept == FLOAT16:
        name = next(name for name, value in named if isinstance(value, DeviceArray))
        raise InvalidArgumentError(
            f"{name}: a float16 scalar_product of DeviceArrays would be a float16 DeviceArray "
            "of one value per row, which DeviceArrays do not hold (float16 values pack two to "
            "a 4-byte word on the devices); pass numpy operands (np.asarray) for a float16 "
            "numpy result, or ctx.asarray(..., dtype=numpy.float32) them for a float32 "
            "DeviceArray"
        )
    return kept


def _scalar_f16(operation: str, kept: np.dtype[Any]) -> bool:
    """Whether a call is a float16 ``scalar_product``: one value per row, which float16 words
    (two values each) do not hold row by row (``Operation::check_dtype`` in the core), so it
    runs the float32 kernel on the operands rounded to float16 and widened (exactly: the
    float32 chains a float16 kernel runs on its widened loads), and its float32 result is
    rounded once to float16 where it is assembled (:meth:`GaBase._apply`)."""
    return operation == "scalar_product" and kept == FLOAT16


def _rows(
    name: str, array: np.ndarray[Any, Any], lead: tuple[int, ...], kept: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    """``array`` as rows of dtype ``kept`` and of its own width for the core (which checks
    that width against the algebra's, in the caller's shape): one row when its batch has one
    multivector (the core applies it to every row of the other operand, uploaded once),
    else its rows broadcast to the leading shape ``lead`` (a copy only when broadcasting
    repeats rows). Converted before broadcasting, so a repeated copy is of converted rows."""
    width = array.shape[-1] if array.ndim else 1
    converted = contiguous(name, real_array(name, array), kept)
    if math.prod(array.shape[:-1]) == 1:
        return converted.reshape(1, width)
    if array.shape[:-1] == lead:
        return converted.reshape(-1, width)
    repeated = np.broadcast_to(converted, (*lead, width))
    return contiguous(name, repeated, kept).reshape(-1, width)


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


def _blade_list(blades: Any) -> tuple[int, ...]:
    """``sandwich``'s ``blades=`` as the core takes it: a tuple of Python ints (the core checks
    that they are distinct blades of the algebra)."""
    try:
        values = list(blades)
    except TypeError:
        raise InvalidArgumentError(
            f"blades: expected a sequence of blade indices (bitmask order), got {blades!r}"
        ) from None
    for b in values:
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
            raise InvalidArgumentError(
                f"blades: expected integer blade indices (bitmask order), got {b!r}"
            )
    return tuple(int(b) for b in values)


def _width(call: tuple[str, Algebra, Any]) -> int:
    """Values per row of a call's result: one for ``scalar_product``, the named blades of a
    sandwich on some blades (``call``'s third item a tuple), else the algebra's blades."""
    operation, algebra, arg = call
    if operation == "scalar_product":
        return 1
    return len(arg) if isinstance(arg, tuple) else algebra.n_blades


def _ready_rows(named: list[tuple[str, Any]], width: int, kept: np.dtype[Any]) -> list[Any] | None:
    """The operands when they are already what the core reads — plain, aligned, C-contiguous
    ndarrays of the call's dtype ``kept`` and of one shape (..., ``width``), so nothing is
    converted or broadcast — else None (the general conversion applies). A small call's
    Python work is this check. float16 rows of an odd width (which do not pack two values to
    a word) are never ready: the general path's check refuses them."""
    if kept == FLOAT16 and width % 2:
        return None
    values = [value for _, value in named]
    shape = getattr(values[0], "shape", None)
    for value in values:
        if not (
            type(value) is np.ndarray
            and value.dtype == kept
            and value.shape == shape
            and value.ndim >= 1
            and value.shape[-1] == width
            and value.flags.c_contiguous
            and value.flags.aligned
        ):
            return None
    return values


def _numpy_rows(
    call: tuple[str, Algebra, Any], named: list[tuple[str, Any]], kept: np.dtype[Any]
) -> tuple[list[Any], tuple[int, ...]]:
    """Numpy operands of ``call`` (operation, algebra, grades) as the core's rows of dtype
    ``kept`` (see :func:`_rows`), checked by the core in the shapes the caller gave them,
    and the result's shape (the leading shapes broadcast against each other, numpy rules)."""
    operation, algebra, grades = call
    width = algebra.n_blades
    if _scalar_f16(operation, kept):
        # Rounded to float16 (as a float16 call of another operation rounds them), then
        # widened to the float32 kernel's rows below.
        named = [(name, contiguous(name, real_array(name, v), FLOAT16)) for name, v in named]
        kept = FLOAT32
    # A sandwich on some blades (grades a tuple) has rows of its own width: never the ready form.
    ready = None if isinstance(grades, tuple) else _ready_rows(named, width, kept)
    if ready is not None:
        # Already the core's rows, of the algebra's width and one shape (nothing to
        # broadcast): the native call's own checks are the caller's terms.
        same = ready[0].shape[:-1]
        flat = [value.reshape(-1, width) for value in ready]
        return flat, (same if operation == "scalar_product" else (*same, width))
    arrays = [real_array(name, value) for name, value in named]
    shapes = [a.shape for a in arrays]
    try:
        lead: tuple[int, ...] | None = np.broadcast_shapes(*(a.shape[:-1] for a in arrays))
    except ValueError:
        lead = None
    # Rows broadcast to the result's leading shape; when there is none (leading dimensions
    # that do not broadcast), their own, which the core refuses in the caller's terms (a
    # wrong width first, as on every call).
    rows: list[Any] = [
        _rows(name, a, a.shape[:-1] if lead is None else lead, kept)
        for (name, _), a in zip(named, arrays, strict=True)
    ]
    _native.check_ga_apply(operation, algebra.signature, rows, grades, shapes)
    if lead is None:
        raise AmariGpuError(
            f"{operation}: the core took leading shapes {shapes} that do not broadcast"
        )
    return rows, (lead if operation == "scalar_product" else (*lead, _width(call)))


def _resident_operand(
    ctx: Any, name: str, value: Any, kept: np.dtype[Any]
) -> tuple[Any, tuple[int, ...]]:
    """The native operand of ``value`` and its shape: a live DeviceArray's handle, or rows
    of dtype ``kept`` of the array's own width (the core checks the widths)."""
    if isinstance(value, DeviceArray):
        return value._live(name, ctx), value.shape
    array = real_array(name, value)
    return _rows(name, array, array.shape[:-1], kept), array.shape


def _resident_rows(
    ctx: Any, call: tuple[str, Algebra, Any], named: list[tuple[str, Any]], kept: np.dtype[Any]
) -> tuple[list[Any], tuple[int, ...], bool]:
    """Operands of ``call`` (operation, algebra, grades) with a DeviceArray among them as
    the core's rows, checked by the core in the shapes the caller gave them: DeviceArray
    handles and rows of dtype ``kept``, a single multivector gathered (one row: the core applies it
    to every row); leading shapes equal (DeviceArrays do not broadcast). Returns them, the
    result's shape, and whether every operand is a single multivector gathered (then
    nothing is resident)."""
    operation, algebra, grades = call
    converted = [_resident_operand(ctx, name, value, kept) for name, value in named]
    shapes = [shape for _, shape in converted]
    batch = any(math.prod(shape[:-1]) != 1 for shape in shapes)
    # A 1-D DeviceArray is always gathered: asarray keeps it as 2^n rows of one word, a
    # layout no GA kernel reads.
    native = [
        _rows(name, np.asarray(value), (), kept)
        if math.prod(shape[:-1]) == 1
        and isinstance(value, DeviceArray)
        and (batch or value.ndim == 1)
        else op
        for (op, shape), (name, value) in zip(converted, named, strict=True)
    ]
    leads = [shape[:-1] for shape in shapes]
    batches = [lead for lead in leads if math.prod(lead) != 1]
    lead = batches[0] if batches else leads[0]
    for (name, _), other in zip(named, leads, strict=True):
        if math.prod(other) != 1 and other != lead:
            raise ShapeError(
                f"{name}: expected leading shape {shape_text(lead)} like the other "
                f"operand (DeviceArrays do not broadcast), got {shape_text(other)}"
            )
    # The result's leading shape is numpy's broadcast of the operands' (as on the numpy
    # path): a single multivector of shape (1, 1, 2^n) adds its axes.
    lead = np.broadcast_shapes(*leads)
    shape = tuple(lead) if operation == "scalar_product" else (*lead, _width(call))
    # The core's checks in the caller's shapes, before anything is uploaded or run (a
    # RayContext's cluster array, having no native handle, is checked as a stand-in of its
    # shape).
    checked = [getattr(op, "check_stand_in", lambda op=op: op)() for op in native]
    _native.check_ga_apply(operation, algebra.signature, checked, grades, shapes)
    gathered = all(isinstance(op, np.ndarray) for op in native)
    if gathered and batch:
        # A numpy batch beside gathered single DeviceArrays: uploaded (placed by the
        # context's strategy, there being no sharding to follow), then run where it lives.
        native = [ctx.asarray(op)._handle if op.shape[0] != 1 else op for op in native]
    return native, shape, gathered and not batch


class GaBase(KernelHost):
    """The run of one geometric-algebra operation (see :class:`amari_gpu.ga.GeometricAlgebraMixin`
    for the conventions every operation follows)."""

    def _apply(
        self,
        operation: str,
        alg: Algebra,
        named: list[tuple[str, Any]],
        grades: Any,
        strategy: Any,
        out: Any,
        dtype: Any = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Every GA method: the dtype it computes in (:func:`_kept`), the operands converted
        (numpy rows broadcast to the result's leading shape; DeviceArrays as handles) and
        checked by the core in the caller's shapes, then the one native call. A DeviceArray
        operand gives a DeviceArray result (or the ``out`` given)."""
        call = (operation, alg, grades)
        resident = any(isinstance(value, DeviceArray) for _, value in named)
        kept = _kept(operation, named, dtype, resident)
        single = False
        if resident:
            rows, shape, single = _resident_rows(self, call, named, kept)
        else:
            rows, shape = _numpy_rows(call, named, kept)
        target = (
            None
            if out is None
            else output(out, shape, kept, dict(named), resident=self if resident else None)
        )
        if single:
            return self._single_result(call, rows, shape, target)
        if _scalar_f16(operation, kept):
            wide = self._run(call, rows, strategy, None)
            with np.errstate(over="ignore"):  # past 65504: infinity, as float16 kernels round
                rounded = wide.astype(FLOAT16)
            if target is not None:
                target[...] = rounded.reshape(shape)
            return returned(self, rounded, target, shape)
        result = self._run(call, rows, strategy, target)
        return returned(self, result, target, shape)

    def _run(
        self,
        call: tuple[str, Algebra, Any],
        rows: list[Any],
        strategy: Any,
        target: Any,
    ) -> Any:
        """The one native call of every GA operation (``call``: operation, algebra,
        grades): numpy rows or DeviceArray handles into ``target`` (None, a numpy array or
        a DeviceArray)."""
        operation, algebra, grades = call
        words = _width(call)
        # A C-contiguous array reshapes to the core's (rows, words) as a view of itself.
        native_out: Any = target
        if isinstance(target, DeviceArray):
            native_out = target._handle
        elif target is not None:
            native_out = target.reshape(-1, words)
        result, plan = self._kernels.ga_apply(
            self._native,
            operation,
            algebra.signature,
            rows,
            grades,
            optional_strategy(strategy),
            native_out,
        )
        self._record(plan)
        return result

    def _single_result(
        self,
        call: tuple[str, Algebra, Any],
        rows: list[Any],
        shape: tuple[int, ...],
        target: Any,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """A GA operation of single multivectors, some of them DeviceArrays, all gathered
        (one row each): run on the rows (one row, bit-identical) and uploaded as a
        DeviceArray of the result's ``shape`` in ``asarray``'s layout, which no kernel
        writes (a 1-D array is 2^n rows of one word). A DeviceArray ``out`` takes the
        upload's shards in place of its own; a numpy ``out`` gets the result."""
        numpy_out = target if isinstance(target, np.ndarray) else None
        result = self._run(call, rows, None, numpy_out)
        if numpy_out is not None:
            return numpy_out
        handle = self.asarray(result.reshape(_rows_of(shape)))._handle  # type: ignore[attr-defined]
        if isinstance(target, DeviceArray):
            target._handle = handle
            return target
        return self._array_class(handle, self, shape)  # type: ignore[attr-defined,no-any-return]

    def _unary(
        self,
        operation: str,
        x: Any,
        alg: Algebra,
        options: tuple[Any, Any, Any],
        grades: int = 0,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """A one-operand map; ``options``: the call's ``strategy``, ``out`` and ``dtype``."""
        strategy, out, dtype = options
        return self._apply(operation, alg, [("x", x)], grades, strategy, out, dtype)
