"""The cluster's run loop: each node's run of chunks of the call (its share of the core's
plan) sent to its actor through Ray's object store, as one message or, when it moves more
than :data:`PIECE_BYTES`, as pieces of whole chunks sent at once (the node computes a piece
while the next ones arrive and the driver copies the last one's result into place), results
taken as they come, and the chunks of a node that dies, hangs past ``node_timeout_s`` or
reports a device error re-run on the healthy nodes (one chunk per message, two in flight
per node)."""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from ..errors import (
    AmariGpuError,
    DeviceLostError,
    InvalidArgumentError,
    KernelCompileError,
    ShapeError,
)
from ..planning import Plan
from . import planner, shared
from .shared import Pool, Segment, SharedRows
from .store import INLINE_BYTES, Shared, put_all

IN_FLIGHT = 2
"""Messages sent to a node ahead while it re-runs chunks one by one: one computing, one
arriving."""

PIECE_BYTES = 256 << 20
"""Bytes (operands and result) of a node's run above which it goes as pieces of about this
size: a run sent whole pays the driver's put of its operands, the node's serialization of
its result and the driver's copy of it on top of the node's compute; with pieces, the
driver puts the next pieces' operands and copies the last piece's result while the node
computes. That pays where moving bytes leaves the CPU free (a network between the driver
and the nodes); on one machine the copies compete with the compute for the same cores, and
each piece adds an actor call and its own ramp of the node context's pipeline:
benches/cluster.py measured a 2^21-row GA call (192 MiB) at 2.5x MultiGpuContext as four
pieces and 1.46x as one message on this 2-core machine under load, hence a size above it
(``--piece-mib`` measures others)."""

POLL_S = 0.05
"""How often the loop looks at the clock for hung nodes while waiting for results."""

ARGUMENT_ERRORS = (InvalidArgumentError, ShapeError, TypeError, KernelCompileError)
"""Errors that say the input is wrong (raised to the caller), not the node (a user's
kernel that a driver refuses, or whose loops ran past its cap, is the input's)."""

RESULT_ENTRY = re.compile(r"\bout\[(\d+(?:, \d+)*)\]")
"""An entry of a call's result as the core's errors name it (``out[p, i, j]``): found in a
chunk's result by the one check that needs the result (a tropical product's overflow)."""


@dataclass
class Node:
    """A node of the cluster as the driver sees it."""

    index: int
    actor: Any
    info: dict[str, Any]
    model: planner.NodeModel
    clock_offset_s: float = 0.0
    healthy: bool = True
    reason: str | None = None
    chunks_done: int = 0
    messages: int = 0
    """Runs of chunks it completed, one actor call each."""
    items_done: int = 0
    failed_chunks: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    bytes_shared: int = 0
    """Bytes of operands and results that went through the driver's shared memory."""
    told: int = 0
    """How many of the pool's closed segments the node was told of (it unmaps them)."""
    busy_s: float = 0.0
    grid_rate: float | None = None
    """Cells/s a test injected for the grid balancer (``inject_grid_rate``)."""


@dataclass
class Job:
    """One call: its family and bytes in/out per item for the planner, the unit the cluster
    grid's chunks are a multiple of, how to turn a run's item range into an actor call, and
    what to do with each run's result (called in any order, with the run's first chunk)."""

    family: str
    items: int
    bytes_in_per_item: float
    call: Callable[[int, int], tuple[str, Any, list[Any]]]
    take: Callable[[int, int, int, Any], None]
    unit: int = 1
    whole: bool = False
    axis: int = 0
    """The axis of the call's result its items lie on: a run's result starts there at the
    run's first item."""
    bytes_out_per_item: float = 0.0
    dtype: str | None = None
    """The dtype the call computes in when not every device computes in it (float64,
    float16): nodes with no device for it are left out of its plan (None: every node)."""
    shader: bool = False
    """Whether the call runs WGSL (``map_rows``): the host CPU device, which cannot, does
    not count as a device for ``dtype``."""
    out_rows: Callable[[Pool, int, int], tuple[Segment, SharedRows, bool] | None] | None = None
    """For a node on the driver's machine: the rows ``start..stop`` of the call's result
    in shared memory, which the node's native call writes as its ``out``, in a segment
    that goes back to the pool after the call or not (None: its result comes back through
    the object store)."""


def computes(info: dict[str, Any], dtype: str | None, shader: bool = False) -> bool:
    """Whether a node whose description is ``info`` has a device for a call in ``dtype``
    (a device lists the dtypes its kernels compute in; see :class:`Job`)."""
    if dtype is None:
        return True
    return any(
        dtype in d.get("dtypes", ()) and not (shader and d.get("backend") == "host")
        for d in info.get("devices", [])
    )


def devices_text(info: dict[str, Any]) -> str:
    """A node's devices as errors name them: each one's name, backend and dtypes."""
    return ", ".join(
        f"{d['name']} ({d['backend']}: {', '.join(d.get('dtypes', []))})" for d in info["devices"]
    )


@dataclass
class _Flight:
    node: Node
    run: tuple[int, int]
    """First chunk and number of chunks."""
    sent: float
    nbytes: int
    shared_in: int = 0
    """Bytes of its operands that go through shared memory (counted in ``nbytes``)."""
    shared_out: int = 0
    """Bytes of its result the node writes into shared memory."""


@dataclass
class Dispatcher:
    """The state kernel calls share: nodes, default strategy, timeout, chunk override."""

    nodes: list[Node]
    strategy: str
    node_timeout_s: float
    chunk_items: int | None = None
    closed: bool = False
    recorder: Any = None
    """The active ``ClusterProfile``, told of every plan the calls run (None: none)."""
    pool: Pool | None = None
    """The driver's shared memory for the nodes on its machine, made by the first call
    that sends one arrays (see ``shared.py``)."""

    def shared_pool(self, node: Node) -> Pool | None:
        """The pool of shared memory when ``node`` reads and writes it, else None."""
        if not node.info.get("shared_memory"):
            return None
        if self.pool is None:
            self.pool = Pool()
        return None if self.pool.closed else self.pool

    def healthy(self) -> list[Node]:
        """The nodes that have not failed."""
        return [n for n in self.nodes if n.healthy]

    def no_healthy_node(self) -> DeviceLostError:
        """The error of a call with no node left, naming why each failed."""
        reasons = "; ".join(f"node {n.index}: {n.reason}" for n in self.nodes if not n.healthy)
        return DeviceLostError(
            f"no healthy node left in the cluster ({reasons or 'no node has the resource'})"
        )

    def lose(self, node: Node, reason: str) -> None:
        """Marks ``node`` failed for ``reason`` and ends its actor (a hung one would
        otherwise keep its resource and its chunks)."""
        node.healthy = False
        node.reason = reason
        ray.kill(node.actor, no_restart=True)

    def ask(self, calls: list[tuple[Node, Any]], what: str) -> dict[int, Any]:
        """The answers of one call per node (``(node, ref)``), by node index, waiting at
        most ``node_timeout_s`` for all of them: a node that does not answer in time is
        marked hung, one whose actor died lost (see :meth:`lose`); neither has an answer."""
        refs = [ref for _, ref in calls]
        if not refs:
            return {}
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.node_timeout_s)
        done = set(ready)
        out: dict[int, Any] = {}
        for node, ref in calls:
            if ref not in done:
                self.lose(
                    node,
                    f"hung: did not answer {what} within node_timeout_s={self.node_timeout_s}",
                )
                continue
            try:
                out[node.index] = ray.get(ref, timeout=self.node_timeout_s)
            except RayActorError as e:
                self.lose(node, f"actor died: {type(e).__name__}")
        return out

    def computing(self, dtype: str | None, shader: bool = False) -> list[Node]:
        """The healthy nodes with a device that computes in ``dtype`` (None: float32, which
        every device computes in; ``shader``: a wgpu device); with none, the call's (or
        upload's) ``InvalidArgumentError`` naming each node's devices and their dtypes
        (``DeviceLostError`` when no node is healthy)."""
        nodes = [n for n in self.healthy() if computes(n.info, dtype, shader)]
        if nodes:
            return nodes
        if not self.healthy():
            raise self.no_healthy_node()
        device = "wgpu device" if shader else "device"
        named = "; ".join(f"node {n.index}: {devices_text(n.info)}" for n in self.healthy())
        raise InvalidArgumentError(
            f"dtype: no node of this RayContext has a {device} that computes in {dtype} "
            f"({named}); pass dtype=numpy.float32 to compute in float32"
        )

    def rows(self, job: Job) -> int:
        """Rows per chunk of ``job``'s grid: the whole call, the context's ``chunk_items``
        (rounded up to the job's unit), or the core's grid for the problem."""
        if job.whole:
            return max(job.items, 1)
        if self.chunk_items is not None:
            return -(-self.chunk_items // job.unit) * job.unit
        per_item = job.bytes_in_per_item + job.bytes_out_per_item
        return planner.chunk_rows(job.items, per_item, job.unit)

    def plan(self, job: Job, strategy: str | None) -> Plan:
        """The core's plan of ``job`` over the healthy nodes (nodes as devices)."""
        nodes = self.computing(job.dtype, job.shader)
        work = planner.workload(
            job.family, job.items, job.bytes_in_per_item, job.bytes_out_per_item
        )
        models = [n.model for n in nodes]
        return planner.plan(work, self.rows(job), models, strategy or self.strategy)

    def run(self, job: Job, strategy: str | None) -> Plan:
        """Runs ``job`` on the healthy nodes; returns its plan (nodes as devices)."""
        if self.closed:
            raise AmariGpuError("the context is closed")
        plan = self.plan(job, strategy)
        if self.recorder is not None:
            self.recorder.planned(plan)
        _Call(self, job, plan, strategy).run()
        return plan


class _Call:
    """One call's run: the runs each node still has to take (its plan's run, as one
    message), the chunks any node may take (the adaptive strategy's queue and the chunks
    of failed nodes, one per message), those in flight, those done."""

    def __init__(self, cluster: Dispatcher, job: Job, plan: Plan, strategy: str | None) -> None:
        self.cluster = cluster
        self.job = job
        self.rows = plan.chunk_items
        self.strategy = strategy
        # An empty call is one empty chunk: a node's kernel gives its result's shape.
        self.done = [False] * max(plan.n_chunks, 1)
        self.own: dict[int, deque[tuple[int, int]]] = {}
        self.shared: deque[tuple[int, int]] = deque()
        for a in plan:
            if plan.strategy == "adaptive":
                self.shared.extend((c, 1) for c in range(a.first_chunk, a.first_chunk + a.chunks))
            else:
                queue = self.own.setdefault(a.device_id, deque())
                queue.extend(_pieces(a.first_chunk, a.chunks, self._piece_chunks()))
        if not plan.n_chunks:
            self.shared.append((0, 1))
        self.flights: dict[Any, _Flight] = {}
        # When each busy node last finished a message (or became busy): the hang clock.
        self.progress: dict[int, float] = {}
        # Arrays every message binds whole, put in the store once (kept with their array,
        # so an id cannot be reused within the call).
        self.puts: dict[int, tuple[Any, Any]] = {}
        # The shared memory the call's messages use: segments of operands and of rows for
        # a caller's ``out`` (back to the pool when the call ends), and of the result (lent
        # to the caller); a node failing, or the call ending early, taints them all (see
        # ``shared.py``).
        self.operand_segments: list[Segment] = []
        self.result_segments: list[Segment] = []
        self.faulted = False

    def _piece_chunks(self) -> int:
        """Chunks per piece of a node's run (see :data:`PIECE_BYTES`)."""
        per_chunk = self.rows * (self.job.bytes_in_per_item + self.job.bytes_out_per_item)
        return max(1, int(PIECE_BYTES // max(per_chunk, 1.0)))

    def span(self, run: tuple[int, int]) -> tuple[int, int]:
        """The items of ``run`` (first chunk, chunks)."""
        first, count = run
        return first * self.rows, min((first + count) * self.rows, self.job.items)

    def run(self) -> None:
        try:
            self._loop()
        except BaseException:
            self.faulted = True
            raise
        finally:
            pool = self.cluster.pool
            for segment in self.result_segments:
                segment.tainted = segment.tainted or self.faulted
            for segment in self.operand_segments:
                segment.tainted = segment.tainted or self.faulted
                assert pool is not None
                pool.give(segment)

    def _loop(self) -> None:
        while not all(self.done):
            self._feed()
            if not self.flights:
                raise self.cluster.no_healthy_node()
            ready, _ = ray.wait(list(self.flights), num_returns=1, timeout=POLL_S)
            for ref in ready:
                flight = self.flights.pop(ref, None)
                if flight is not None:
                    self._receive(ref, flight)
            self._check_hangs()

    def _in_flight(self, node: Node) -> int:
        return sum(f.node is node for f in self.flights.values())

    def _feed(self) -> None:
        """Sends every healthy node its own run (its pieces), then chunks of the shared
        queue while it has fewer than ``IN_FLIGHT`` messages: one message per node in
        turn, so that every node gets its first piece before any gets its second."""
        nodes = self.cluster.computing(self.job.dtype, self.job.shader)
        while nodes:
            waiting = []
            for node in nodes:
                queue = self.own.setdefault(node.index, deque())
                if not (queue or (self.shared and self._in_flight(node) < IN_FLIGHT)):
                    continue
                run = queue.popleft() if queue else self.shared.popleft()
                if not self._in_flight(node):
                    self.progress[node.index] = time.monotonic()
                ref, nbytes, shared_in, shared_out = self._send(node, run)
                self.flights[ref] = _Flight(
                    node, run, time.monotonic(), nbytes, shared_in, shared_out
                )
                waiting.append(node)
            nodes = waiting

    def _receive(self, ref: Any, flight: _Flight) -> None:
        node = flight.node
        try:
            # Ready (``ray.wait`` said so): the timeout only bounds a store that stalls.
            result = ray.get(ref, timeout=self.cluster.node_timeout_s)
        except GetTimeoutError:
            ray.kill(node.actor, no_restart=True)
            self._fail(
                node,
                f"hung: its result was not readable within node_timeout_s="
                f"{self.cluster.node_timeout_s}",
                [flight.run],
            )
            return
        except RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else e
            if isinstance(cause, ARGUMENT_ERRORS):
                # What is in flight finishes on the nodes and is never read.
                self.flights.clear()
                start, stop = self.span(flight.run)
                if start == 0:
                    # Positions in the message are the call's: the caller's own error.
                    raise cause from None
                entry = _callers_entry(str(cause), self.job.axis, start)
                if entry is not None:
                    raise type(cause)(entry) from None
                raise type(cause)(
                    f"{cause} (found by node {node.index} in items {start}..{stop} of the call)"
                ) from None
            self._fail(node, f"{type(cause).__name__}: {cause}", [flight.run])
            return
        except RayActorError as e:
            self._fail(node, f"actor died: {type(e).__name__}", [flight.run])
            return
        now = time.monotonic()
        node.busy_s += now - max(flight.sent, self.progress.get(node.index, flight.sent))
        self.progress[node.index] = now
        self._harvest(flight, result)

    def _check_hangs(self) -> None:
        now = time.monotonic()
        timeout = self.cluster.node_timeout_s
        for node in list({f.node.index: f.node for f in self.flights.values()}.values()):
            if now - self.progress.get(node.index, now) > timeout:
                ray.kill(node.actor, no_restart=True)
                self._fail(node, f"hung: no chunk finished within node_timeout_s={timeout}", [])

    def _send(self, node: Node, run: tuple[int, int]) -> tuple[Any, int, int, int]:
        """Sends ``run`` to ``node``: the actor call's reference, the bytes of its
        operands, of those the part that goes through shared memory, and the bytes of its
        result the node writes into shared memory."""
        start, stop = self.span(run)
        method, template, arrays = self.job.call(start, stop)
        pool = self.cluster.shared_pool(node)
        refs: list[Any] = []
        nbytes = 0
        # The arrays to put (large ones, a shared one the first time): their places in
        # ``refs``, and a shared one's key; the run's own rows for shared memory instead.
        puts: list[tuple[int, Any, int | None]] = []
        rows: list[tuple[int, Any]] = []
        for a in arrays:
            array, key = (a.array, id(a.array)) if isinstance(a, Shared) else (a, None)
            if key in self.puts:
                refs.append(self.puts[key][1])
                continue
            if pool is not None and key is None and array.nbytes >= shared.MIN_BYTES:
                rows.append((len(refs), array))
            elif key is not None or array.nbytes > INLINE_BYTES:
                puts.append((len(refs), array, key))
            refs.append(array)
            nbytes += int(array.nbytes)
        shared_in = shared_out = 0
        if pool is not None:
            # An operand that is a lent result (a chain of calls) is read where it is.
            copied = []
            for at, array in rows:
                held = pool.holding(array)
                if held is None:
                    copied.append((at, array))
                    continue
                refs[at] = held[0].rows(held[1], array.shape, array.dtype)
                shared_in += int(array.nbytes)
            rows = copied
        if rows:
            assert pool is not None
            segment = pool.take(sum(shared.aligned(a.nbytes) for _, a in rows))
            self.operand_segments.append(segment)
            offset = 0
            for at, array in rows:
                shared.copy_into(segment, offset, array)
                refs[at] = segment.rows(offset, array.shape, array.dtype)
                offset += shared.aligned(array.nbytes)
                shared_in += int(array.nbytes)
        for (at, array, key), ref in zip(puts, put_all([p[1] for p in puts])):
            refs[at] = ref
            if key is not None:
                self.puts[key] = (array, ref)
        options: dict[str, Any] = {"chunks": run[1]}
        if pool is not None:
            placed = None if self.job.out_rows is None else self.job.out_rows(pool, start, stop)
            if placed is not None:
                segment, out, back = placed
                kept = self.operand_segments if back else self.result_segments
                if segment not in kept:
                    kept.append(segment)
                options["out"] = out
                shared_out = out.nbytes
            if node.told < len(pool.closed_ids):
                options["forget"] = (os.getpid(), pool.closed_ids[node.told :])
                node.told = len(pool.closed_ids)
        ref = node.actor.run.remote(method, self.strategy, template, *refs, **options)
        return ref, nbytes, shared_in, shared_out

    def _fail(self, node: Node, reason: str, failed: list[tuple[int, int]]) -> None:
        """Marks ``node`` failed and hands its unfinished runs (``failed`` and those in
        flight or queued) to the others, one chunk per message."""
        node.healthy = False
        node.reason = reason
        self.faulted = True
        # A message the node finished before it failed has its result in the store
        # already (an actor replies to one call before it starts the next): keep it.
        mine = [r for r, f in self.flights.items() if f.node is node]
        finished, _ = ray.wait(mine, num_returns=len(mine), timeout=0) if mine else ([], [])
        for ref in finished:
            try:
                result = ray.get(ref, timeout=0)
            except Exception:
                continue
            self._harvest(self.flights.pop(ref), result)
        lost = list(failed)
        for ref in [r for r, f in self.flights.items() if f.node is node]:
            lost.append(self.flights.pop(ref).run)
        lost.extend(self.own.pop(node.index, deque()))
        chunks = sorted(c for first, count in lost for c in range(first, first + count))
        node.failed_chunks += len(chunks)
        self.shared.extendleft((c, 1) for c in reversed(chunks))

    def _harvest(self, flight: _Flight, result: Any) -> None:
        """Takes a finished run's result (once) and counts it for its node."""
        first, count = flight.run
        start, stop = self.span(flight.run)
        if not self.done[first]:
            self.job.take(first, start, stop, result)
            self.done[first : first + count] = [True] * count
        node = flight.node
        node.chunks_done += count
        node.messages += 1
        node.items_done += stop - start
        node.bytes_sent += flight.nbytes
        node.bytes_received += _nbytes(result) + flight.shared_out
        node.bytes_shared += flight.shared_in + flight.shared_out


def _pieces(first: int, count: int, size: int) -> list[tuple[int, int]]:
    """The run of ``count`` chunks from ``first`` as runs of ``size`` chunks (the last one
    shorter), as even as whole pieces allow: ``ceil(count / size)`` pieces."""
    n = -(-count // size)
    bounds = [first + count * i // n for i in range(n + 1)]
    return [(lo, hi - lo) for lo, hi in zip(bounds, bounds[1:])]


def _callers_entry(message: str, axis: int, start: int) -> str | None:
    """``message`` with the result entry it names in a chunk's result (see
    :data:`RESULT_ENTRY`) named as the caller's: its index along ``axis`` moved by the
    chunk's first item ``start``; None when it names none. The chunk's result has the
    call's axes (a chunk is a slice of the call along ``axis``), so the rest of the index is
    the caller's already: the message is then the one a single context gives."""
    found = RESULT_ENTRY.search(message)
    if found is None:
        return None
    index = [int(i) for i in found.group(1).split(", ")]
    if axis >= len(index):
        return None
    index[axis] += start
    entry = "out[" + ", ".join(map(str, index)) + "]"
    return message[: found.start()] + entry + message[found.end() :]


def _nbytes(result: Any) -> int:
    if isinstance(result, (tuple, list)):
        return sum(_nbytes(r) for r in result)
    return int(getattr(result, "nbytes", 0))
