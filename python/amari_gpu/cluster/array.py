"""Arrays that live on the nodes: ``rc.asarray(x)`` and ``rc.from_ray(refs)`` give a
:class:`ClusterArray`, whose row shards are held by the node actors as DeviceArrays of
their contexts (on the node's devices, split there as a local DeviceArray is), in the dtype
``asarray`` kept (float16, float32 or float64, as a local DeviceArray's; float64 and float16
shards only on nodes with a device that computes in that dtype). A kernel
called with one runs each shard's rows on the node that holds them, in place (only a
broadcast single row, or a numpy operand's rows, travel to the nodes), and gives a
ClusterArray with the same shards; ``numpy()`` gathers.

Lineage, as a local DeviceArray's: each array remembers how its rows were made, the
object-store references its shards were read from (``asarray`` puts each shard once;
``from_ray`` keeps the caller's references) or the call and operands that computed them
(the operands' lineage, not their shards: freeing or dropping an operand releases its
shards). A shard lost with its node is made again on a healthy node from that lineage,
with the same bits and dtype (row kernels give the same bits for any split of their rows).
Rows travel as the devices' 4-byte words (two per float64 value, two float16 values per
word): ``cols`` counts words, as a native DeviceArray's does.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import ray

from .._validate import shape_text
from ..array import DeviceArray, host_rows, kept_array
from ..errors import InvalidArgumentError
from ..planning import Plan
from .dispatch import Dispatcher, Node, devices_text
from .planner import placement


@dataclass
class Shard:
    """Rows ``start..stop`` of an array, held by ``node`` under ``key``."""

    start: int
    stop: int
    node: Node
    key: str


@dataclass(frozen=True)
class Rows:
    """Operand ``index`` of a call, each shard's rows of it (a cluster array's lineage,
    or a numpy array's rows sent with the shard's call)."""

    index: int


@dataclass(frozen=True)
class Whole:
    """Operand ``index`` of a call bound whole to every shard (a broadcast single row): put
    in the object store once per call."""

    index: int


@dataclass(frozen=True)
class ShardShape:
    """The shape of a shard's rows as a native call is told it: ``(rows, *tail)``."""

    tail: tuple[int, ...]


@dataclass(frozen=True)
class ShardRows:
    """The number of operand rows of a shard, as a native call is told it."""


@dataclass
class Lineage:
    """How an array's rows (as its shards hold them: ``rows`` of ``cols`` words) are made:
    read from ``refs`` (the rows ``slices[i]`` of each, in order; ``bounds[i]`` the array
    rows they are) or computed by ``method`` with arguments ``template`` over ``operands``
    (cluster arrays' lineages and numpy arrays, placed by :class:`Rows` and
    :class:`Whole`), ``factor`` rows of the result per row of the operands. ``holder``:
    the live array these rows are, while it lives (its shards are used rather than made
    again)."""

    rows: int
    cols: int
    refs: list[Any] = field(default_factory=list)
    bounds: list[tuple[int, int]] = field(default_factory=list)
    slices: list[tuple[int, int]] = field(default_factory=list)
    method: str = ""
    template: Any = None
    operands: list[Any] = field(default_factory=list)
    factor: int = 1
    """Rows of the result per row of the operands (K for a (N, K, K) result held as N·K
    rows of K words)."""
    offset: int = 0
    """The operands' row of the result's first (rows ``a..b`` of an operand taken as an
    array of their own: ``a``)."""
    dtype: str = "float32"
    """numpy's name of the values the words hold (a computed array's: its call's answer)."""
    values: bool = False
    """Whether ``refs`` are the caller's arrays (``from_ray``), whose values are converted to
    ``dtype`` where they are held, rather than the devices' words."""
    holder: Any = None

    def live(self) -> ClusterHandle | None:
        """The array holding these rows, if it is alive and not freed."""
        held = self.holder() if self.holder is not None else None
        return held if held is not None and not held.freed else None


class ClusterHandle:
    """What a :class:`ClusterArray` holds in place of a native handle: its shards on the
    nodes and its lineage (the same ``live``, ``sharding`` and ``free`` as a native one)."""

    def __init__(self, cluster: Dispatcher, lineage: Lineage, shards: list[Shard]) -> None:
        self.cluster = cluster
        self.lineage = lineage
        self.shards = shards
        self.freed = False
        lineage.holder = weakref.ref(self)

    @property
    def rows(self) -> int:
        """Rows."""
        return self.lineage.rows

    @property
    def cols(self) -> int:
        """Words per row."""
        return self.lineage.cols

    @property
    def dtype(self) -> str:
        """numpy's name of the values' dtype (as a native handle's ``dtype``)."""
        return self.lineage.dtype

    @property
    def live(self) -> bool:
        """Neither freed nor of a closed context."""
        return not self.freed and not self.cluster.closed

    def sharding(self, _argument: str) -> list[tuple[int, int, int]]:
        """``(node_index, start_row, stop_row)`` of every shard, in row order."""
        return [(s.node.index, s.start, s.stop) for s in self.shards]

    def check_stand_in(self) -> npt.NDArray[Any]:
        """Zeros of the array's rows in its dtype, for the core's checks of shapes and
        dtypes, which read no values (calloc'd: untouched pages cost no memory)."""
        return np.zeros((self.rows, self.cols), dtype=np.float32).view(self.dtype)

    def free(self) -> None:
        """Releases the shards on their nodes (the lineage stays for dependents)."""
        if self.freed:
            return
        self.freed = True
        _release(self.cluster, self.shards)
        self.shards = []

    def adopt(self, other: ClusterHandle) -> None:
        """Takes ``other``'s rows in place of its own (an ``out=`` array given a result).
        Its old lineage no longer names it as holder: arrays computed from its old rows
        make them again from that lineage."""
        _release(self.cluster, self.shards)
        self.lineage.holder = None
        self.lineage, self.shards = other.lineage, other.shards
        self.lineage.holder = weakref.ref(self)
        other.shards, other.freed = [], True

    def __del__(self) -> None:
        try:
            if not self.freed and not self.cluster.closed:
                _release(self.cluster, self.shards)
        except Exception:
            # At interpreter shutdown Ray may be gone already: nothing is left to release.
            pass


def _release(cluster: Dispatcher, shards: list[Shard]) -> None:
    """Asks each healthy node to drop its shards (not waited for: a node that fails in
    between has lost them anyway)."""
    if cluster.closed:
        return
    by_node: dict[int, tuple[Node, list[str]]] = {}
    for s in shards:
        if s.node.healthy:
            by_node.setdefault(s.node.index, (s.node, []))[1].append(s.key)
    for node, keys in by_node.values():
        node.actor.drop.remote(keys)


class ClusterArray(DeviceArray):
    """Rows of float16, float32 or float64 values held on a :class:`~amari_gpu.RayContext`'s
    nodes (``rc.asarray``, ``rc.from_ray``); kernels of that context take them and return
    them in the dtype they computed in, as a local context's do with its DeviceArrays.
    ``sharding`` is ``(node_index, start_row, stop_row)`` per shard. Released by
    :meth:`free`, when garbage-collected and when the context closes. Indexing and
    elementwise arithmetic follow a local DeviceArray's rules (``array_ops``), computed by
    the nodes holding the rows, with the same bits."""

    __slots__ = ()

    def __init__(self, handle: ClusterHandle, ctx: Any, shape: tuple[int, ...]) -> None:
        # The cluster handle stands where a native one does (live, sharding, free).
        super().__init__(cast(Any, handle), ctx, shape)

    def numpy(self) -> npt.NDArray[Any]:
        """Gathers every row into a new array of its dtype (each shard through the object
        store, lost ones made again from their lineage first)."""
        from .resident import gather

        handle = cast(ClusterHandle, self._live("x", self._ctx))
        rows: npt.NDArray[Any] = gather(handle)
        return rows.reshape(self._shape)

    def __repr__(self) -> str:
        head = f"ClusterArray(shape={shape_text(self._shape)}, dtype={self._dtype}"
        if self.freed:
            return f"{head}, freed)"
        return f"{head}, sharding={self.sharding})"


def _layout(cluster: Dispatcher, rows: int, dtype: str) -> tuple[list[tuple[Node, int, int]], Plan]:
    """Row ranges per healthy node with a device that computes in ``dtype``, in proportion
    to its calibrated rates (summed over the families), nodes without rows left out; and
    the placement as a plan (nodes as devices), its ``left_out`` naming the healthy nodes
    without such a device and what their devices compute in.

    Raises:
        InvalidArgumentError: no healthy node has a device for ``dtype``, naming them.
        DeviceLostError: no healthy node is left.
    """
    nodes = cluster.computing(None if dtype == "float32" else dtype)
    weights = [(n.index, max(sum(n.model.throughput.values()), 1.0)) for n in nodes]
    plan = placement(weights, rows)
    counts = {a.device_id: a.items for a in plan}
    left_out = tuple(
        (n.index, f"{dtype} rows need a device that computes in {dtype}: {devices_text(n.info)}")
        for n in cluster.healthy()
        if n not in nodes
    )
    layout = row_ranges(nodes, [counts.get(n.index, 0) for n in nodes])
    return layout, dataclasses.replace(plan, left_out=left_out)


def row_ranges(nodes: list[Node], counts: list[int]) -> list[tuple[Node, int, int]]:
    """(node, start, stop) of each node given rows (``counts[i]`` rows to ``nodes[i]``, in
    order), nodes without rows left out."""
    out = []
    start = 0
    for node, count in zip(nodes, counts):
        if count:
            out.append((node, start, start + count))
        start += count
    return out


def upload(cluster: Dispatcher, values: npt.NDArray[Any]) -> tuple[ClusterHandle, Plan]:
    """A new array of the C-contiguous rows ``values`` (float16, float32 or float64, rows
    of an even number of float16 values): one shard per node with a device for its dtype
    and rows, each put in the object store once as the devices' words (its lineage) and
    uploaded by its node (none for no rows); and the placement (see :func:`_layout`)."""
    from .resident import hold

    flat = values.view(np.float32)
    rows, cols = flat.shape
    layout, plan = _layout(cluster, rows, values.dtype.name)
    refs = [ray.put(flat[s:e]) for _n, s, e in layout]
    bounds = [(s, e) for _n, s, e in layout]
    slices = [(0, e - s) for s, e in bounds]
    lineage = Lineage(rows, cols, refs, bounds, slices, dtype=values.dtype.name)
    return hold(cluster, lineage, [n for n, _s, _e in layout]), plan


class ClusterArrayMixin:
    """``asarray`` and ``from_ray`` of ``RayContext``."""

    _native: Dispatcher
    _array_class = ClusterArray

    def asarray(self, x: Any, dtype: Any = None, strategy: str | None = None) -> ClusterArray:
        """Puts ``x`` (at least one axis) into the object store as row shards, one per node
        (in proportion to the nodes' calibrated rates), which each node uploads to its
        devices, keeping its dtype as a ``MultiGpuContext``'s ``asarray`` does: float16,
        float32 and float64 kept, bool and integers as float64, ``dtype=`` (float16,
        float32 or float64) overriding. Rows are the first axis of a 1-D array, else every
        axis but the last; float16 rows hold an even number of values. float64 and float16
        rows go only to nodes with a device that computes in that dtype: ``last_plan`` is
        the placement (nodes as devices), its ``left_out`` naming the nodes skipped and
        why; a cluster with none refuses (``InvalidArgumentError`` naming each node's
        devices). The store keeps the shards (the lineage of a shard lost with its node).
        ``strategy`` is checked and otherwise unused (the shards follow the nodes' rates)."""
        from ..planning import optional_strategy

        optional_strategy(strategy)
        if isinstance(x, DeviceArray) and not isinstance(x, ClusterArray):
            raise InvalidArgumentError(
                "x: expected an array of host memory or a ClusterArray of this context, got a "
                "DeviceArray of a local context (gather it with .numpy())"
            )
        if isinstance(x, ClusterArray):
            return cast(ClusterArray, kept_array(self, x, dtype))
        words, shape, kept = host_rows(x, dtype)
        self._check_open()  # type: ignore[attr-defined]
        handle, plan = upload(self._native, words.view(kept))
        self._record(plan)  # type: ignore[attr-defined]
        return ClusterArray(handle, self, shape)

    def from_ray(self, refs: Any) -> ClusterArray:
        """A ClusterArray of the rows of arrays already in Ray's object store (``ray.put``,
        or returned by the caller's tasks): ``refs`` a sequence of ObjectRefs, each to an
        array with at least one row, all of one shape but the first axis (rows as for
        :meth:`asarray`); their rows are the array's, in order. Its dtype is the arrays' as
        :meth:`asarray` keeps it: float16, float32 and float64 kept, bool and integers as
        float64 (numpy's true division), float16 rows of an even number of values; arrays
        that keep different dtypes (float32 beside float64, say) are refused, not promoted
        (each node converts only its own arrays). Each shard is held by the node whose store
        has the object when that node is one of the context's and has a device that computes
        in the dtype (no copy between nodes), else by the node with such a device holding
        the fewest of its rows; the references are its lineage (a shard lost with its node
        is read and converted again elsewhere, the same bits and dtype).

        Raises:
            InvalidArgumentError: ``refs`` not a non-empty sequence of ObjectRefs; arrays
                keeping different dtypes; no node with a device for the dtype.
            ShapeError: an array without rows, or of another shape than the first's;
                float16 rows of an odd number of values.
            TypeError: an array of a dtype other than bool, integer, float16, float32 or
                float64.
        """
        from .resident import hold_refs

        if isinstance(refs, ray.ObjectRef) or not isinstance(refs, (list, tuple)) or not refs:
            raise InvalidArgumentError(
                f"refs: expected a non-empty list of ray.ObjectRef, got {type(refs).__name__}"
            )
        for i, ref in enumerate(refs):
            if not isinstance(ref, ray.ObjectRef):
                raise InvalidArgumentError(
                    f"refs[{i}]: expected a ray.ObjectRef, got {type(ref).__name__}"
                )
        self._check_open()  # type: ignore[attr-defined]
        handle, shape = hold_refs(self._native, list(refs))
        return ClusterArray(handle, self, shape)


def whole_rows(shape: tuple[int, ...]) -> int:
    """Rows of an array of ``shape`` as a ClusterArray holds it."""
    return math.prod(shape[:-1]) if len(shape) > 1 else shape[0]
