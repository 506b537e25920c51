"""The cluster's run loop: chunks of the cluster grid sent to the nodes' actors through
Ray's object store (two in flight per node, the next one travelling while the node
computes), results handed back in chunk order, and the chunks of a node that dies, hangs
past ``node_timeout_s`` or reports a device error re-run on the healthy nodes."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from .. import _native
from ..errors import AmariGpuError, DeviceLostError, InvalidArgumentError, ShapeError
from . import planner

IN_FLIGHT = 2
"""Chunks sent to a node ahead: one computing, one arriving."""

POLL_S = 0.05
"""How often the loop looks at the clock for hung nodes while waiting for results."""

ARGUMENT_ERRORS = (InvalidArgumentError, ShapeError, TypeError)
"""Errors that say the input is wrong (raised to the caller), not the node."""


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
    items_done: int = 0
    failed_chunks: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    busy_s: float = 0.0


@dataclass(frozen=True)
class Shared:
    """An array every chunk of a call binds whole (a broadcast operand, ``b`` of a matmul):
    put in the object store once per call."""

    array: Any


@dataclass
class Job:
    """One call: its family and cost per item for the planner, the unit the cluster grid's
    chunks are a multiple of, how to turn a chunk's item range into an actor call, and what
    to do with each chunk's result (called in any order, with the chunk's index)."""

    family: str
    items: int
    bytes_per_item: float
    call: Callable[[int, int], tuple[str, Any, list[Any]]]
    take: Callable[[int, int, int, Any], None]
    unit: int = 1
    min_rows: int = planner.MIN_CHUNK_ROWS
    whole: bool = False


@dataclass
class _Flight:
    node: Node
    chunk: int
    sent: float
    nbytes: int


@dataclass
class Dispatcher:
    """The state kernel calls share: nodes, default strategy, timeout, chunk override."""

    nodes: list[Node]
    strategy: str
    node_timeout_s: float
    chunk_items: int | None = None
    closed: bool = False
    recording: bool = False
    _puts: dict[int, Any] = field(default_factory=dict)

    def healthy(self) -> list[Node]:
        """The nodes that have not failed."""
        return [n for n in self.nodes if n.healthy]

    def no_healthy_node(self) -> DeviceLostError:
        """The error of a call with no node left, naming why each failed."""
        reasons = "; ".join(f"node {n.index}: {n.reason}" for n in self.nodes if not n.healthy)
        return DeviceLostError(
            f"no healthy node left in the cluster ({reasons or 'no node has the resource'})"
        )

    def plan(self, job: Job, strategy: str | None) -> planner.ClusterPlan:
        """The cluster plan of ``job`` on the healthy nodes."""
        nodes = self.healthy()
        if not nodes:
            raise self.no_healthy_node()
        if job.whole:
            rows = max(job.items, 1)
        elif self.chunk_items is not None:
            rows = -(-self.chunk_items // job.unit) * job.unit
        else:
            rows = planner.chunk_rows(job.items, job.unit, job.min_rows)
        return planner.plan(
            job.family,
            job.items,
            rows,
            job.bytes_per_item,
            [n.model for n in nodes],
            strategy or self.strategy,
        )

    def run(self, job: Job, strategy: str | None) -> _native.PlanDict:
        """Runs ``job`` on the healthy nodes; returns the plan it started from (as a
        ``PlanDict``, nodes as devices)."""
        if self.closed:
            raise AmariGpuError("the context is closed")
        plan = self.plan(job, strategy)
        grid = plan.grid
        own = {n: deque(run) for n, run in zip(plan.nodes, plan.runs)}
        shared: deque[int] = deque()
        if plan.strategy == "adaptive":
            for run in plan.runs:
                shared.extend(run)
            own = {n: deque() for n in plan.nodes}
        flights: dict[Any, _Flight] = {}
        done = [False] * len(grid)
        remaining = len(grid)
        progress: dict[int, float] = {}
        while remaining:
            for node in self.healthy():
                queue = own.setdefault(node.index, deque())
                while sum(f.node is node for f in flights.values()) < IN_FLIGHT:
                    if queue:
                        chunk = queue.popleft()
                    elif shared:
                        chunk = shared.popleft()
                    else:
                        break
                    if not any(f.node is node for f in flights.values()):
                        progress[node.index] = time.monotonic()
                    ref, nbytes = self._send(node, job, grid[chunk], strategy)
                    flights[ref] = _Flight(node, chunk, time.monotonic(), nbytes)
            if not flights:
                raise self.no_healthy_node()
            ready, _ = ray.wait(list(flights), num_returns=1, timeout=POLL_S)
            for ref in ready:
                flight = flights.pop(ref, None)
                if flight is None:
                    continue
                node = flight.node
                try:
                    result = ray.get(ref)
                except RayTaskError as e:
                    cause = e.cause if isinstance(e.cause, BaseException) else e
                    if isinstance(cause, ARGUMENT_ERRORS):
                        self._drop(flights)
                        start, stop = grid[flight.chunk]
                        raise type(cause)(
                            f"{cause} (found by node {node.index} in items {start}..{stop} "
                            "of the call)"
                        ) from None
                    self._fail(node, f"{type(cause).__name__}: {cause}", flights, own, shared)
                    shared.appendleft(flight.chunk)
                    continue
                except RayActorError as e:
                    self._fail(node, f"actor died: {type(e).__name__}", flights, own, shared)
                    shared.appendleft(flight.chunk)
                    continue
                start, stop = grid[flight.chunk]
                if not done[flight.chunk]:
                    job.take(flight.chunk, start, stop, result)
                    done[flight.chunk] = True
                    remaining -= 1
                now = time.monotonic()
                node.busy_s += now - max(flight.sent, progress.get(node.index, flight.sent))
                progress[node.index] = now
                node.chunks_done += 1
                node.items_done += stop - start
                node.bytes_sent += flight.nbytes
                node.bytes_received += _nbytes(result)
            now = time.monotonic()
            for node in list({f.node.index: f.node for f in flights.values()}.values()):
                if now - progress.get(node.index, now) > self.node_timeout_s:
                    ray.kill(node.actor, no_restart=True)
                    self._fail(
                        node,
                        f"hung: no chunk finished within node_timeout_s={self.node_timeout_s}",
                        flights,
                        own,
                        shared,
                    )
        self._puts.clear()
        return plan.as_dict(job.items)

    def _send(
        self, node: Node, job: Job, chunk: tuple[int, int], strategy: str | None
    ) -> tuple[Any, int]:
        method, template, arrays = job.call(*chunk)
        refs = []
        nbytes = 0
        for a in arrays:
            if isinstance(a, Shared):
                key = id(a.array)
                if key not in self._puts:
                    # Kept with its array, so the id cannot be reused within the call.
                    self._puts[key] = (a.array, ray.put(a.array))
                    nbytes += int(a.array.nbytes)
                refs.append(self._puts[key][1])
            else:
                refs.append(ray.put(a))
                nbytes += int(a.nbytes)
        ref = node.actor.run.remote(method, strategy, template, *refs)
        return ref, nbytes

    def _fail(
        self,
        node: Node,
        reason: str,
        flights: dict[Any, _Flight],
        own: dict[int, deque[int]],
        shared: deque[int],
    ) -> None:
        """Marks ``node`` failed and hands its unfinished chunks to the others."""
        node.healthy = False
        node.reason = reason
        lost = [f.chunk for f in flights.values() if f.node is node]
        for ref in [r for r, f in flights.items() if f.node is node]:
            del flights[ref]
        lost.extend(own.pop(node.index, deque()))
        node.failed_chunks += len(lost)
        shared.extend(sorted(lost))

    def _drop(self, flights: dict[Any, _Flight]) -> None:
        # What is in flight finishes on the nodes and is never read.
        flights.clear()
        self._puts.clear()


def _nbytes(result: Any) -> int:
    if isinstance(result, (tuple, list)):
        return sum(_nbytes(r) for r in result)
    return int(getattr(result, "nbytes", 0))
