"""``RayContext``: the kernels of ``MultiGpuContext`` over a Ray cluster, each node a device
of the cluster planner, bit-identical to one context."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._adapters import BACKENDS
from .._native import family_of
from .._validate import name_list, optional_positive_int, positive_int
from ..context import MAX_DEVICES_PER_ADAPTER
from ..domain import DomainMixin
from ..errors import AmariGpuError, DeviceLostError, InvalidArgumentError, NoAdapterError
from ..ga import GeometricAlgebraMixin
from ..information import InformationGeometryMixin
from ..planning import Plan, Workload, check_strategy, optional_strategy
from ..tropical import TropicalMixin
from . import kernels
from .profile import ClusterProfile, ClusterRecording

DEFAULT_RESOURCE = "amari_gpu"
"""The custom resource a node offers to take part (``ray start --resources='{"amari_gpu": 1}'``)."""

DEFAULT_NODE_TIMEOUT_S = 120.0
"""Seconds without a finished chunk after which a busy node counts as hung."""

FAULTS = ("kill", "hang", "device_error")
"""What ``inject_fault`` can make a node do."""


@dataclass(frozen=True)
class NodeInfo:
    """A node of a ``RayContext``: its index (the ``device_id`` of cluster plans), Ray node
    id, address and hostname, its devices (id, adapter name, backend, device type), its
    calibrated items/s per family summed over its devices, and what the driver measured:
    transfer rates through the object store (bytes/s each way), round-trip latency and
    clock offset."""

    index: int
    node_id: str
    address: str
    hostname: str
    devices: list[dict[str, Any]] = field(default_factory=list)
    throughput: dict[str, float] = field(default_factory=dict)
    upload_bytes_per_s: float = math.nan
    download_bytes_per_s: float = math.nan
    latency_s: float = math.nan
    clock_offset_s: float = 0.0


def _resources(value: Any) -> dict[str, float]:
    if value is None:
        return {DEFAULT_RESOURCE: 1.0}
    if not isinstance(value, Mapping) or not value:
        raise InvalidArgumentError(
            f"resources: expected a mapping of resource names to amounts, got {value!r}"
        )
    out: dict[str, float] = {}
    for k, v in value.items():
        if (
            not isinstance(k, str)
            or isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not v > 0
        ):
            raise InvalidArgumentError(
                f"resources: expected names mapped to amounts > 0, got {k!r}: {v!r}"
            )
        out[k] = float(v)
    return out


def _timeout(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidArgumentError(f"node_timeout_s: expected seconds > 0, got {value!r}")
    return float(value)


class RayContext(GeometricAlgebraMixin, TropicalMixin, InformationGeometryMixin, DomainMixin):
    """The kernels of :class:`~amari_gpu.MultiGpuContext` on every node of a Ray cluster
    that offers the resource ``{"amari_gpu": 1}`` (``resources=`` names others).

    Connects to the cluster at ``address`` (or the one ``ray.init`` already joined, or
    starts a local one as ``ray.init()`` does) and places one actor per such node, pinned
    to it; each holds a ``MultiGpuContext(backends=..., devices_per_adapter=...,
    host_threads=...)`` over the node's devices. Every kernel method has the arguments,
    errors and results of ``MultiGpuContext``'s: calls are cut into the cluster's chunk
    grid (a function of the problem only), nodes take chunks in proportion to their
    measured rates (``strategy``), and each node splits its chunks over its devices.
    Results are bit-identical to one ``MultiGpuContext``'s for any node count and strategy.

    A node whose actor dies, that finishes no chunk within ``node_timeout_s`` seconds, or
    that reports a device error is marked in :meth:`health` and its unfinished chunks run
    on the healthy nodes; with none left, :class:`~amari_gpu.DeviceLostError`.
    ``chunk_items`` overrides the rows per cluster chunk.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        resources: Mapping[str, float] | None = None,
        backends: str | Sequence[str] | None = None,
        devices_per_adapter: int = 1,
        strategy: str = "auto",
        node_timeout_s: float = DEFAULT_NODE_TIMEOUT_S,
        chunk_items: int | None = None,
        host_threads: int | None = None,
    ) -> None:
        if address is not None and not isinstance(address, str):
            raise InvalidArgumentError(f"address: expected a Ray address or None, got {address!r}")
        wanted = _resources(resources)
        options = {
            "backends": name_list("backends", backends, BACKENDS),
            "devices_per_adapter": positive_int(
                "devices_per_adapter", devices_per_adapter, MAX_DEVICES_PER_ADAPTER
            ),
            "host_threads": optional_positive_int("host_threads", host_threads),
        }
        timeout = _timeout(node_timeout_s)
        strategy = check_strategy(strategy)
        chunks = optional_positive_int("chunk_items", chunk_items)

        import ray

        from . import placement
        from .dispatch import Dispatcher

        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False)
        found = placement.eligible(wanted)
        if not found:
            raise NoAdapterError(
                f"resources: no alive node of the Ray cluster offers {wanted}; start the "
                f"nodes with ray start --resources='{{\"{DEFAULT_RESOURCE}\": 1}}'"
            )
        actors = [placement.start(n, wanted, options) for n in found]
        try:
            nodes = placement.connect(found, actors, wanted, timeout)
        except BaseException:
            # Interrupted while waiting (Ctrl-C): no actor stays behind holding a node's
            # resource, or waiting to take it.
            for actor in actors:
                ray.kill(actor, no_restart=True)
            raise
        if not any(n.healthy for n in nodes):
            # Every actor is ended already (a failed node's is): nothing is left holding
            # or waiting for the nodes' resources.
            reasons = "; ".join(f"node {n.index}: {n.reason}" for n in nodes)
            raise NoAdapterError(
                f"no node of the Ray cluster could start its actor and open its devices ({reasons})"
            )
        self._native = Dispatcher(nodes, strategy, timeout, chunks)
        # The cluster's devices are its nodes: ``split=`` of the grids gives rows per node.
        self.devices: Sequence[Any] = self.nodes
        self.last_plan: Plan | None = None
        self.last_run = None

    _kernels = kernels

    @property
    def nodes(self) -> list[NodeInfo]:
        """The cluster's nodes, as measured when the context opened."""
        out = []
        for n in self._native.nodes:
            i = n.info
            out.append(
                NodeInfo(
                    index=n.index,
                    node_id=i["node_id"],
                    address=i["address"],
                    hostname=i["hostname"],
                    devices=list(i["devices"]),
                    throughput=dict(i["throughput"]),
                    upload_bytes_per_s=i["upload_bytes_per_s"],
                    download_bytes_per_s=i["download_bytes_per_s"],
                    latency_s=i["latency_s"],
                    clock_offset_s=n.clock_offset_s,
                )
            )
        return out

    @property
    def strategy(self) -> str:
        """The default strategy of calls that name none (assignable)."""
        return str(self._native.strategy)

    @strategy.setter
    def strategy(self, strategy: str) -> None:
        self._native.strategy = check_strategy(strategy)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return bool(self._native.closed)

    def close(self) -> None:
        """Closes every node's context and ends the actors (the Ray connection stays)."""
        if self._native.closed:
            return
        import ray

        self._native.closed = True
        # Every node releases its devices at once, within node_timeout_s in all; then the
        # actors end, which frees the nodes' resources for the next context.
        healthy = [n for n in self._native.nodes if n.healthy]
        try:
            self._native.ask([(n, n.actor.close.remote()) for n in healthy], "close()")
        except Exception:
            pass
        for node in self._native.nodes:
            ray.kill(node.actor, no_restart=True)

    def __enter__(self) -> RayContext:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return "RayContext(closed)"
        names = ", ".join(f"{n.index}: {n.address} ({len(n.devices)} devices)" for n in self.nodes)
        return f"RayContext([{names}])"

    def _node_index(self, node_id: Any) -> int:
        ids = range(len(self._native.nodes))
        if isinstance(node_id, bool) or not isinstance(node_id, (int, np.integer)):
            raise InvalidArgumentError(f"node_id: expected an integer in {ids}, got {node_id!r}")
        if int(node_id) not in ids:
            raise InvalidArgumentError(f"node_id: expected an integer in {ids}, got {node_id}")
        return int(node_id)

    def distribute_workload(self, workload: Workload, strategy: str | None = None) -> Plan:
        """The cluster plan ``workload`` would run with (nodes as devices), without
        running it."""
        from .dispatch import Job

        if not isinstance(workload, Workload):
            raise InvalidArgumentError(
                f"workload: expected an amari_gpu.Workload, got {type(workload).__name__}"
            )
        self._check_open()
        family = family_of(workload.kernel) or workload.kernel
        job = Job(
            family,
            workload.items,
            workload.bytes_in_per_item + workload.bytes_out_per_item,
            call=lambda s, e: ("", (), []),
            take=lambda c, s, e, r: None,
        )
        plan = self._native.plan(job, optional_strategy(strategy))
        return Plan.from_dict(plan.as_dict(workload.items))

    def _check_open(self) -> None:
        if self._native.closed:
            raise AmariGpuError("the context is closed")

    def health(self) -> dict[int, dict[str, Any]]:
        """``{node_index: {"healthy": bool, "reason": str | None, "node_id", "address"}}``;
        a failed node is left out of later calls."""
        return {
            n.index: {
                "healthy": n.healthy,
                "reason": n.reason,
                "node_id": n.info["node_id"],
                "address": n.info["address"],
            }
            for n in self._native.nodes
        }

    def stats(self) -> list[dict[str, Any]]:
        """Per node: chunks and items done, chunks re-run elsewhere after it failed, bytes
        sent to it and received from it, seconds it was busy (as the driver saw it),
        health, and its context's per-device ``stats()`` (empty for a lost node; a node
        that does not answer within ``node_timeout_s`` is marked hung and lost)."""
        answers: dict[int, list[dict[str, Any]]] = {}
        if not self._native.closed:
            calls = [(n, n.actor.stats.remote()) for n in self._native.healthy()]
            answers = self._native.ask(calls, "stats()")
        out = []
        for n in self._native.nodes:
            devices = answers.get(n.index, [])
            out.append(
                {
                    "node": n.index,
                    "node_id": n.info["node_id"],
                    "address": n.info["address"],
                    "healthy": n.healthy,
                    "reason": n.reason,
                    "chunks_done": n.chunks_done,
                    "items_done": n.items_done,
                    "failed_chunks": n.failed_chunks,
                    "bytes_sent": n.bytes_sent,
                    "bytes_received": n.bytes_received,
                    "busy_s": n.busy_s,
                    "devices": devices,
                }
            )
        return out

    def inject_fault(self, node_id: int, after_chunks: int = 0, *, fault: str = "kill") -> None:
        """Makes node ``node_id`` fail when it starts a chunk after completing
        ``after_chunks`` more (for testing recovery): ``fault="kill"`` ends its actor's
        process, ``"hang"`` blocks it (until ``node_timeout_s`` gives it up and ends it),
        ``"device_error"`` raises ``DeviceLostError`` there, as a node whose devices all
        failed does. Its unfinished chunks go to the healthy nodes; it stays out of later
        calls."""
        from .._validate import integer

        after = integer("after_chunks", after_chunks, 0)
        if fault not in FAULTS:
            raise InvalidArgumentError(f"fault: expected one of {list(FAULTS)}, got {fault!r}")
        node = self._native.nodes[self._node_index(node_id)]
        self._check_open()
        if not node.healthy:
            raise InvalidArgumentError(f"node_id: node {node.index} has failed ({node.reason})")
        if node.index not in self._native.ask(
            [(node, node.actor.inject_fault.remote(after, fault))], "inject_fault()"
        ):
            raise DeviceLostError(f"node {node.index}: {node.reason}")

    def profile(self) -> AbstractContextManager[ClusterProfile]:
        """Records every node's timeline while active and merges them on exit::

        with rc.profile() as prof:
            rc.geometric_product(a, b)
        print(prof)
        prof.save_chrome_trace("cluster.json")   # one process per node
        """
        self._check_open()
        return ClusterRecording(self._native)
