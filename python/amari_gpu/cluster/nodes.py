"""The backend of a ``RayContext``: a Ray cluster's nodes as the devices of
:class:`~amari_gpu._context_base.Context`, each a node actor holding a ``MultiGpuContext``
over the node's devices, reached through the cluster's dispatcher (``dispatch.py``)."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, NoReturn

import ray
from ray.exceptions import RayError

from .._native import family_of
from ..errors import AmariGpuError, DeviceLostError, InvalidArgumentError, NoAdapterError
from ..planning import Plan, Workload
from . import placement, shared
from .dispatch import Dispatcher, Job, Node
from .profile import ClusterProfile, ClusterRecording

DEFAULT_RESOURCE = "amari_gpu"
"""The custom resource a node offers to take part (``ray start --resources='{"amari_gpu": 1}'``)."""

FAULTS = ("kill", "hang", "device_error")
"""What ``RayContext.inject_fault`` can make a node do, the default first."""


@dataclass(frozen=True)
class NodeInfo:
    """A node of a ``RayContext``: its index (the ``device_id`` of cluster plans), Ray node
    id, address and hostname, its devices (id, adapter name, backend, device type, the
    dtypes it computes in), its calibrated items/s per family summed over its devices, and
    what the driver measured: transfer rates through the object store (bytes/s each way),
    round-trip latency and clock offset."""

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
    gpus: dict[str, Any] | None = None
    """With ``num_gpus``: the GPU ids Ray assigned the node's actor (``ids``) and how its
    adapters were matched to them, or why they could not be (``how``)."""


def connect(
    address: str | None,
    wanted: dict[str, float],
    gpus: float | None,
    options: dict[str, Any],
    timeout: float,
) -> list[Node]:
    """Joins the cluster at ``address`` (or the one ``ray.init`` joined, or a new local one)
    and starts one node actor on every alive node offering ``wanted`` (and ``gpus`` GPUs),
    each opening a ``MultiGpuContext`` with ``options``; the nodes, measured, a node that
    could not start marked failed with the reason.

    Raises:
        NoAdapterError: no node offers the resources, or none could start.
    """
    mode = shared.transport()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    needed = wanted if gpus is None else {**wanted, "GPU": gpus}
    found = placement.eligible(needed)
    if not found:
        raise NoAdapterError(
            f"resources: no alive node of the Ray cluster offers {needed}; start the "
            f"nodes with ray start --resources='{{\"{DEFAULT_RESOURCE}\": 1}}'"
            + ("" if gpus is None else f" (or --num-gpus={gpus:g})")
        )
    actors = [placement.start(n, wanted, options, gpus) for n in found]
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
    try:
        same_host(nodes, mode, timeout)
    except BaseException:
        for node in nodes:
            ray.kill(node.actor, no_restart=True)
        raise
    return nodes


def same_host(nodes: list[Node], mode: str, timeout: float) -> None:
    """Sets each healthy node's ``info["shared_memory"]``: whether its arrays travel through
    the driver's shared memory (``mode``: see ``shared.TRANSPORT_ENV``), decided by
    ``shared.probe`` on the node (a node that does not answer in time keeps the store).

    Raises:
        InvalidArgumentError: ``mode`` is ``shared_memory`` and a node failed the probe.
    """
    for node in nodes:
        node.info["shared_memory"] = False
    healthy = [n for n in nodes if n.healthy]
    if mode == "object_store" or not healthy or not shared.available():
        if mode == "shared_memory":
            raise InvalidArgumentError(
                f"{shared.TRANSPORT_ENV}=shared_memory: this process cannot make shared "
                f"memory a node could open (it needs Linux's memfd_create and /proc)"
            )
        return
    segment, token = shared.probe_token()
    try:
        calls = [n.actor.shared_memory.remote(segment.path, token) for n in healthy]
        ready, _ = ray.wait(calls, num_returns=len(calls), timeout=timeout)
        for node, ref in zip(healthy, calls):
            try:
                node.info["shared_memory"] = ref in ready and bool(ray.get(ref, timeout=timeout))
            except RayError:
                # A node that died since: its first call says so, as for any node.
                node.info["shared_memory"] = False
    finally:
        segment.close()
    refused = [n.index for n in healthy if not n.info["shared_memory"]]
    if mode == "shared_memory" and refused:
        raise InvalidArgumentError(
            f"{shared.TRANSPORT_ENV}=shared_memory: node(s) {refused} cannot open this "
            f"process's shared memory (another machine, or another user); unset it to "
            f"send their arrays through Ray's object store"
        )


class RayNodes:
    """The nodes of a cluster (see the module's docstring), as ``Context`` asks them."""

    unit = "node"
    faults: tuple[str, ...] = FAULTS

    def __init__(self, cluster: Dispatcher) -> None:
        self._cluster = cluster

    def infos(self) -> list[NodeInfo]:
        """The nodes, as measured when the context opened."""
        out = []
        for n in self._cluster.nodes:
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
                    gpus=i.get("gpus"),
                )
            )
        return out

    @property
    def closed(self) -> bool:
        return bool(self._cluster.closed)

    @property
    def strategy(self) -> str:
        return str(self._cluster.strategy)

    def close(self) -> None:
        """Closes every node's context and ends the actors (the Ray connection stays)."""
        if self._cluster.closed:
            return
        self._cluster.closed = True
        # Every node releases its devices at once, within node_timeout_s in all; then the
        # actors end, which frees the nodes' resources for the next context.
        healthy = self._cluster.healthy()
        try:
            self._cluster.ask([(n, n.actor.close.remote()) for n in healthy], "close()")
        except Exception:
            pass
        for node in self._cluster.nodes:
            ray.kill(node.actor, no_restart=True)
        if self._cluster.pool is not None:
            self._cluster.pool.close()

    def set_strategy(self, strategy: str) -> None:
        self._cluster.strategy = strategy

    def plan(self, workload: Workload, strategy: str | None) -> Plan:
        """The cluster plan of ``workload`` (nodes as devices)."""
        job = Job(
            family_of(workload.kernel) or workload.kernel,
            workload.items,
            workload.bytes_in_per_item,
            call=lambda s, e: ("", (), []),
            take=lambda c, s, e, r: None,
            bytes_out_per_item=workload.bytes_out_per_item,
        )
        return self._cluster.plan(job, strategy)

    def calibrate(self, force: bool) -> NoReturn:
        raise AmariGpuError(
            "calibrate: a RayContext's nodes measured their devices when it opened, and the "
            "driver the object store's rates (nodes[i].throughput, upload_bytes_per_s); open "
            "a new RayContext to measure again"
        )

    def recording(self, host: Any) -> AbstractContextManager[ClusterProfile]:
        return ClusterRecording(self._cluster, host)

    def health(self) -> dict[int, dict[str, Any]]:
        return {
            n.index: {
                "healthy": n.healthy,
                "reason": n.reason,
                "node_id": n.info["node_id"],
                "address": n.info["address"],
            }
            for n in self._cluster.nodes
        }

    def stats(self) -> list[dict[str, Any]]:
        calls = [(n, n.actor.stats.remote()) for n in self._cluster.healthy()]
        answers: dict[int, list[dict[str, Any]]] = self._cluster.ask(calls, "stats()")
        return [
            {
                "device_id": n.index,
                "node": n.index,
                "node_id": n.info["node_id"],
                "address": n.info["address"],
                "healthy": n.healthy,
                "reason": n.reason,
                "chunks_done": n.chunks_done,
                "messages": n.messages,
                "items_done": n.items_done,
                "failed_chunks": n.failed_chunks,
                "bytes_up": n.bytes_sent,
                "bytes_down": n.bytes_received,
                "bytes_moved": n.bytes_sent + n.bytes_received,
                "bytes_sent": n.bytes_sent,
                "bytes_received": n.bytes_received,
                "bytes_shared": n.bytes_shared,
                "transport": "shared_memory" if n.info.get("shared_memory") else "object_store",
                "busy_s": n.busy_s,
                "devices": answers.get(n.index, []),
            }
            for n in self._cluster.nodes
        ]

    def inject_fault(self, index: int, after_chunks: int, fault: str) -> None:
        node = self._cluster.nodes[index]
        if not node.healthy:
            raise InvalidArgumentError(f"device_id: node {node.index} has failed ({node.reason})")
        if node.index not in self._cluster.ask(
            [(node, node.actor.inject_fault.remote(after_chunks, fault))], "inject_fault()"
        ):
            raise DeviceLostError(f"node {node.index}: {node.reason}")

    def inject_grid_rate(self, index: int, cells_per_s: float | None) -> None:
        self._cluster.nodes[index].grid_rate = cells_per_s

    def reset_health(self, index: int | None) -> NoReturn:
        raise AmariGpuError(
            "reset_health: a RayContext cannot take a node back: a failed node's actor has "
            "ended, and the rows it held with it; open a new RayContext "
            "(inject_grid_rate(device_id, None) measures a node's grid rounds again)"
        )

    def label(self, node: Any) -> tuple[str, str]:
        count = len(node.devices)
        short = f"{node.index}: {node.address} ({count} devices)"
        names = ", ".join(f"{d['name']} ({d['backend']})" for d in node.devices)
        return short, f"node {node.index}: {node.address} ({node.hostname}), {names}"
