"""Users' own row kernels: ``map_rows`` runs a WGSL function ``row`` over the rows of arrays
on every GPU device of the context.

The package wraps ``fn row(a: array<f32, Ca>, b: array<f32, Cb>, ...) -> array<f32, K>``
into a compute shader (one thread per row, bounds checked, a 2-D dispatch grid for large
N), checks it with naga before any device sees it, caches the pipeline per device, and
splits the rows over the devices like any built-in map kernel. The rows run only on the wgpu
devices of one driver (that of the context's first wgpu device), so results are the same
bits for any device count and strategy. The host CPU device cannot run WGSL and takes no
rows.

The rows keep their dtype as numpy would (the package's rule, :mod:`amari_gpu._dtypes`):
float32 rows give ``array<f32, C>`` to ``row``, float64 rows ``array<f64, C>`` (planned only
on devices with ``SHADER_F64``; lavapipe has it, llvmpipe GL does not). The wrapper declares
``alias amari_float = f32;`` (or ``f64``): a kernel written with ``amari_float`` runs in
either dtype unchanged.

With DeviceArray operands the kernel runs where their rows live (numpy operands are uploaded
to match; a ``(C,)`` one once to each device) and the result is a DeviceArray; rows held by
the host device are computed on a wgpu device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _native
from ._dtypes import FLOAT32, FLOAT64, resident_dtype, result_dtype
from ._mixin import KernelHost
from ._validate import contiguous, output, positive_int, real_array
from .array import DeviceArray, returned
from .errors import InvalidArgumentError
from .planning import optional_strategy

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _params(value: Any) -> list[tuple[str, float]]:
    """``params`` as (name, float32 value) pairs, in the mapping's order."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"params: expected a mapping of names to numbers or None, got {type(value).__name__}"
        )
    pairs = []
    for name, number in value.items():
        if not isinstance(name, str):
            raise InvalidArgumentError(f"params: expected str names, got {name!r}")
        if isinstance(number, bool) or not isinstance(
            number, (int, float, np.integer, np.floating)
        ):
            raise InvalidArgumentError(f"params[{name!r}]: expected a real number, got {number!r}")
        as_float = float(number)
        if math.isfinite(as_float) and abs(as_float) > _FLOAT32_MAX:
            raise InvalidArgumentError(
                f"params[{name!r}]: expected a value within float32's range, got {number!r}"
            )
        pairs.append((name, float(np.float32(as_float))))
    return pairs


class RowsMixin(KernelHost):
    """``map_rows`` of ``MultiGpuContext``."""

    def map_rows(
        self,
        source: str,
        *arrays: Any,
        out_cols: int,
        params: Mapping[str, float] | None = None,
        strategy: str | None = None,
        out: npt.NDArray[np.float32 | np.float64] | DeviceArray | None = None,
        dtype: npt.DTypeLike | None = None,
    ) -> npt.NDArray[np.float32 | np.float64] | DeviceArray:
        """Runs the WGSL function ``row`` of ``source`` on every row of ``arrays``.

        The rows run on the wgpu devices of the driver of the context's first wgpu device
        only: another driver may round ``length``, ``dot``, ``exp``... differently. The host
        CPU device cannot run WGSL: it takes no rows. The profiler names the kernel
        ``map_rows/<hash of the generated shader>``.

        A :class:`DeviceArray` ``(N, C)`` operand makes the call run where its rows live
        and return a DeviceArray ``(N, out_cols)`` with its sharding (numpy operands,
        ``(N, C)`` or ``(C,)``, are uploaded to match).

        Args:
            source: WGSL defining ``fn row(a: array<T, Ca>, b: array<T, Cb>, ...) ->
                array<T, out_cols>``, one parameter per array in order (helper functions,
                constants, structs and ``var<private>``s beside it are fine). ``T`` is the
                rows' element type: ``f32`` for float32 rows, ``f64`` for float64 ones; the
                wrapper declares ``amari_float`` as that type, so ``array<amari_float, C>``
                fits both.
            arrays: each ``(N, C)`` (row i is passed for item i) or ``(C,)`` (the same row
                for every item); the ``(N, C)`` arrays share N. Any real dtype, or
                DeviceArrays ``(N, C)`` (float32 or float64).
            out_cols: columns of the result (``row``'s array length).
            params: names (WGSL identifiers, not starting with ``amari_``) to numbers,
                readable in WGSL as ``params.NAME`` (float32).
            strategy: how the rows are split (one of ``STRATEGIES``); default the context's.
            out: as for every kernel; with DeviceArray operands also a DeviceArray of the
                result's shape (the result replaces its shards; it is returned), or a numpy
                array the result is gathered into.
            dtype: what the rows hold and ``row`` computes in, overriding the promotion:
                ``np.float32`` or ``np.float64``. Default numpy's promotion of the arrays'
                dtypes: float64 stays float64, integers and bools become float64, float16
                becomes float32; a DeviceArray operand counts with its dtype and must
                hold the one computed in.

        Returns:
            ``(N, out_cols)`` of the rows' dtype, or ``(out_cols,)`` when every array is
            ``(C,)``; a DeviceArray with a DeviceArray operand.

        Raises:
            KernelCompileError: a WGSL error (line and column in ``source``, naga's text); a
                ``row`` that is missing, takes other parameters than ``array<T, C>`` per
                array, or returns other than ``array<T, out_cols>`` (``T`` the rows' type);
                a kernel that declares its own resources, ``var<workgroup>``, ``override``s
                or entry points, or over 16 KiB of private memory per row (8 bytes per
                float64 value); a driver that refuses it; loops that ran past Mesa's cap of
                65,535 iterations per invocation (llvmpipe, lavapipe: no result is
                returned). No device is marked unhealthy.
            ShapeError: the ``(N, C)`` arrays' rows differ.
            InvalidArgumentError: bad ``params``, ``out_cols`` or ``dtype``, a context whose
                only device is the host, or float64 rows in a context without a wgpu device
                that has ``SHADER_F64`` (before any work).
            TypeError: an array of a dtype that is not real, or ``out`` not of the rows'
                dtype.
            DeviceLostError: none of that driver's devices is healthy.
        """
        if not isinstance(source, str):
            raise TypeError(f"source: expected WGSL text (str), got {type(source).__name__}")
        cols = positive_int("out_cols", out_cols)
        pairs = _params(params)
        resident = any(isinstance(value, DeviceArray) for value in arrays)
        kept = _kept(arrays, dtype, resident)
        operands = [_operand(self, f"arrays[{k}]", value, kept) for k, value in enumerate(arrays)]
        rows = next((shape[0] for _, shape in operands if len(shape) == 2), None)
        shape = (cols,) if rows is None else (rows, cols)
        inputs = {f"arrays[{k}]": v for k, v in enumerate(arrays)}
        target = output(out, shape, kept, inputs, resident=self if resident else None)
        spec: _native.RowsSpec = {
            "source": source,
            "out_cols": cols,
            "params": pairs,
            "dtype": kept.name,
        }
        native_out = target._handle if isinstance(target, DeviceArray) else target
        if isinstance(native_out, np.ndarray):
            native_out = native_out.reshape(-1, cols)
        result, plan = self._kernels.map_rows(
            self._native, spec, operands, optional_strategy(strategy), native_out
        )
        self._record(plan)
        return returned(self, result, target, shape)


def _kept(arrays: tuple[Any, ...], dtype: Any, resident: bool) -> np.dtype[Any]:
    """The dtype the rows hold and ``row`` computes in: the package's rule over float32 and
    float64, DeviceArray operands holding that dtype."""
    named = [(f"arrays[{k}]", value) for k, value in enumerate(arrays)]
    if resident:
        return resident_dtype(named, dtype, (FLOAT32, FLOAT64), "map_rows", DeviceArray)
    return result_dtype(named, dtype, (FLOAT32, FLOAT64))


def _operand(ctx: Any, name: str, value: Any, kept: np.dtype[Any]) -> tuple[Any, tuple[int, ...]]:
    """``value`` as ``map_rows`` takes it, with its shape: a live DeviceArray's handle, else
    an array of ``kept`` (the core checks both)."""
    if isinstance(value, DeviceArray):
        return value._live(name, ctx), value.shape
    array = contiguous(name, real_array(name, value), kept)
    return array, array.shape
