"""The kernel entry points of a ``RayContext``: the same names and arguments as the native
module's (the family mixins call them with the cluster's dispatcher in place of a native
context), each cutting its call into the cluster's chunk grid and running the chunks on
the nodes with the native kernel of the same name.

The driver checks the whole call before any chunk is dispatched, with the core's own checks
(``_native.check_*``, the native entry's checks without a context): a node checking its
chunk would name the chunk's rows and shapes, not the caller's, and a failing chunk would
leave the caller's ``out`` partly written.

Row kernels (geometric algebra, tropical products, categorical and Gaussian Fisher) give
the same bits for any split of their rows, so any cluster grid does. The empirical Fisher
matrix is a sum: the driver checks and scales the input as one context does
(``fisher_prepare``), each node computes the float32 partials of its chunks of the whole
problem's chunk grid (``fisher_partials``), and the driver sums all of them in chunk order
in float64 (``fisher_finish``): the steps and the order of one context's call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _native
from ..errors import InvalidArgumentError
from ..planning import Plan
from . import array_kernels
from .array_kernels import resident
from .dispatch import Dispatcher, Job
from .node import ArraySlot
from .resident import gather
from .store import Assembly, Shared, new_output, place

GA = "geometric_algebra"
TROPICAL = "tropical"
INFORMATION = "information_geometry"


def _into(out: np.ndarray[Any, Any] | None, result: Any) -> Any:
    """A result assembled on the driver, copied into the caller's ``out`` when given."""
    if out is None:
        return result
    out[...] = result
    return out


def _whole(
    ctx: Dispatcher,
    family: str,
    call: tuple[str, Any, list[Any]],
    strategy: str | None,
    out: np.ndarray[Any, Any] | None,
    dtype: str | None = None,
    shader: bool = False,
) -> tuple[Any, Plan]:
    """The native call ``call`` (method, argument template, arrays) run whole by one node
    with a device for ``dtype`` (``shader``: a wgpu one; see ``Job``), its result copied
    into ``out`` or a new writable array. The node's native entry checks the whole call,
    so its errors are the caller's, and nothing is written before it succeeded."""
    result: list[Any] = []

    def take(_chunk: int, _start: int, _stop: int, r: Any) -> None:
        result.append(r[0])

    arrays = call[2]
    nbytes = float(sum(a.nbytes for a in arrays))
    job = Job(family, 1, nbytes, lambda _s, _e: call, take, whole=True, dtype=dtype, shader=shader)
    plan = ctx.run(job, strategy)
    # The store's array is read-only: the caller's result is a copy of it.
    part = result[0]
    placed = new_output(part.shape, part.dtype) if out is None else out
    place(placed, part)
    return placed, plan


def _row_bytes(*arrays: np.ndarray[Any, Any]) -> float:
    return float(sum(a.nbytes / max(len(a), 1) for a in arrays))


def _run_rows(
    ctx: Dispatcher,
    family: str,
    items: int,
    call: Any,
    bytes_per_item: tuple[float, float],
    strategy: str | None,
    axis: int = 0,
    out: np.ndarray[Any, Any] | None = None,
    dtype: str | None = None,
    spec: tuple[tuple[int, ...], Any] | None = None,
) -> tuple[Any, Plan]:
    """Runs a row kernel's ``call`` over ``items`` items moving ``bytes_per_item`` (in,
    out) each, the runs' results written into place along ``axis``, on the nodes with a
    device for ``dtype`` (see ``Job``); ``spec``: the result's shape and dtype when known
    before the call (the nodes on the driver's machine then write it in place)."""
    assembly = Assembly(items, axis, out, spec)
    bytes_in, bytes_out = bytes_per_item
    job = Job(
        family,
        items,
        bytes_in,
        call,
        assembly.take,
        axis=axis,
        bytes_out_per_item=bytes_out,
        dtype=dtype,
        out_rows=assembly.out_rows,
    )
    plan = ctx.run(job, strategy)
    return assembly.out, plan


def _known(shape: tuple[int, ...], dtype: Any) -> tuple[tuple[int, ...], Any] | None:
    """A result's shape and dtype for ``_run_rows`` (its ``spec``), when its dtype is one the
    kernels write as they compute it (float32, float64)."""
    return (shape, np.dtype(dtype)) if dtype in (np.float32, np.float64) else None


def _dtype(array: np.ndarray[Any, Any]) -> str | None:
    """The dtype a call on ``array`` computes in, for ``Job``: None for float32 (every device
    computes in it), else its name (float64: the nodes with a device for it)."""
    return None if array.dtype == np.float32 else array.dtype.name


def _host_only(*values: Any) -> None:
    """Refuses a DeviceArray: it lives on one context's devices, which a cluster's nodes
    cannot reach."""
    if any(isinstance(v, _native.DeviceArray) for v in values):
        raise InvalidArgumentError(
            "expected numpy arrays on a RayContext (a DeviceArray lives on one context's "
            "devices), got a DeviceArray"
        )


def ga_apply(
    ctx: Dispatcher,
    operation: str,
    signature: tuple[int, int, int],
    operands: list[Any],
    grades: int | tuple[int, ...] = 0,
    strategy: str | None = None,
    out: Any = None,
) -> tuple[Any, Plan | None]:
    """``_native.ga_apply`` on the cluster: rows split, a one-row operand (applied to every
    row of the other) bound whole to every chunk; with a cluster array, where it lives.
    ``grades`` (a projection's mask, or a sandwich's blades) is passed on as it is."""
    if resident(*operands):
        return array_kernels.ga_apply(ctx, operation, signature, operands, grades, out)
    _host_only(*operands, out)
    _native.check_ga_apply(operation, signature, operands, grades)
    items = max(len(o) for o in operands)
    broadcast = [len(o) == 1 and items != 1 for o in operands]

    def call(start: int, stop: int) -> tuple[str, Any, list[Any]]:
        arrays = [Shared(o) if b else o[start:stop] for o, b in zip(operands, broadcast)]
        slots = [ArraySlot(i) for i in range(len(arrays))]
        return "ga_apply", (operation, signature, slots, grades), arrays

    # The result's row is the last operand's (x of a sandwich on some blades is narrower
    # than its rotor).
    width = operands[-1].shape[1]
    per_row = (_row_bytes(*[o for o, b in zip(operands, broadcast) if not b]), 4.0 * width)
    return _run_rows(
        ctx,
        GA,
        items,
        call,
        per_row,
        strategy,
        out=out,
        spec=_ga_result(operation, signature, operands, grades, items),
    )


def _ga_result(
    operation: str,
    signature: tuple[int, int, int],
    operands: list[Any],
    grades: Any,
    items: int,
) -> tuple[tuple[int, ...], Any] | None:
    """The shape and dtype of ``ga_apply``'s result (one row of values per item: one for
    a scalar product, a sandwich's named blades, else the algebra's blades), known for
    float32 and float64 operands (None for others)."""
    if operation == "scalar_product":
        width = 1
    elif isinstance(grades, tuple):
        width = len(grades)
    else:
        width = 1 << sum(signature)
    return _known((items, width), operands[0].dtype)


def _batched_rows(
    a3: npt.NDArray[np.float32], other: npt.NDArray[np.float32]
) -> tuple[int, int, Any]:
    """Items, the output axis they lie on, and the chunk's operands: a batch of products is
    split by batch entries, a single product by rows of ``a`` (``other`` bound whole)."""
    if a3.shape[0] > 1:
        return a3.shape[0], 0, lambda s, e: [a3[s:e], other[s:e]]
    return a3.shape[1], 1, lambda s, e: [np.ascontiguousarray(a3[:, s:e]), Shared(other)]


def _batch_view(a: Any, other: Any, out: Any) -> tuple[Any, Any, Any]:
    """The operands and ``out`` of a product with a batch axis (an unbatched ``a`` gets one
    of a single entry), checked by the caller."""
    if a.ndim == 3:
        return a, other, out
    return a[None], other[None], None if out is None else out[None]


def _tropical(
    ctx: Dispatcher,
    kernel: str,
    a: Any,
    other: npt.NDArray[np.float32 | np.float64],
    semiring: str,
    strategy: str | None,
    out: Any,
    a_shape: tuple[int, ...] | None,
    out_bytes: Callable[[npt.NDArray[np.float32], npt.NDArray[np.float32]], float],
) -> tuple[Any, Plan | None]:
    """A tropical product ``kernel`` of ``a`` and ``other`` (``b`` or ``x``) on the cluster,
    checked whole by the core's ``check_<kernel>`` (float32 or float64 operands); its rows
    split over the nodes with a device for the operands' dtype; ``out_bytes``: the bytes of
    its result, from the batched operands (the plan's cost per item)."""
    if resident(a):

        def numpy_run(rows: Any) -> Any:
            return _tropical(ctx, kernel, rows, other, semiring, strategy, None, None, out_bytes)[0]

        return array_kernels.tropical(
            ctx, kernel, a, other, semiring, out, a_shape or (), numpy_run
        )
    _host_only(a, out)
    getattr(_native, f"check_{kernel}")(a, other, semiring)
    a3, other3, out3 = _batch_view(a, other, out)
    items, axis, parts = _batched_rows(a3, other3)

    def call(start: int, stop: int) -> tuple[str, Any, list[Any]]:
        return kernel, (ArraySlot(0), ArraySlot(1), semiring), parts(start, stop)

    per_item = (a3.nbytes / max(items, 1), out_bytes(a3, other3) / max(items, 1))
    # (batch, m, n) for a matmul (b's last axis), (batch, m) for a matvec; in a's dtype.
    shape = a3.shape[:2] + (other3.shape[-1:] if kernel == "tropical_matmul" else ())
    result, plan = _run_rows(
        ctx,
        TROPICAL,
        items,
        call,
        per_item,
        strategy,
        axis,
        out3,
        _dtype(other),
        _known(shape, a3.dtype),
    )
    return (result if a.ndim == 3 else result[0]), plan


def tropical_matmul(
    ctx: Dispatcher,
    a: Any,
    b: npt.NDArray[np.float32 | np.float64],
    semiring: str,
    strategy: str | None = None,
    out: Any = None,
    a_shape: tuple[int, ...] | None = None,
) -> tuple[Any, Plan | None]:
    """``_native.tropical_matmul`` on the cluster: rows of ``a`` in, rows of the
    (batch, m, n) result out, per item."""
    return _tropical(
        ctx,
        "tropical_matmul",
        a,
        b,
        semiring,
        strategy,
        out,
        a_shape,
        lambda a3, b3: float(a3.itemsize * a3.shape[0] * a3.shape[1] * b3.shape[-1]),
    )


def tropical_matvec(
    ctx: Dispatcher,
    a: Any,
    x: npt.NDArray[np.float32 | np.float64],
    semiring: str,
    strategy: str | None = None,
    out: Any = None,
    a_shape: tuple[int, ...] | None = None,
) -> tuple[Any, Plan | None]:
    """``_native.tropical_matvec`` on the cluster: rows of ``a`` in, per item (the result,
    k times smaller, is not counted)."""
    return _tropical(
        ctx, "tropical_matvec", a, x, semiring, strategy, out, a_shape, lambda _a, _x: 0.0
    )


def shortest_paths(
    ctx: Dispatcher,
    w: npt.NDArray[np.float32 | np.float64],
    strategy: str | None = None,
    out: np.ndarray[Any, Any] | None = None,
) -> tuple[npt.NDArray[np.float32 | np.float64], Plan]:
    """``_native.shortest_paths`` on one node (blocked Floyd-Warshall's rounds depend on
    each other: one node runs the whole call, over its own devices), in ``w``'s dtype."""
    dtype = None if w.dtype == np.float32 else w.dtype.name
    return _whole(ctx, TROPICAL, ("shortest_paths", (ArraySlot(0),), [w]), strategy, out, dtype)


def fisher_information(
    ctx: Dispatcher,
    scores: Any,
    weights: npt.NDArray[np.float32 | np.float64] | None = None,
    strategy: str | None = None,
    out: np.ndarray[Any, Any] | None = None,
    scores_shape: tuple[int, ...] | None = None,
) -> tuple[npt.NDArray[np.float64], Plan | None]:
    """``_native.fisher_information`` on the cluster, bit-identical to one context (cluster
    array scores are gathered: the chunk grid of the sum is the whole call's). float32
    scores give float32 partials, float64 ones (on the nodes with a device for float64)
    float64 partials, summed in chunk order in float64 as one context sums them."""
    if resident(scores):
        values = gather(scores)
        scores = values if scores_shape is None else values.reshape(scores_shape)
    _host_only(scores)
    # Scores come with weights of their dtype (the mixin converts them): a no-op view.
    weights = None if weights is None else np.asarray(weights, dtype=scores.dtype)
    prepared = _native.fisher_prepare(scores, weights)
    s = scores if prepared["scores"] is None else prepared["scores"]
    # fisher_prepare returns weights whenever it made them (ones without weights).
    w = prepared["weights"] if prepared["weights"] is not None else weights
    assert w is not None
    unit = int(prepared["chunk_items"])
    n = int(prepared["n"])
    parts: dict[int, Any] = {}

    def call(start: int, stop: int) -> tuple[str, Any, list[Any]]:
        return "fisher_partials", (ArraySlot(0), ArraySlot(1), unit), [s[start:stop], w[start:stop]]

    def take(chunk: int, _start: int, _stop: int, r: Any) -> None:
        parts[chunk] = r[0]

    job = Job(INFORMATION, n, _row_bytes(s, w), call, take, unit=unit, dtype=_dtype(scores))
    plan = ctx.run(job, strategy)
    partials = np.ascontiguousarray(np.concatenate([parts[c] for c in sorted(parts)]))
    matrix = _native.fisher_finish(
        partials,
        int(prepared["p"]),
        float(prepared["total"]),
        list(prepared["column_exponents"]),
        int(prepared["weight_exponent"]),
    )
    return _into(out, matrix), plan


def fisher_categorical(
    ctx: Dispatcher,
    values: Any,
    logits: bool,
    strategy: str | None = None,
    out: Any = None,
    values_shape: tuple[int, ...] | None = None,
) -> tuple[Any, Plan | None]:
    """``_native.fisher_categorical`` on the cluster: rows (float32, or float64 on the nodes
    with a device for it) split over the nodes (one context's bits: each row's matrix is
    its own)."""
    if resident(values):
        shape = values_shape or (values.rows, values.cols)
        return array_kernels.fisher_categorical(ctx, values, logits, out, shape)
    _host_only(values, out)
    _native.check_fisher_categorical(values, logits)

    def call(start: int, stop: int) -> tuple[str, Any, list[Any]]:
        return "fisher_categorical", (ArraySlot(0), logits), [values[start:stop]]

    k = values.shape[1]
    per_row = (_row_bytes(values), float(values.itemsize * k * k))
    spec = _known((len(values), k, k), values.dtype) if values.ndim == 2 else None
    return _run_rows(
        ctx,
        INFORMATION,
        len(values),
        call,
        per_row,
        strategy,
        out=out,
        dtype=_dtype(values),
        spec=spec,
    )


def fisher_gaussian(
    ctx: Dispatcher,
    mean: Any,
    var: Any,
    strategy: str | None = None,
    out: Any = None,
    mean_shape: tuple[int, ...] | None = None,
    var_shape: tuple[int, ...] | None = None,
) -> tuple[Any, Plan | None]:
    """``_native.fisher_gaussian`` on the cluster: rows (float32, or float64 on the nodes
    with a device for it) split over the nodes (one context's bits: each row's matrix is
    its own)."""
    if resident(mean, var):
        return array_kernels.fisher_gaussian(ctx, mean, var, out, (mean_shape, var_shape))
    _host_only(mean, var, out)
    _native.check_fisher_gaussian(mean, var)

    def call(start: int, stop: int) -> tuple[str, Any, list[Any]]:
        return "fisher_gaussian", (ArraySlot(0), ArraySlot(1)), [mean[start:stop], var[start:stop]]

    d = mean.shape[1]
    per_row = (_row_bytes(mean, var), float(4 * mean.itemsize * d * d))
    spec = _known((len(mean), 2 * d, 2 * d), mean.dtype) if mean.ndim == 2 else None
    return _run_rows(
        ctx,
        INFORMATION,
        len(mean),
        call,
        per_row,
        strategy,
        out=out,
        dtype=_dtype(mean),
        spec=spec,
    )


def map_rows(
    ctx: Dispatcher,
    spec: _native.RowsSpec,
    arrays: list[tuple[Any, tuple[int, ...]]],
    strategy: str | None = None,
    out: Any = None,
) -> tuple[Any, Plan | None]:
    """``_native.map_rows`` on the cluster: checked whole by the core (shapes, the kernel),
    then ``(N, C)`` arrays split by rows, ``(C,)`` ones bound whole to every chunk; with a
    cluster array, where it lives. float64 rows split over the nodes with a wgpu device
    for float64; rows in another dtype run whole on one such node (its entry checks
    them)."""
    if resident(*(v for v, _ in arrays)):
        return array_kernels.map_rows(ctx, spec, arrays, out)
    _host_only(*(v for v, _ in arrays), out)
    dtype = None if spec["dtype"] == "float32" else spec["dtype"]
    if dtype not in (None, "float64"):
        template = (spec, [(ArraySlot(i), shape) for i, (_, shape) in enumerate(arrays)])
        whole = ("map_rows", template, [v for v, _ in arrays])
        return _whole(ctx, "map_rows", whole, strategy, out, spec["dtype"], shader=True)
    items = _native.check_map_rows(spec, arrays)
    broadcast = [len(shape) == 1 for _, shape in arrays]

    def call(start: int, stop: int) -> tuple[str, Any, list[Any]]:
        parts = [Shared(v) if b else v[start:stop] for (v, _), b in zip(arrays, broadcast)]
        shapes = [
            shape if b else (stop - start, *shape[1:]) for (_, shape), b in zip(arrays, broadcast)
        ]
        slots = [(ArraySlot(i), s) for i, s in enumerate(shapes)]
        return "map_rows", (spec, slots), parts

    cols = int(spec["out_cols"])
    if items == 0:
        return _into(out, np.empty((0, cols), dtype=spec["dtype"])), None
    size = np.dtype(spec["dtype"]).itemsize
    per_row = _row_bytes(*[v for (v, _), b in zip(arrays, broadcast) if not b]) + size * cols
    assembly = Assembly(items, 0, out)
    job = Job(
        "map_rows",
        items,
        per_row,
        call,
        assembly.take,
        whole=all(broadcast),
        dtype=dtype,
        shader=True,
    )
    plan = ctx.run(job, strategy)
    return assembly.out, plan


# The grids' entry points belong to the same set (the domain mixin calls them through it),
# and so do the arrays' arithmetic and indexing (``array_ops`` calls them through it).
from .array_kernels import elementwise, resident_rows  # noqa: E402
from .grids import life, stencil  # noqa: E402

__all__ = [
    "elementwise",
    "fisher_categorical",
    "fisher_gaussian",
    "fisher_information",
    "ga_apply",
    "life",
    "map_rows",
    "resident_rows",
    "shortest_paths",
    "stencil",
    "tropical_matmul",
    "tropical_matvec",
]
