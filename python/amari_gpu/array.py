"""Device-resident arrays: ``ctx.asarray(x)`` uploads rows into shards over the context's
devices, kernels run where the rows live, ``numpy()`` (or ``np.asarray``) gathers.

A :class:`DeviceArray` is rows of float32: shape ``(N,)``, ``(N, C)`` or ``(..., C)`` (the
leading axes are the rows). Its ``sharding`` says which device holds which rows. What
``asarray`` keeps of the source: a host copy of the float32 rows (``nbytes`` of host
memory per uploaded array; arrays computed from it keep only the kernel and a reference to
their operands' lineage, plus a copy of any numpy operand), so rows lost with a failed
device are computed again on the others, bit-identical.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from numpy.lib.mixins import NDArrayOperatorsMixin

from . import _native, array_ops
from ._mixin import KernelHost
from ._validate import as_float32, real_array, shape_text
from .errors import InvalidArgumentError, ShapeError
from .planning import optional_strategy


class DeviceArray(NDArrayOperatorsMixin):
    """Float32 rows held on a context's devices. Create with ``ctx.asarray(x)``; GA methods
    of the context take and return them. Released by :meth:`free`, when garbage-collected
    and when the context closes.

    Acts like an array where that keeps the rows on the devices (``array_ops``): ``x[i]``
    and ``x[a:b]`` are new DeviceArrays holding a copy of those rows; ``+ - * /``, the
    comparisons and ``np.negative``/``np.abs``/``np.sqrt`` run where the rows live (a
    comparison gives numpy's bool array); other numpy functions (``np.sum``...) are refused,
    ``np.asarray(x)`` being the explicit way home."""

    __slots__ = ("__weakref__", "_ctx", "_handle", "_shape")

    def __init__(self, handle: _native.DeviceArray, ctx: Any, shape: tuple[int, ...]) -> None:
        self._handle = handle
        self._ctx = ctx
        self._shape = shape

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return self._shape

    @property
    def dtype(self) -> np.dtype[np.float32]:
        """Always float32."""
        return np.dtype(np.float32)

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        """Bytes of its elements (held on the devices, spread over the shards)."""
        return 4 * self.size

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d DeviceArray (a single scalar_product result)")
        return self._shape[0]

    @property
    def freed(self) -> bool:
        """Whether its shards were released (``free``, or its context closed)."""
        return not self._handle.live

    @property
    def sharding(self) -> list[tuple[int, int, int]]:
        """``(device_id, start_row, stop_row)`` of every shard, in row order."""
        return list(self._handle.sharding("x"))

    def _live(self, name: str, ctx: object) -> _native.DeviceArray:
        """The native handle, after checking the array is live and of context ``ctx``."""
        if self._ctx is not ctx:
            raise InvalidArgumentError(
                f"{name}: expected a DeviceArray of this context, got one of another context"
            )
        if self.freed:
            raise InvalidArgumentError(
                f"{name}: expected a live DeviceArray, got one that was freed "
                "(or whose context was closed)"
            )
        return self._handle

    def _as_out(self, ctx: object) -> None:
        """Checks the array can take a result of a call on ``ctx`` (``out=``)."""
        self._live("out", ctx)

    def numpy(self) -> npt.NDArray[np.float32]:
        """Gathers every row into a new float32 array, each shard straight from its device."""
        handle = self._live("x", self._ctx)
        out = _native.resident_gather(self._ctx._native, handle)
        return out.reshape(self._shape)

    def __getitem__(self, key: Any) -> DeviceArray:
        return array_ops.take(self, key)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return array_ops.ufunc(self, ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return array_ops.refuse_function(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        # numpy 2 protocol: the data is on the devices, so any array is a copy.
        if copy is False:
            raise ValueError(
                "a DeviceArray cannot be viewed without a copy: its rows are on devices"
            )
        out = self.numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def free(self) -> None:
        """Releases the shards now; using the array afterwards raises InvalidArgumentError."""
        self._handle.free()

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Without this, pickle (and deepcopy) would fail on the context with a message that
        # names neither the DeviceArray nor what to do instead.
        raise TypeError(
            "DeviceArray cannot be pickled or deep-copied: its rows live on the devices of "
            "one context; gather them with .numpy() (and ctx.asarray() them again)"
        )

    def __repr__(self) -> str:
        if self.freed:
            return f"DeviceArray(shape={shape_text(self._shape)}, dtype=float32, freed)"
        return (
            f"DeviceArray(shape={shape_text(self._shape)}, dtype=float32, sharding={self.sharding})"
        )


def _rows_of(shape: tuple[int, ...]) -> tuple[int, int]:
    # A 0-d result (scalar_product of two single multivectors) is one row of one word.
    if not shape:
        return (1, 1)
    return (shape[0], 1) if len(shape) == 1 else (math.prod(shape[:-1]), shape[-1])


class ResidentMixin(KernelHost):
    """``asarray`` of ``MultiGpuContext``."""

    _array_class = DeviceArray

    def asarray(self, x: Any, strategy: str | None = None) -> DeviceArray:
        """Uploads ``x`` (any real dtype, converted to float32 like every kernel input; at
        least one axis) into row shards placed by ``strategy`` (default: the context's).
        Rows are the first axis of a 1-D array, else every axis but the last. Keeps a host
        copy of the float32 rows to rebuild shards lost with a device."""
        if isinstance(x, DeviceArray):
            x._live("x", self)
            return x
        flat, shape = host_rows(x)
        handle = _native.resident_upload(self._native, flat, optional_strategy(strategy))
        return DeviceArray(handle, self, shape)


def host_rows(x: Any) -> tuple[npt.NDArray[np.float32], tuple[int, ...]]:
    """``x`` as ``asarray`` takes it (any real dtype, at least one axis, rows of at least
    one element): its float32 rows (``_rows_of``) and its shape."""
    array = real_array("x", x)
    if array.ndim == 0:
        raise ShapeError("x: expected an array with at least one axis, got a scalar")
    rows, cols = _rows_of(array.shape)
    if cols == 0:
        raise ShapeError(
            f"x: expected rows of at least one element, got shape {shape_text(array.shape)}"
        )
    return as_float32("x", array.reshape(rows, cols)), tuple(array.shape)


def returned(
    ctx: Any, result: Any, target: Any, shape: tuple[int, ...]
) -> npt.NDArray[np.float32] | DeviceArray:
    """What an operation returns, by one rule: the caller's ``out`` (``target``) when given,
    else a resident result as a new DeviceArray of ``shape``, else the numpy result in
    ``shape``."""
    if target is not None:
        return cast("npt.NDArray[np.float32] | DeviceArray", target)
    if not isinstance(result, np.ndarray):
        # A native handle (a RayContext's cluster handle): the context's array type.
        return ctx._array_class(result, ctx, shape)  # type: ignore[no-any-return]
    return cast("npt.NDArray[np.float32]", result).reshape(shape)
