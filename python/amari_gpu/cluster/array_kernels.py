"""The kernel entry points of a ``RayContext`` when an operand is a cluster array: each
shard's rows run on the node that holds them with the native kernel of the same name
(on that node's local DeviceArray), and the result is a cluster array with the same
shards; ``out`` a cluster array takes the result's shards, a numpy one gets it gathered.

An error a node's core finds in its shard (a NaN in ``probs``...) names the shard's rows;
the driver then gathers the operands and runs the core's check of the whole call, so the
caller sees the error a single context gives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .array import ClusterHandle, Lineage, Rows, ShardShape, Whole, upload
from .dispatch import ARGUMENT_ERRORS, Dispatcher
from .resident import gather, run, take


def resident(*values: Any) -> bool:
    """Whether a call has a cluster array among ``values`` (then it runs where it lives)."""
    return any(isinstance(v, ClusterHandle) for v in values)


def _operand(value: Any) -> Any:
    """An operand as the result's lineage keeps it: a cluster array's lineage (not its
    shards), or a copy of a numpy operand (the caller may change theirs afterwards; a shard
    made again must see the rows the call saw), as a local DeviceArray's lineage does."""
    return value.lineage if isinstance(value, ClusterHandle) else np.array(value, copy=True)


def call(
    ctx: Dispatcher,
    method: str,
    template: tuple[Any, ...],
    operands: list[Any],
    out: Any,
    recheck: Callable[[list[Any]], None] | None = None,
) -> tuple[Any, None]:
    """``method`` run where the rows of its first cluster-array operand live: ``template``
    its arguments after the context (``Rows``, ``Whole``, ``ShardShape`` markers over
    ``operands``); ``recheck``, given the operands with cluster arrays gathered, raises the
    whole call's error when a node found one in its shard."""
    primary = next(v for v in operands if isinstance(v, ClusterHandle))
    rows = primary.rows
    # The result's dtype is the node's answer; until then (and for no rows, which no
    # node computes) the operand's, which every kernel on a cluster array keeps.
    lin = Lineage(
        rows,
        0,
        method=method,
        template=template,
        operands=[_operand(v) for v in operands],
        dtype=primary.dtype,
    )
    try:
        result = run(ctx, lin, primary.lineage)
    except ARGUMENT_ERRORS:
        if recheck is not None:
            recheck([gather(v) if isinstance(v, ClusterHandle) else v for v in operands])
        raise
    return _placed(ctx, result, out)


def _placed(_ctx: Dispatcher, result: ClusterHandle, out: Any) -> tuple[Any, None]:
    """``result`` as the call returns it: taken by a cluster-array ``out``, gathered into
    a numpy one, else itself."""
    if isinstance(out, ClusterHandle):
        out.adopt(result)
        return out, None
    if isinstance(out, np.ndarray):
        if result.rows:
            out.reshape(result.rows, -1)[...] = gather(result)
        result.free()
        return out, None
    return result, None


def ga_apply(
    ctx: Dispatcher,
    operation: str,
    signature: tuple[int, int, int],
    operands: list[Any],
    grades: int | tuple[int, ...],
    out: Any,
) -> tuple[Any, None]:
    """``ga_apply`` with cluster-array operands (checked by the family method): numpy
    operands of one row are bound whole to every shard, others sent by rows."""
    items = max(v.rows if isinstance(v, ClusterHandle) else len(v) for v in operands)
    slots = [
        Whole(i) if not isinstance(v, ClusterHandle) and len(v) == 1 and items != 1 else Rows(i)
        for i, v in enumerate(operands)
    ]
    template = (operation, signature, slots, grades, None, None)
    return call(ctx, "ga_apply", template, list(operands), out)


def tropical(
    ctx: Dispatcher,
    kernel: str,
    a: ClusterHandle,
    other: Any,
    semiring: str,
    out: Any,
    a_shape: tuple[int, ...],
    numpy_run: Callable[[Any], Any],
) -> tuple[Any, None]:
    """``tropical_matmul`` or ``tropical_matvec`` of a cluster array ``a`` of ``(m, k)``
    rows, each shard's rows on its node. A batch ``(batch, m, k)`` is gathered and run by
    ``numpy_run`` (the cluster's numpy path: its chunks are whole entries of the batch),
    its result put back on the nodes."""
    from .. import _native

    def recheck(values: list[Any]) -> None:
        getattr(_native, f"check_{kernel}")(values[0].reshape(a_shape), values[1], semiring)

    if len(a_shape) != 2:
        result = numpy_run(gather(a).reshape(a_shape))
        flat = np.ascontiguousarray(result.reshape(-1, result.shape[-1]))
        return _placed(ctx, upload(ctx, flat)[0], out)
    template = (Rows(0), Whole(1), semiring, None, None, ShardShape(a_shape[1:]))
    return call(ctx, kernel, template, [a, other], out, recheck)


def fisher_categorical(
    ctx: Dispatcher, values: ClusterHandle, logits: bool, out: Any, shape: tuple[int, ...]
) -> tuple[Any, None]:
    """``fisher_categorical`` of cluster-array ``values`` (N, K)."""
    from .. import _native

    def recheck(v: list[Any]) -> None:
        _native.check_fisher_categorical(v[0].reshape(shape), logits)

    template = (Rows(0), logits, None, None, ShardShape(shape[1:]))
    return call(ctx, "fisher_categorical", template, [values], out, recheck)


def fisher_gaussian(
    ctx: Dispatcher,
    mean: Any,
    var: Any,
    out: Any,
    shapes: tuple[tuple[int, ...] | None, tuple[int, ...] | None],
) -> tuple[Any, None]:
    """``fisher_gaussian`` with ``mean`` or ``var`` a cluster array (N, D); ``var``'s
    rows lead when it is one."""
    from .. import _native

    def recheck(v: list[Any]) -> None:
        d = v[0].shape[-1] if v[0].ndim > 1 else 1
        _native.check_fisher_gaussian(v[0].reshape(-1, d), v[1].reshape(-1, d))

    def shape_of(s: tuple[int, ...] | None) -> Any:
        return None if s is None else ShardShape(s[1:])

    operands = [mean, var]
    if isinstance(var, ClusterHandle):
        # The result follows var's rows (the first cluster-array operand leads).
        operands = [var, mean]
        template = (Rows(1), Rows(0), None, None, shape_of(shapes[0]), shape_of(shapes[1]))
        return call(ctx, "fisher_gaussian", template, operands, out, lambda v: recheck(v[::-1]))
    template = (Rows(0), Rows(1), None, None, shape_of(shapes[0]), shape_of(shapes[1]))
    return call(ctx, "fisher_gaussian", template, operands, out, recheck)


def map_rows(
    ctx: Dispatcher, spec: Any, arrays: list[tuple[Any, tuple[int, ...]]], out: Any
) -> tuple[Any, None]:
    """``map_rows`` with a cluster-array operand: ``(N, C)`` operands by rows, ``(C,)``
    ones bound whole to every shard."""
    from .. import _native

    # The core's checks of the whole call (shapes, the kernel by naga) before any node
    # runs a shard; a cluster array is checked as a stand-in of its shape.
    _native.check_map_rows(
        spec, [(v.check_stand_in() if isinstance(v, ClusterHandle) else v, s) for v, s in arrays]
    )
    operands = [v for v, _ in arrays]
    slots = [
        (Whole(i), shape) if len(shape) == 1 else (Rows(i), ShardShape(shape[1:]))
        for i, (_, shape) in enumerate(arrays)
    ]
    return call(ctx, "map_rows", (spec, slots, None, None), operands, out)


def elementwise(
    ctx: Dispatcher, op: str, a: ClusterHandle, b: Any, swap: bool, out: Any
) -> ClusterHandle:
    """``_native.elementwise`` of cluster array ``a`` (checked by ``array_ops``, whose
    rules it follows): ``b`` None, a cluster array (its rows brought to ``a``'s shards when
    they lie elsewhere), or host words of one word or one row (bound whole to every shard)
    or of every row (each shard's rows sent with its call); the result has ``a``'s shards,
    or goes into ``out``'s."""
    if b is None:
        slot: Any = None
    elif isinstance(b, ClusterHandle) or len(b) > 1:
        slot = Rows(1)
    else:
        slot = Whole(1)
    operands = [a] if b is None else [a, b]
    result, _ = call(ctx, "elementwise", (op, Rows(0), slot, swap, None), operands, out)
    return cast(ClusterHandle, result)


def resident_rows(
    ctx: Dispatcher, x: ClusterHandle, start: int, stop: int, cols: int | None = None
) -> ClusterHandle:
    """``_native.resident_rows`` of cluster array ``x`` (checked by ``array_ops``): a copy
    of rows ``start..stop`` made by the nodes holding them."""
    return take(ctx, x, start, stop, cols)
