"""Users' own row kernels: ``map_rows`` runs a WGSL function ``row`` over the rows of arrays
on every GPU device of the context.

The package wraps ``fn row(a: array<f32, Ca>, b: array<f32, Cb>, ...) -> array<f32, K>``
into a compute shader (one thread per row, bounds checked, a 2-D dispatch grid for large
N), checks it with naga before any device sees it, caches the pipeline per device, and
splits the rows over the devices like any built-in map kernel. The rows run only on the wgpu
devices of one driver (that of the context's first wgpu device), so results are the same
bits for any device count and strategy. The host CPU device cannot run WGSL and takes no
rows.

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
from ._mixin import KernelHost
from ._validate import as_float32, output, positive_int, shape_text
from .array import DeviceArray, finish_resident, is_resident
from .errors import InvalidArgumentError, ShapeError
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
        out: npt.NDArray[np.float32] | DeviceArray | None = None,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """Runs the WGSL function ``row`` of ``source`` on every row of ``arrays``.

        ``source`` defines ``fn row(a: array<f32, Ca>, b: array<f32, Cb>, ...) ->
        array<f32, out_cols>``, one parameter per array in order (helper functions and
        constants beside it are fine). Each array is ``(N, C)`` (row i is passed for item i)
        or ``(C,)`` (the same row for every item); the ``(N, C)`` arrays share N. Any real
        dtype is converted to float32. ``params`` maps names to numbers, readable in WGSL as
        ``params.NAME`` (float32). Returns float32 ``(N, out_cols)``, or ``(out_cols,)``
        when every array is ``(C,)``; ``out=`` as for every kernel.

        A :class:`DeviceArray` ``(N, C)`` operand makes the call run where its rows live
        and return a DeviceArray ``(N, out_cols)`` with its sharding (numpy operands,
        ``(N, C)`` or ``(C,)``, are uploaded to match). ``out=`` may then be a DeviceArray
        of the result's shape (the result replaces its shards; it is returned) or a numpy
        array (the result is gathered into it).

        A WGSL error raises :class:`KernelCompileError` with the line and column in
        ``source`` and naga's text; so does a ``row`` that is missing, takes other
        parameters than ``array<f32, C>`` per array, or returns other than
        ``array<f32, out_cols>`` (the message says which), a kernel that declares its own
        resources, ``var<workgroup>``, ``override``s or entry points, or over 16 KiB of
        private memory per row, and a call whose loops ran past Mesa's cap of 65,535
        iterations per invocation (llvmpipe, lavapipe: no result is returned). The profiler
        names the kernel ``map_rows/<hash of the generated shader>``.

        The rows run on the wgpu devices of the driver of the context's first wgpu device
        only: another driver may round ``length``, ``dot``, ``exp``... differently.

        The host CPU device cannot run WGSL: it takes no rows, and a context whose only
        device is the host raises :class:`InvalidArgumentError` before any work.
        """
        if not isinstance(source, str):
            raise TypeError(f"source: expected WGSL text (str), got {type(source).__name__}")
        if not arrays:
            raise InvalidArgumentError("arrays: expected at least one array, got none")
        cols = positive_int("out_cols", out_cols)
        pairs = _params(params)
        if is_resident(*arrays):
            return self._map_rows_resident(source, arrays, cols, pairs, out)
        converted = []
        rows: tuple[int, int] | None = None
        for k, value in enumerate(arrays):
            array = as_float32(f"arrays[{k}]", value)
            if array.ndim not in (1, 2) or array.shape[-1] == 0:
                raise ShapeError(
                    f"arrays[{k}]: expected shape (N, C) or (C,) with C >= 1, "
                    f"got {shape_text(array.shape)}"
                )
            if array.ndim == 2:
                if rows is not None and array.shape[0] != rows[1]:
                    raise ShapeError(
                        f"arrays[{k}]: expected {rows[1]} rows like arrays[{rows[0]}], "
                        f"got shape {shape_text(array.shape)}"
                    )
                rows = rows or (k, array.shape[0])
                converted.append((array, False))
            else:
                converted.append((array.reshape(1, -1), True))
        shape = (cols,) if rows is None else (rows[1], cols)
        inputs = {f"arrays[{k}]": v for k, v in enumerate(arrays)}
        target = output(out, shape, np.float32, inputs)
        spec: _native.RowsSpec = {"source": source, "out_cols": cols, "params": pairs}
        result, plan = _native.map_rows(
            self._native,
            spec,
            converted,
            optional_strategy(strategy),
            None if target is None else target.reshape(-1, cols),
        )
        self._record(plan)
        if target is not None:
            return target
        return result.reshape(shape)

    def _map_rows_resident(
        self,
        source: str,
        arrays: tuple[Any, ...],
        cols: int,
        pairs: list[tuple[str, float]],
        out: Any,
    ) -> npt.NDArray[np.float32] | DeviceArray:
        """``map_rows`` with at least one DeviceArray operand: run where its rows live."""
        operands: list[tuple[Any, bool]] = []
        rows: tuple[int, int] | None = None
        for k, value in enumerate(arrays):
            name = f"arrays[{k}]"
            if isinstance(value, DeviceArray):
                handle = value._live(name, self)
                if value.ndim != 2 or value.shape[-1] == 0:
                    raise ShapeError(
                        f"{name}: expected a DeviceArray of shape (N, C) with C >= 1 (a (C,) "
                        f"row for every item is passed as a numpy array), got "
                        f"{shape_text(value.shape)}"
                    )
                operand: Any = handle
                n: int | None = value.shape[0]
                broadcast = False
            else:
                array = as_float32(name, value)
                if array.ndim not in (1, 2) or array.shape[-1] == 0:
                    raise ShapeError(
                        f"{name}: expected shape (N, C) or (C,) with C >= 1, "
                        f"got {shape_text(array.shape)}"
                    )
                broadcast = array.ndim == 1
                n = None if broadcast else array.shape[0]
                operand = array.reshape(1, -1) if broadcast else array
            if n is not None:
                if rows is not None and n != rows[1]:
                    raise ShapeError(
                        f"{name}: expected {rows[1]} rows like arrays[{rows[0]}], "
                        f"got shape {shape_text(value.shape)}"
                    )
                rows = rows or (k, n)
            operands.append((operand, broadcast))
        assert rows is not None  # a DeviceArray operand is (N, C)
        shape = (rows[1], cols)
        inputs = {f"arrays[{k}]": v for k, v in enumerate(arrays)}
        target = output(out, shape, np.float32, inputs, resident=self)
        spec: _native.RowsSpec = {"source": source, "out_cols": cols, "params": pairs}
        if isinstance(target, DeviceArray):
            _native.resident_map_rows(self._native, spec, operands, target._handle)
            return target
        made = _native.resident_map_rows(self._native, spec, operands)
        assert made is not None  # a new array when no out is given
        return finish_resident(self, made, shape, target)
