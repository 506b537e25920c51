"""``RayContext``: the kernels of ``MultiGpuContext`` over a Ray cluster, each node a device
of the cluster planner, bit-identical to one context."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._adapters import BACKENDS
from .._context_base import Context
from .._validate import name_list, optional_positive_int, positive_int
from ..context import MAX_DEVICES_PER_ADAPTER
from ..errors import InvalidArgumentError
from ..planning import check_strategy
from . import kernels
from .array import ClusterArrayMixin
from .dispatch import Dispatcher
from .nodes import DEFAULT_RESOURCE, NodeInfo, RayNodes, connect
from .profile import ClusterProfile

DEFAULT_NODE_TIMEOUT_S = 120.0
"""Seconds without a finished message (a node's run of chunks) after which a busy node
counts as hung."""


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


def _gpus(value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidArgumentError(
            f"num_gpus: expected a number of GPUs > 0 or None, got {value!r}"
        )
    return float(value)


def _timeout(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidArgumentError(f"node_timeout_s: expected seconds > 0, got {value!r}")
    return float(value)


class RayContext(ClusterArrayMixin, Context[ClusterProfile]):
    """The kernels of :class:`~amari_gpu.MultiGpuContext` on every node of a Ray cluster
    that offers the resource ``{"amari_gpu": 1}`` (``resources=`` names others).

    Connects to the cluster at ``address`` (or the one ``ray.init`` already joined, or
    starts a local one as ``ray.init()`` does) and places one actor per such node, pinned
    to it; each holds a ``MultiGpuContext(backends=..., devices_per_adapter=...,
    host_threads=...)`` over the node's devices. Every kernel method has the arguments,
    errors and results of ``MultiGpuContext``'s: calls are cut into the core's chunk grid
    (a function of the problem only) and planned by the core's partitioner with each node
    as one device (its measured rates; ``strategy``); each node gets its run of chunks as
    one message (its operands put in the object store once, read there without a copy)
    and splits it over its devices. Results are bit-identical to one
    ``MultiGpuContext``'s for any node count and strategy.

    With ``num_gpus``, each node actor asks Ray for that many GPUs and opens the wgpu
    adapters of the GPUs Ray assigned it, matched by PCI bus id (see
    :attr:`NodeInfo.gpus`); the nodes are those that offer the GPUs (and ``resources``,
    when given).

    A node whose actor dies, that finishes no message within ``node_timeout_s`` seconds,
    or that reports a device error is marked in :meth:`health` and its unfinished chunks
    run on the healthy nodes; with none left, :class:`~amari_gpu.DeviceLostError`.
    ``chunk_items`` overrides the rows per cluster chunk.

    ``asarray`` and ``from_ray`` give cluster arrays, whose row shards stay on the nodes
    between calls (see :mod:`amari_gpu.cluster.array`).
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
        num_gpus: float | None = None,
    ) -> None:
        if address is not None and not isinstance(address, str):
            raise InvalidArgumentError(f"address: expected a Ray address or None, got {address!r}")
        gpus = _gpus(num_gpus)
        # With num_gpus, Ray's GPU resource says which nodes take part; the custom
        # resource stays for nodes whose GPUs Ray does not count (non-CUDA).
        wanted = _resources(resources) if resources is not None or gpus is None else {}
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

        nodes = connect(address, wanted, gpus, options, timeout)
        cluster = Dispatcher(nodes, strategy, timeout, chunks)
        backend = RayNodes(cluster)
        # The cluster's devices are its nodes: ``split=`` of the grids gives rows per node.
        # No selection rule leaves a node out: one that could not start stays in health().
        self._open(backend, cluster, backend.infos())

    _kernels = kernels

    @property
    def nodes(self) -> list[NodeInfo]:
        """The cluster's nodes, as measured when the context opened (``devices``: on a
        RayContext its devices are its nodes)."""
        return list(self.devices)
