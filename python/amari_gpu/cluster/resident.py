"""Running calls where a cluster array's rows live: each shard's rows computed by the node
that holds them (operand rows held elsewhere, or lost, brought there or made again from
their lineage), with one attempt per set of healthy nodes: a node that fails, hangs past
``node_timeout_s`` or reports a device error is marked lost and the call starts again on
the others, its lost shards made again from their lineage (the same bits)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import ray
from ray.exceptions import RayActorError, RayTaskError

from .array import ClusterHandle, Lineage, Rows, Shard, ShardRows, ShardShape, Whole
from .dispatch import ARGUMENT_ERRORS, Dispatcher, Node
from .node import ArraySlot, HeldSlot
from .store import INLINE_BYTES, new_output, place

T = TypeVar("T")


class NodeFailed(Exception):
    """A node failed during an attempt (it is marked lost, the attempt starts again)."""

    def __init__(self, node: Node, reason: str) -> None:
        super().__init__(reason)
        self.node = node
        self.reason = reason


class Attempt:
    """One attempt's remote calls (waited for together) and the temporary shards it made
    on the nodes (released when it ends, whatever its outcome)."""

    def __init__(self, cluster: Dispatcher) -> None:
        self.cluster = cluster
        self.calls: list[tuple[Node, Any]] = []
        self.temps: list[tuple[Node, str]] = []
        self.puts: dict[int, Any] = {}

    def submit(self, node: Node, ref: Any) -> Any:
        self.calls.append((node, ref))
        return ref

    def wait(self) -> list[Any]:
        """The answers of every call submitted, in order; raises :class:`NodeFailed` for a
        node that failed (named by Ray when a dependency's actor died) or did not answer
        within ``node_timeout_s``, the caller's error for a wrong call."""
        calls, self.calls = self.calls, []
        if not calls:
            return []
        refs = [ref for _, ref in calls]
        timeout = self.cluster.node_timeout_s
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        done = set(ready)
        by_actor = {n.actor._actor_id.hex(): n for n in self.cluster.nodes}
        answers = []
        for node, ref in calls:
            if ref not in done:
                raise NodeFailed(node, f"hung: did not answer within node_timeout_s={timeout}")
            try:
                answers.append(ray.get(ref, timeout=timeout))
            except RayActorError as e:
                dead = by_actor.get(getattr(e, "actor_id", None) or "", node)
                raise NodeFailed(dead, f"actor died: {type(e).__name__}") from None
            except RayTaskError as e:
                cause = e.cause if isinstance(e.cause, BaseException) else e
                if isinstance(cause, RayActorError):
                    dead = by_actor.get(getattr(cause, "actor_id", None) or "", node)
                    raise NodeFailed(dead, f"actor died: {type(cause).__name__}") from None
                if isinstance(cause, ARGUMENT_ERRORS):
                    raise cause from None
                raise NodeFailed(node, f"{type(cause).__name__}: {cause}") from None
        return answers

    def temp(self, node: Node) -> str:
        key = uuid.uuid4().hex
        self.temps.append((node, key))
        return key

    def close(self) -> None:
        by_node: dict[int, tuple[Node, list[str]]] = {}
        for node, key in self.temps:
            if node.healthy:
                by_node.setdefault(node.index, (node, []))[1].append(key)
        for node, keys in by_node.values():
            node.actor.drop.remote(keys)
        self.temps = []


def attempts(cluster: Dispatcher, body: Callable[[Attempt], T]) -> T:
    """``body`` run until an attempt ends without a node failing (each failure marks its
    node lost); :class:`~amari_gpu.DeviceLostError` when no node is left."""
    if cluster.closed:
        from ..errors import AmariGpuError

        raise AmariGpuError("the context is closed")
    while True:
        if not cluster.healthy():
            raise cluster.no_healthy_node()
        attempt = Attempt(cluster)
        try:
            return body(attempt)
        except NodeFailed as failed:
            if failed.node.healthy:
                cluster.lose(failed.node, failed.reason)
        finally:
            attempt.close()


def _least_loaded(cluster: Dispatcher, shards: list[Shard], dtype: str) -> Node:
    """The healthy node with a device for ``dtype`` that holds the fewest rows of
    ``shards`` (the first such node on a tie)."""
    nodes = cluster.computing(None if dtype == "float32" else dtype)
    load = {n.index: 0 for n in nodes}
    for s in shards:
        if s.node.index in load:
            load[s.node.index] += s.stop - s.start
    return min(nodes, key=lambda n: (load[n.index], n.index))


def _source_parts(lin: Lineage, start: int, stop: int) -> tuple[list[Any], list[tuple[int, int]]]:
    """The references and their row slices that hold rows ``start..stop`` of ``lin``."""
    refs, slices = [], []
    for ref, (lo, hi), (a, _b) in zip(lin.refs, lin.bounds, lin.slices):
        s, e = max(lo, start), min(hi, stop)
        if s < e:
            refs.append(ref)
            slices.append((a + s - lo, a + e - lo))
    return refs, slices


def _count(node: Node, *, sent: int = 0, received: int = 0) -> None:
    node.bytes_sent += sent
    node.bytes_received += received


def make_rows(lin: Lineage, start: int, stop: int, node: Node, key: str, at: Attempt) -> None:
    """Submits what makes rows ``start..stop`` of ``lin`` on ``node`` under ``key``: read
    from its references, or computed by its call (operands brought there first)."""
    if lin.refs:
        refs, slices = _source_parts(lin, start, stop)
        _count(node, sent=4 * (stop - start) * max(lin.cols, 1))
        names = ["x"] * len(refs)
        hold = node.actor.hold.remote(key, names, slices, *refs, dtype=lin.dtype, values=lin.values)
        at.submit(node, hold)
        return
    f = lin.factor
    if start % f or stop % f:
        # Rows within the result of an operand row (a (K, K) matrix cut by another
        # layout): the covering rows computed, then the wanted ones taken from them.
        lo, hi = start // f * f, -(-stop // f) * f
        whole = at.temp(node)
        make_rows(lin, lo, hi, node, whole, at)
        part = at.submit(node, node.actor.export.remote(whole, start - lo, stop - lo))
        hold = node.actor.hold.remote(key, ["x"], [(0, stop - start)], part, dtype=lin.dtype)
        at.submit(node, hold)
        return
    start, stop = start // f + lin.offset, stop // f + lin.offset
    arrays: list[Any] = []

    def fill(t: Any) -> Any:
        if isinstance(t, Rows):
            op = lin.operands[t.index]
            if isinstance(op, Lineage):
                return HeldSlot(rows_on(op, node, start, stop, at))
            return _send(node, op[start:stop], arrays)
        if isinstance(t, Whole):
            op = lin.operands[t.index]
            if t.index not in at.puts:
                at.puts[t.index] = op if op.nbytes <= INLINE_BYTES else ray.put(op)
            _count(node, sent=int(op.nbytes))
            arrays.append(at.puts[t.index])
            return ArraySlot(len(arrays) - 1)
        if isinstance(t, ShardShape):
            return (stop - start, *t.tail)
        if isinstance(t, ShardRows):
            return stop - start
        if isinstance(t, (list, tuple)):
            filled = [fill(x) for x in t]
            return filled if isinstance(t, list) else tuple(filled)
        return t

    template = fill(lin.template)
    at.submit(node, node.actor.compute.remote(key, lin.method, template, *arrays))


def take(
    cluster: Dispatcher, x: ClusterHandle, start: int, stop: int, cols: int | None
) -> ClusterHandle:
    """A new array of rows ``start..stop`` of ``x`` (with ``cols``, their words as rows of
    ``cols`` words: one value of a float32 or float64 row each), each of its shards the part
    of one of ``x``'s shards, copied by the node that holds it; remembered as that call on
    ``x``'s lineage."""
    factor = x.cols // cols if cols else 1
    lin = Lineage(
        (stop - start) * factor,
        cols or x.cols,
        method="resident_rows",
        template=(Rows(0), 0, ShardRows(), cols),
        operands=[x.lineage],
        factor=factor,
        offset=start,
        dtype=x.dtype,
    )

    def body(at: Attempt) -> ClusterHandle:
        heal(x)
        shards = []
        for s in x.shards:
            lo, hi = max(s.start, start), min(s.stop, stop)
            if lo < hi:
                part = Shard((lo - start) * factor, (hi - start) * factor, s.node, at.temp(s.node))
                make_rows(lin, part.start, part.stop, part.node, part.key, at)
                shards.append(part)
        at.wait()
        # The shards become the new array's only when every one exists.
        keep = {(s.node.index, s.key) for s in shards}
        at.temps = [(n, k) for n, k in at.temps if (n.index, k) not in keep]
        return ClusterHandle(cluster, lin, shards)

    return attempts(cluster, body)


def _send(node: Node, rows: Any, arrays: list[Any]) -> ArraySlot:
    rows = np.ascontiguousarray(rows)
    _count(node, sent=int(rows.nbytes))
    arrays.append(rows if rows.nbytes <= INLINE_BYTES else ray.put(rows))
    return ArraySlot(len(arrays) - 1)


def heal(handle: ClusterHandle) -> None:
    """Makes every shard of ``handle`` whose node was lost again on a healthy node (the
    least loaded with its rows), from its lineage; waits for them, and moves the shards
    there only then (a node failing on the way raises :class:`NodeFailed`)."""
    lost = [s for s in handle.shards if not s.node.healthy]
    if not lost:
        return
    at = Attempt(handle.cluster)
    try:
        made: list[tuple[Shard, Node, str]] = []
        for shard in lost:
            planned = [Shard(s.start, s.stop, n, k) for s, n, k in made]
            node = _least_loaded(handle.cluster, handle.shards + planned, handle.dtype)
            key = at.temp(node)
            make_rows(handle.lineage, shard.start, shard.stop, node, key, at)
            made.append((shard, node, key))
        at.wait()
        for shard, node, key in made:
            shard.node, shard.key = node, key
        at.temps = []
    finally:
        at.close()


def rows_on(lin: Lineage, node: Node, start: int, stop: int, at: Attempt) -> str:
    """The key under which ``node`` holds rows ``start..stop`` of ``lin`` for this
    attempt: the live array's own shard when it is exactly that, else a temporary one
    made from the live shards' rows (through the object store, node to node) or, when
    the array was freed or dropped, from its lineage."""
    held = lin.live()
    if held is not None:
        heal(held)
        for s in held.shards:
            if (s.start, s.stop) == (start, stop) and s.node is node:
                return s.key
        refs, slices = [], []
        for s in held.shards:
            lo, hi = max(s.start, start), min(s.stop, stop)
            if lo < hi:
                refs.append(
                    at.submit(s.node, s.node.actor.export.remote(s.key, lo - s.start, hi - s.start))
                )
                slices.append((0, hi - lo))
                if s.node is not node:
                    moved = 4 * (hi - lo) * lin.cols
                    _count(s.node, received=moved)
                    _count(node, sent=moved)
        key = at.temp(node)
        names = ["x"] * len(refs)
        at.submit(node, node.actor.hold.remote(key, names, slices, *refs, dtype=lin.dtype))
        return key
    key = at.temp(node)
    make_rows(lin, start, stop, node, key, at)
    return key


def run(cluster: Dispatcher, lin: Lineage, primary: Lineage) -> ClusterHandle:
    """A new array of ``lin``'s call computed shard by shard where the rows of
    ``primary`` (a live operand) live."""

    def body(at: Attempt) -> ClusterHandle:
        held = primary.live()
        if held is None:
            from ..errors import InvalidArgumentError

            raise InvalidArgumentError("expected a live ClusterArray operand, got a freed one")
        heal(held)
        if not held.shards:
            # No rows: nothing runs (an empty array of any width gathers to the caller's
            # empty shape).
            lin.rows = 0
            return ClusterHandle(cluster, lin, [])
        shards = []
        for s in held.shards:
            key = uuid.uuid4().hex
            # The call is made of the operands' rows (factor 1) until its answer is known.
            lin.factor = 1
            make_rows(lin, s.start, s.stop, s.node, key, at)
            shards.append(Shard(s.start, s.stop, s.node, key))
        # The result shards become the caller's only when every one exists.
        at.temps.extend((s.node, s.key) for s in shards)
        answers = at.wait()
        # Each shard's compute is submitted after what brings its operands: the last
        # answer is the last shard's (rows, cols, dtype).
        rows, cols, lin.dtype = answers[-1]
        last = shards[-1]
        lin.factor = int(rows) // (last.stop - last.start)
        lin.cols = int(cols)
        lin.rows = held.rows * lin.factor
        for s in shards:
            s.start, s.stop = s.start * lin.factor, s.stop * lin.factor
        keep = {(s.node.index, s.key) for s in shards}
        at.temps = [(n, k) for n, k in at.temps if (n.index, k) not in keep]
        return ClusterHandle(cluster, lin, shards)

    return attempts(cluster, body)


def gather(handle: ClusterHandle) -> npt.NDArray[Any]:
    """Every row of ``handle`` as values of its dtype, through the object store, shard by
    shard (each shard's words copied straight into place)."""
    out = new_output((handle.rows, handle.cols), np.dtype(np.float32))

    def body(at: Attempt) -> npt.NDArray[Any]:
        heal(handle)
        for s in handle.shards:
            at.submit(s.node, s.node.actor.export.remote(s.key, 0, s.stop - s.start))
        for s, rows in zip(handle.shards, at.wait()):
            place(out[s.start : s.stop], rows)
            _count(s.node, received=int(rows.nbytes))
        # The words seen as the values they hold (their bits unchanged).
        return out.view(handle.dtype)

    return attempts(handle.cluster, body)


def hold(cluster: Dispatcher, lin: Lineage, nodes: list[Node]) -> ClusterHandle:
    """A new array of ``lin``'s referenced rows, bound ``i`` held by ``nodes[i]`` (another
    healthy node when that one fails)."""
    shards = [Shard(lo, hi, node, uuid.uuid4().hex) for (lo, hi), node in zip(lin.bounds, nodes)]

    def body(at: Attempt) -> ClusterHandle:
        for s in shards:
            if not s.node.healthy:
                s.node = _least_loaded(cluster, [t for t in shards if t.node.healthy], lin.dtype)
            make_rows(lin, s.start, s.stop, s.node, s.key, at)
        at.temps.extend((s.node, s.key) for s in shards)
        at.wait()
        at.temps = []
        return ClusterHandle(cluster, lin, shards)

    return attempts(cluster, body)


def hold_refs(cluster: Dispatcher, refs: list[Any]) -> tuple[ClusterHandle, tuple[int, ...]]:
    """A new array of the rows of the arrays ``refs`` point to (see ``from_ray``): each
    described (shape and kept dtype) by a node that has it, checked, then held, its values
    converted to that dtype, by the node whose store has it when that is a healthy node with
    a device for the dtype, else by the least loaded such node."""
    from ..errors import InvalidArgumentError, ShapeError
    from .array import whole_rows

    try:
        where = ray.experimental.get_object_locations(refs)
    except Exception:
        where = {}

    def local(ref: Any, nodes: list[Node]) -> Node | None:
        by_id = {n.info["node_id"]: n for n in nodes}
        for node_id in (where.get(ref) or {}).get("node_ids", []):
            if node_id in by_id:
                return by_id[node_id]
        return None

    def describe(at: Attempt) -> list[Any]:
        nodes = cluster.healthy()
        for i, ref in enumerate(refs):
            node = local(ref, nodes) or nodes[i % len(nodes)]
            at.submit(node, node.actor.part_kept.remote(f"refs[{i}]", ref))
        return at.wait()

    described = attempts(cluster, describe)
    shapes = [tuple(shape) for shape, _ in described]
    first, dtype = shapes[0], described[0][1]
    for i, (shape, kept) in enumerate(zip(shapes, (k for _, k in described))):
        if shape[0] == 0 or shape[1:] != first[1:] or 0 in shape:
            raise ShapeError(
                f"refs[{i}]: expected an array of shape (rows >= 1, "
                f"{', '.join(map(str, first[1:]))}) like refs[0], got {shape}"
                if i
                else f"refs[0]: expected an array with at least one row and column, got {shape}"
            )
        if kept != dtype:
            raise InvalidArgumentError(
                f"refs[{i}]: expected an array kept as {dtype} like refs[0] (arrays of one "
                f"dtype: they are not promoted across nodes), got one kept as {kept}; convert "
                "the arrays to one dtype before ray.put"
            )
    counts = [whole_rows(s) for s in shapes]
    bounds, start = [], 0
    for c in counts:
        bounds.append((start, start + c))
        start += c
    cols = (first[-1] if len(first) > 1 else 1) * np.dtype(dtype).itemsize // 4
    lin = Lineage(
        start, cols, list(refs), bounds, [(0, c) for c in counts], dtype=dtype, values=True
    )
    keys = [uuid.uuid4().hex for _ in refs]
    shards: list[Shard] = []

    def body(at: Attempt) -> None:
        shards.clear()
        for i, ((lo, hi), ref, key) in enumerate(zip(bounds, refs, keys)):
            node = local(ref, cluster.computing(None if dtype == "float32" else dtype))
            shard = Shard(lo, hi, node or _least_loaded(cluster, shards, dtype), key)
            shards.append(shard)
            # Read from the store by the node (no bytes from the driver), as lineage does.
            hold = shard.node.actor.hold.remote(
                key, [f"refs[{i}]"], [(0, None)], ref, dtype=dtype, values=True
            )
            at.submit(shard.node, hold)
        at.temps.extend((s.node, s.key) for s in shards)
        at.wait()
        at.temps = []

    attempts(cluster, body)
    shape = (sum(int(s[0]) for s in shapes), *first[1:])
    return ClusterHandle(cluster, lin, shards), shape
