"""Device-resident arrays: ``ctx.asarray(x)`` uploads rows into shards over the context's
devices, kernels run where the rows live, ``numpy()`` (or ``np.asarray``) gathers.

A :class:`DeviceArray` is rows of float16, float32 or float64 values (its ``dtype``): shape
``(N,)``, ``(N, C)`` or ``(..., C)`` (the leading axes are the rows). Its ``sharding`` says
which device holds which rows; float64 and float16 rows live only on devices that compute in
that dtype. What ``asarray`` keeps of the source: a host copy of the rows (``nbytes`` of host
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
from ._dtypes import FLOAT16, KEPT, result_dtype
from ._mixin import KernelHost
from ._validate import contiguous, real_array, shape_text
from .errors import InvalidArgumentError, ShapeError
from .planning import optional_strategy


class DeviceArray(NDArrayOperatorsMixin):
    """Rows of float16, float32 or float64 values held on a context's devices. Create with
    ``ctx.asarray(x)`` (which keeps ``x``'s dtype, as numpy does); the context's methods
    take them and return them in the dtype they computed in. Released by :meth:`free`, when
    garbage-collected and when the context closes.

    Acts like an array where that keeps the rows on the devices (``array_ops``): ``x[i]``
    and ``x[a:b]`` are new DeviceArrays holding a copy of those rows; ``+ - * /``, the
    comparisons and ``np.negative``/``np.abs``/``np.sqrt`` run where the rows live (a
    comparison gives numpy's bool array); other numpy functions (``np.sum``...) are refused,
    ``np.asarray(x)`` being the explicit way home."""

    __slots__ = ("__weakref__", "_ctx", "_dtype", "_handle", "_shape")

    def __init__(self, handle: _native.DeviceArray, ctx: Any, shape: tuple[int, ...]) -> None:
        self._handle = handle
        self._ctx = ctx
        self._shape = shape
        # The handle knows the dtype of its values (a RayContext's holds float32).
        self._dtype: np.dtype[Any] = np.dtype(getattr(handle, "dtype", "float32"))

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return self._shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of its values: float16, float32 or float64."""
        return self._dtype

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
        return self._dtype.itemsize * self.size

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

    def numpy(self) -> npt.NDArray[Any]:
        """Gathers every row into a new array of its dtype, each shard straight from its
        device."""
        handle = self._live("x", self._ctx)
        # The devices' words, seen as the values they hold (their bits unchanged).
        out = _native.resident_gather(self._ctx._native, handle)
        return out.view(self._dtype).reshape(self._shape)

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
        head = f"DeviceArray(shape={shape_text(self._shape)}, dtype={self._dtype}"
        if self.freed:
            return f"{head}, freed)"
        return f"{head}, sharding={self.sharding})"


def _rows_of(shape: tuple[int, ...]) -> tuple[int, int]:
    # A 0-d result (scalar_product of two single multivectors) is one row of one word.
    if not shape:
        return (1, 1)
    return (shape[0], 1) if len(shape) == 1 else (math.prod(shape[:-1]), shape[-1])


class ResidentMixin(KernelHost):
    """``asarray`` of ``MultiGpuContext``."""

    _array_class = DeviceArray

    def asarray(self, x: Any, dtype: Any = None, strategy: str | None = None) -> DeviceArray:
        """Uploads ``x`` (at least one axis) into row shards placed by ``strategy`` (default:
        the context's), keeping its dtype as numpy does: float16, float32 and float64 kept,
        bool and integers as float64, ``dtype=`` (float16, float32 or float64) overriding.
        Rows are the first axis of a 1-D array, else every axis but the last; float16 rows
        hold an even number of values (two to a 4-byte word on the devices). float64 and
        float16 rows go only to devices that compute in that dtype: ``last_plan`` is the
        placement, its ``left_out`` naming the devices skipped and why; a context with none
        refuses (``InvalidArgumentError`` naming them). Keeps a host copy of the rows to
        rebuild shards lost with a device."""
        if isinstance(x, DeviceArray):
            return kept_array(self, x, dtype)
        words, shape, kept = host_rows(x, dtype)
        handle = _native.resident_upload(
            self._native, words, optional_strategy(strategy), kept.name
        )
        self._record(handle.placement)
        return DeviceArray(handle, self, shape)


def kept_array(ctx: Any, x: DeviceArray, dtype: Any) -> DeviceArray:
    """``asarray`` of a DeviceArray: ``x`` itself, once it is live, of context ``ctx`` and of
    the dtype ``dtype`` asks for (DeviceArrays are not converted on the devices)."""
    x._live("x", ctx)
    want = result_dtype([("x", x)], dtype, KEPT)
    if want != x.dtype:
        raise InvalidArgumentError(
            f"dtype: x is a {x.dtype} DeviceArray and DeviceArrays are not converted "
            f"on the devices, got dtype={want}; gather it (np.asarray(x)) and "
            "asarray that with the dtype"
        )
    return x


def host_rows(x: Any, dtype: Any = None) -> tuple[npt.NDArray[np.float32], tuple[int, ...], Any]:
    """``x`` as ``asarray`` takes it (a real dtype, at least one axis, rows of at least one
    element; ``dtype``: see ``asarray``): its rows (``_rows_of``) in the kept dtype as the
    devices' 4-byte words (two per float64 value, two float16 values per word), its shape
    and that dtype."""
    array = real_array("x", x)
    kept = result_dtype([("x", array)], dtype, KEPT)
    if array.ndim == 0:
        raise ShapeError("x: expected an array with at least one axis, got a scalar")
    rows, cols = _rows_of(array.shape)
    if cols == 0:
        raise ShapeError(
            f"x: expected rows of at least one element, got shape {shape_text(array.shape)}"
        )
    if kept == FLOAT16 and cols % 2:
        raise ShapeError(
            f"x: expected float16 rows of an even number of values (two to a 4-byte word on "
            f"the devices; a 1-D array is rows of one value), got shape "
            f"{shape_text(array.shape)}; pass dtype=numpy.float32, or pad the last axis"
        )
    values = contiguous("x", array.reshape(rows, cols), kept)
    return values.view(np.float32), tuple(array.shape), kept


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
