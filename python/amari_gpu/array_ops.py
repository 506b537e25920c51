"""What makes a :class:`~amari_gpu.array.DeviceArray` act like an array: row indexing (a
resident copy of the rows, on the devices holding them), elementwise arithmetic and numpy
ufuncs computed where the rows live, and numpy functions that would gather every row
refused, naming ``np.asarray(x)`` as the explicit way home.

The ufuncs computed on the devices are numpy's ones of the array's dtype (float16, float32
or float64), bit for bit: ``+ - * /``, the six comparisons, ``negative``, ``absolute`` and
``sqrt`` (one IEEE operation per value, float16 computed in float32 and rounded once as
numpy does, see ``rust/amari-gpu/src/elementwise/``). Operands promote as numpy 2 does (a
Python scalar takes the array's dtype); a promotion to another dtype than the DeviceArray's
is refused, naming the dtype numpy would compute in. Others (``exp``, ``log``, ``sin``...) are
refused: WGSL leaves their last bits to the driver, so they would not match numpy.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ._validate import shape_text
from .errors import InvalidArgumentError, ShapeError

if TYPE_CHECKING:
    from .array import DeviceArray

ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide"})
COMPARISONS = frozenset({"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"})
UNARY = frozenset({"negative", "absolute", "sqrt"})

# numpy functions answered from the shape alone (nothing gathered).
_SHAPE_FUNCTIONS = {"shape": lambda x: x.shape, "ndim": lambda x: x.ndim, "size": lambda x: x.size}


def _home(what: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{what}; gather the rows explicitly with np.asarray(x) (one copy to the host) and "
        "call numpy on that"
    )


def refuse_function(func: Any, args: Any, kwargs: Any) -> Any:
    """``__array_function__``: the shape queries answered, every other numpy function refused
    (computing it would gather every row to the host without saying so)."""
    name = getattr(func, "__name__", repr(func))
    if name in _SHAPE_FUNCTIONS and len(args) == 1 and not kwargs:
        return _SHAPE_FUNCTIONS[name](args[0])
    raise _home(
        f"np.{name} is not computed on a DeviceArray's devices: it would gather every row "
        "to the host behind your back"
    )


def _kernels(x: DeviceArray) -> Any:
    """The kernel entry points of ``x``'s context type (the native module; a RayContext's
    cluster dispatch): indexing and arithmetic run where its rows live, by these rules."""
    return type(x._ctx)._kernels


def take(x: DeviceArray, key: Any) -> DeviceArray:
    """``x[key]`` for an integer (negative too) or a slice with step 1 over the first axis:
    a new DeviceArray holding a copy of those rows on the devices that hold them."""
    if isinstance(key, tuple):
        if len(key) != 1:
            raise InvalidArgumentError(
                f"key: expected an integer or a slice of the first axis (rows only), got a "
                f"{len(key)}-part index {key!r}; gather with np.asarray(x) for other indexing"
            )
        key = key[0]
    if not x.shape:
        raise IndexError("too many indices for array: a 0-d DeviceArray has no rows to index")
    n = x.shape[0]
    # DeviceArray rows in `asarray`'s layout per index of the first axis.
    per = math.prod(x.shape[1:-1]) if x.ndim >= 2 else 1
    cols = None
    if isinstance(key, slice):
        start, stop, step = key.indices(n)
        if step != 1:
            raise InvalidArgumentError(
                f"key: expected a slice with step 1, got step {step}; a strided slice would "
                "copy its rows one by one: take np.asarray(x)[a:b:step] and ctx.asarray() it"
            )
        stop = max(start, stop)
        shape = (stop - start, *x.shape[1:])
    elif isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
        raise InvalidArgumentError(
            f"key: expected an integer or a slice of the first axis (rows only), got "
            f"{type(key).__name__}; gather with np.asarray(x) for other indexing"
        )
    else:
        index = operator.index(key)
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of bounds for axis 0 with size {n}")
        start = index % n
        stop = start + 1
        shape = x.shape[1:]
        # A row of a 2-D array is a 1-D array: its values become rows of one value.
        if x.ndim == 2:
            if x.dtype.itemsize < 4:
                raise InvalidArgumentError(
                    f"key: x[{index}] of a 2-D {x.dtype} DeviceArray would be a 1-D one, whose "
                    "rows of one value DeviceArrays do not hold (two float16 values to a "
                    f"word); take x[{index}:{index + 1}] (a 2-D array of one row)"
                )
            cols = x.dtype.itemsize // 4
    handle = x._live("x", x._ctx)
    rows = _kernels(x).resident_rows(x._ctx._native, handle, start * per, stop * per, cols)
    return type(x)(rows, x._ctx, shape)


def ufunc(x: DeviceArray, func: np.ufunc, method: str, inputs: Any, kwargs: Any) -> Any:
    """``__array_ufunc__``: the ufuncs computed on the devices, bit for bit numpy's results
    in the DeviceArray's dtype; a comparison's 1.0/0.0 values come home as numpy's bool
    array."""
    name = func.__name__
    if method != "__call__":
        raise _home(f"np.{name}.{method} is not computed on a DeviceArray's devices")
    if name not in ARITHMETIC | COMPARISONS | UNARY:
        raise _home(
            f"np.{name} is not computed on a DeviceArray's devices (on them: + - * /, the "
            "comparisons, negative, absolute and sqrt; transcendental functions round "
            "differently on each driver, so they would not match numpy's bits)"
        )
    out = kwargs.pop("out", None)
    if kwargs:
        raise InvalidArgumentError(
            f"np.{name}: {', '.join(sorted(kwargs))} is not supported on a DeviceArray (only out=)"
        )
    # Any DeviceArray (a RayContext's ClusterArray too), so that one of another context
    # is refused below rather than gathered as a host operand.
    devices = [v for v in inputs if hasattr(v, "_live")]
    if not devices:
        raise InvalidArgumentError(
            f"out: np.{name} of numpy operands cannot write into a DeviceArray; "
            "ctx.asarray() an operand first"
        )
    first = devices[0]
    ctx = first._ctx
    for v in devices:
        v._live("x", ctx)
    if name in UNARY:
        b, swap = None, False
    elif len(devices) == 2:
        if inputs[0].shape != inputs[1].shape:
            raise ShapeError(
                f"np.{name}: expected two DeviceArrays of one shape (they do not broadcast), "
                f"got {shape_text(inputs[0].shape)} and {shape_text(inputs[1].shape)}"
            )
        if inputs[0].dtype != inputs[1].dtype:
            wide = np.result_type(inputs[0].dtype, inputs[1].dtype)
            raise InvalidArgumentError(
                f"np.{name}: expected two DeviceArrays of one dtype, got {inputs[0].dtype} and "
                f"{inputs[1].dtype}; numpy would compute in {wide}, and DeviceArrays are not "
                f"converted on the devices: ctx.asarray(np.asarray(x), dtype=numpy.{wide}) "
                "the narrower one"
            )
        b, swap = inputs[1]._handle, False
    else:
        swap = inputs[1] is first
        b = _operand(name, first, inputs[0] if swap else inputs[1])
    target = _out(name, type(x), ctx, first, out)
    result = _kernels(first).elementwise(ctx._native, name, first._handle, b, swap, target)
    if target is not None:
        return out[0]
    array = type(x)(result, ctx, first.shape)
    if name not in COMPARISONS:
        return array
    try:
        return array.numpy() != 0
    finally:
        array.free()


def _operand(name: str, x: DeviceArray, value: Any) -> np.ndarray[Any, Any]:
    """The host operand of DeviceArray ``x`` as the native call takes it, in ``x``'s dtype:
    one value ``(1, 1)`` (float16: ``(1, 2)``, the value twice, filling a word), one row
    ``(1, C)`` or every row ``(N, C)``, after numpy 2's promotion rules (a Python scalar
    takes ``x``'s dtype; anything numpy would compute in another dtype is refused)."""
    shape, dtype = x.shape, x.dtype
    scalar = (1, 2) if dtype.itemsize == 2 else (1, 1)
    if type(value) in (bool, int, float):  # np.float64 is a float too, but numpy keeps it strong
        # NEP 50: a Python number takes the array's dtype, rounded once.
        with np.errstate(over="ignore"):
            return np.full(scalar, value, dtype=dtype)
    array = np.asarray(value)
    wide = np.result_type(dtype, array.dtype) if array.dtype.kind in "biuf" else None
    if wide != dtype:
        raise InvalidArgumentError(
            f"np.{name}: expected a {dtype} operand (or one numpy computes with {dtype} "
            f"unchanged: a Python number, or a narrower dtype), got {array.dtype}; numpy would "
            f"compute in {wide}, and this DeviceArray holds {dtype}: convert the operand with "
            f".astype(numpy.{dtype}), upload x in {wide} (ctx.asarray(x, dtype=...)), or "
            "gather with np.asarray(x)"
        )
    try:
        broadcast = np.broadcast_shapes(shape, array.shape)
    except ValueError:
        broadcast = None
    if broadcast != shape:
        raise ShapeError(
            f"np.{name}: expected an operand that broadcasts to the DeviceArray's shape "
            f"{shape_text(shape)} (a DeviceArray is not broadcast itself), got "
            f"{shape_text(array.shape)}"
        )
    values = array.astype(dtype)
    if values.size == 1:
        return np.full(scalar, values.reshape(()), dtype=dtype)
    lead = (1,) * (len(shape) - array.ndim) + array.shape
    if len(shape) >= 2 and all(d == 1 for d in lead[:-1]):
        return np.ascontiguousarray(np.broadcast_to(values.reshape(-1), shape[-1:])).reshape(1, -1)
    rows = shape[0] if len(shape) == 1 else math.prod(shape[:-1])
    return np.ascontiguousarray(np.broadcast_to(values, shape)).reshape(rows, -1)


def _out(name: str, cls: type[DeviceArray], ctx: Any, x: DeviceArray, out: Any) -> Any:
    """The native handle of a ufunc's ``out=`` (numpy passes it as a tuple), or None: a
    DeviceArray of ``x``'s shape and dtype."""
    shape = x.shape
    if out is None:
        return None
    given = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if name in COMPARISONS:
        raise InvalidArgumentError(
            f"out: np.{name} gives a numpy bool array, so it takes no out=; got "
            f"{type(given).__name__}"
        )
    if not isinstance(given, cls):
        raise InvalidArgumentError(
            f"out: expected a DeviceArray of shape {shape_text(shape)} (the result stays on "
            f"the devices), got {type(given).__name__}"
        )
    if given.shape != shape:
        raise ShapeError(
            f"out: expected shape {shape_text(shape)} (the result's), got {shape_text(given.shape)}"
        )
    if given.dtype != x.dtype:
        raise TypeError(f"out: expected dtype {x.dtype} (the result's), got {given.dtype}")
    return given._live("out", ctx)
