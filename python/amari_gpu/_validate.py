"""Argument checks shared by the public API: clear errors before anything reaches a device.

Dtype rule: the kernels compute in float32. Arrays of any real numeric dtype (bool, integer,
floating) are converted to float32 in a new array; complex, object, string and other dtypes
raise ``TypeError``, and so do masked arrays (the kernels would ignore the mask). A float32
array that is already C-contiguous and aligned is passed on as it is; any other (strided,
unaligned, byte-swapped) is copied. Inputs are never modified. A conversion or copy the host
cannot allocate raises ``OutOfMemoryError`` naming the argument, the bytes and the dtypes
(numpy's bare ``MemoryError`` names none of them): every conversion of an input to the
kernels' dtypes goes through :func:`contiguous`.

Integers the core holds as 64-bit unsigned are checked here against that range, so that a
Python int too large for it is an ``InvalidArgumentError`` naming the argument rather than a
bare ``OverflowError`` from the conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .errors import InvalidArgumentError, OutOfMemoryError, ShapeError


def shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


U64_MAX = 2**64 - 1
"""Largest integer the core takes for counts, sizes and milliseconds."""


def plain_array(name: str, value: Any) -> np.ndarray[Any, Any]:
    """``numpy.asarray(value)``, refusing masked arrays (their mask would be dropped)."""
    if type(value) is np.ndarray:
        # A plain array is its own asarray (the usual case, without the calls).
        return value
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(
            f"{name}: expected a plain array, got a masked array (numpy.ma); the kernels "
            "would ignore its mask: pass value.filled(fill) or value.compressed() instead"
        )
    try:
        return np.asarray(value)
    except MemoryError:
        raise OutOfMemoryError(
            f"{name}: cannot allocate host memory to convert a {type(value).__name__} into an array"
        ) from None


def real_array(name: str, value: Any) -> np.ndarray[Any, Any]:
    """``value`` as a numpy array of a real dtype (not converted, not copied if it is one)."""
    array = plain_array(name, value)
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{name}: expected an array of real numbers (converted to float32), "
            f"got dtype {array.dtype}"
        )
    return array


def as_float32(name: str, value: Any) -> npt.NDArray[np.float32]:
    """``value`` as a C-contiguous, aligned float32 array of the same shape (0-d stays 0-d):
    a copy unless it already is one."""
    return contiguous(name, real_array(name, value), np.float32)


def contiguous(name: str, array: np.ndarray[Any, Any], dtype: Any) -> np.ndarray[Any, Any]:
    """``array`` as a C-contiguous, aligned array of ``dtype``, a copy unless it already is
    one. A copy the host cannot allocate is an ``OutOfMemoryError`` naming ``name``, its
    bytes and both dtypes, rather than numpy's bare ``MemoryError``."""
    # Already so (the usual case): returned as np.require would, without its Python code.
    flags = array.flags
    if flags.c_contiguous and flags.aligned and array.dtype == dtype:
        return array
    try:
        return np.require(array, dtype=dtype, requirements=["C", "A"])
    except MemoryError:
        want = np.dtype(dtype)
        raise OutOfMemoryError(
            f"{name}: cannot allocate {want.itemsize * array.size} bytes of host memory for "
            f"a contiguous {want} copy of shape {shape_text(array.shape)} (from dtype "
            f"{array.dtype})"
        ) from None


def integer(name: str, value: Any, low: int, high: int = U64_MAX, *, none: bool = False) -> Any:
    """``value`` as an int in ``[low, high]`` (or None when ``none``), else an
    ``InvalidArgumentError`` naming ``name`` and the accepted range."""
    if none and value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or not (low <= value <= high)
    ):
        too_big = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if high == U64_MAX and not (too_big and value > high):
            accepted = f"an integer >= {low}"
        else:
            top = "2**64 - 1" if high == U64_MAX else str(high)
            accepted = f"an integer from {low} to {top}"
        accepted += " or None" if none else ""
        raise InvalidArgumentError(f"{name}: expected {accepted}, got {value!r}")
    return int(value)


def positive_int(name: str, value: Any, high: int = U64_MAX) -> int:
    """An integer in ``[1, high]``."""
    result: int = integer(name, value, 1, high)
    return result


def optional_positive_int(name: str, value: Any, high: int = U64_MAX) -> int | None:
    """None or an integer in ``[1, high]``."""
    result: int | None = integer(name, value, 1, high, none=True)
    return result


def name_list(name: str, value: Any, allowed: tuple[str, ...]) -> list[str] | None:
    """None, one name, or a sequence of names from ``allowed`` (case-insensitive)."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else sequence(name, value)
    result = []
    for item in items:
        if not isinstance(item, str) or item.lower() not in allowed:
            raise InvalidArgumentError(f"{name}: expected names from {list(allowed)}, got {item!r}")
        result.append(item.lower())
    if not result:
        raise InvalidArgumentError(
            f"{name}: expected at least one name from {list(allowed)}, got none"
        )
    return result


def index_list(name: str, value: Any) -> list[int] | None:
    """None or a sequence of non-negative adapter indices."""
    if value is None:
        return None
    items = [value] if isinstance(value, (int, np.integer)) else sequence(name, value)
    result = []
    for item in items:
        if not is_u64(item):
            raise InvalidArgumentError(
                f"{name}: expected adapter indices (integers >= 0), got {item!r}"
            )
        result.append(int(item))
    if not result:
        raise InvalidArgumentError(f"{name}: expected at least one adapter index, got none")
    return result


def is_u64(item: Any) -> bool:
    """Whether ``item`` is an integer (not a bool) that a ``u64`` of the core holds."""
    return (
        not isinstance(item, bool)
        and isinstance(item, (int, np.integer))
        and bool(0 <= item <= U64_MAX)
    )


def sequence(name: str, value: Any) -> list[Any]:
    """``list(value)``, or an ``InvalidArgumentError`` naming ``name`` when it is not a
    sequence (``list(5)`` would say "'int' object is not iterable")."""
    try:
        return list(value)
    except TypeError:
        raise InvalidArgumentError(
            f"{name}: expected a sequence, got {type(value).__name__} {value!r}"
        ) from None


@overload
def output(
    out: Any, shape: tuple[int, ...], dtype: Any, inputs: Mapping[str, Any]
) -> np.ndarray[Any, Any] | None: ...


@overload
def output(
    out: Any, shape: tuple[int, ...], dtype: Any, inputs: Mapping[str, Any], resident: object
) -> Any: ...


def output(
    out: Any,
    shape: tuple[int, ...],
    dtype: Any,
    inputs: Mapping[str, Any],
    resident: object | None = None,
) -> Any:
    """The caller's ``out=`` array, checked before any work (the numpy ufunc convention: the result
    is written into it and it is returned): None when not given, else exactly ``shape`` and
    ``dtype``, C-contiguous, aligned (float16: to 4 bytes), writeable, a plain ndarray (not a
    masked array, whose mask would be ignored) sharing no memory with any of ``inputs`` (the
    caller's arguments by name, as given, before any conversion). This is the one place ``out=``
    is checked. A DeviceArray ``out`` is taken when ``resident`` is the context of a call with
    DeviceArray operands (live, of that context, exactly ``shape`` and ``dtype``; it may be one
    of the inputs, since the result is written into fresh shards that then replace its own); it
    is returned as given, otherwise refused."""
    if out is None:
        return None
    as_out = getattr(out, "_as_out", None)
    if as_out is not None and resident is not None:
        as_out(resident)
        if tuple(out.shape) != shape:
            raise ShapeError(
                f"out: expected shape {shape_text(shape)} (the result's), got "
                f"{shape_text(out.shape)}"
            )
        if np.dtype(dtype) != out.dtype:
            raise TypeError(
                f"out: expected dtype {np.dtype(dtype)} (the result's), got {out.dtype}"
            )
        return out
    if as_out is not None:
        raise TypeError(
            "out: expected a numpy.ndarray or None (a DeviceArray out is taken when an operand "
            "is a DeviceArray), got DeviceArray"
        )
    if isinstance(out, np.ma.MaskedArray):
        raise TypeError(
            "out: expected a plain numpy array, got a masked array (numpy.ma); its mask "
            "would be ignored"
        )
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a numpy.ndarray or None, got {type(out).__name__}")
    want = np.dtype(dtype)
    if out.shape != shape:
        raise ShapeError(
            f"out: expected shape {shape_text(shape)} (the result's), got {shape_text(out.shape)}"
        )
    if out.dtype != want:
        raise TypeError(f"out: expected dtype {want} (the result's), got dtype {out.dtype}")
    if not out.flags.c_contiguous:
        raise InvalidArgumentError("out: expected a C-contiguous array, got a strided one")
    if not out.flags.aligned:
        raise InvalidArgumentError("out: expected an aligned array, got an unaligned one")
    if out.dtype == np.float16 and out.size and out.ctypes.data % 4:
        # The kernels write float16 values two to a 4-byte word, as numpy allocates them.
        raise InvalidArgumentError(
            "out: expected float16 rows starting at a 4-byte aligned address (as numpy "
            "allocates them), got a view 2 bytes past one"
        )
    if not out.flags.writeable:
        raise InvalidArgumentError("out: expected a writeable array, got a read-only one")
    for name, value in inputs.items():
        if isinstance(value, np.ndarray) and np.shares_memory(out, value):
            raise InvalidArgumentError(
                f"out: expected an array that shares no memory with the inputs, got one "
                f"that overlaps {name}"
            )
    return out
