"""Placing the node actors: which nodes of the Ray cluster offer the resource, one actor
pinned to each, and what the driver measures of each (clock offset, transfer rates through
the object store)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .dispatch import Node
from .node import NodeWorker
from .planner import NodeModel

STARTUP_TIMEOUT_S = 600.0
"""Seconds a node's actor may take to start, open its devices and calibrate them (a first
calibration on a slow adapter takes minutes; later ones read the disk cache)."""

PROBE_BYTES = 8 << 20
"""Bytes sent each way to measure a node's transfer rate through the object store."""


def eligible(resources: Mapping[str, float]) -> list[dict[str, Any]]:
    """The alive nodes that offer every resource of ``resources``, in Ray's order."""
    return [
        n
        for n in ray.nodes()  # type: ignore[no-untyped-call]
        if n.get("Alive")
        and all(n.get("Resources", {}).get(k, 0.0) >= v for k, v in resources.items())
    ]


def start(node: dict[str, Any], resources: Mapping[str, float], options: dict[str, Any]) -> Any:
    """An actor on ``node`` holding a ``MultiGpuContext`` with ``options``; it takes the
    resources, so a node runs one, and is never restarted (a lost node stays lost)."""
    worker = ray.remote(NodeWorker).options(
        num_cpus=0,
        resources=dict(resources),
        scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        max_restarts=0,
    )
    return worker.remote(options)


def clock_offset(actor: Any, rounds: int = 5) -> tuple[float, float]:
    """The node clock minus the driver's (from the round trip with the smallest time),
    and that round trip in seconds."""
    best = (0.0, float("inf"))
    for _ in range(rounds):
        t0 = time.time()
        remote = ray.get(actor.clock.remote())
        t1 = time.time()
        if t1 - t0 < best[1]:
            best = (remote - (t0 + t1) / 2, t1 - t0)
    return best


def transfer_rates(actor: Any, latency_s: float) -> tuple[float, float]:
    """Bytes/s driver → node and node → driver through the object store, measured with
    ``PROBE_BYTES`` each way (an empty call's round trip taken off)."""
    data = np.ones(PROBE_BYTES, dtype=np.uint8)
    t0 = time.perf_counter()
    ray.get(actor.receive.remote(ray.put(data)))
    up = time.perf_counter() - t0
    t0 = time.perf_counter()
    ray.get(actor.send.remote(PROBE_BYTES))
    down = time.perf_counter() - t0
    return (
        PROBE_BYTES / max(up - latency_s, 1e-6),
        PROBE_BYTES / max(down - latency_s, 1e-6),
    )


def connect(index: int, node: dict[str, Any], actor: Any) -> Node:
    """The driver's view of a started actor: its description, clock offset and rates; a
    node whose actor does not start (or whose devices do not open) is there, failed."""
    try:
        info = ray.get(
            actor.describe.remote(node["NodeID"], node["NodeManagerAddress"]),
            timeout=STARTUP_TIMEOUT_S,
        )
    except (GetTimeoutError, RayError) as e:
        ray.kill(actor, no_restart=True)
        info = {
            "node_id": node["NodeID"],
            "address": node["NodeManagerAddress"],
            "hostname": "",
            "devices": [],
            "throughput": {},
            "clock_offset_s": 0.0,
            "latency_s": math.nan,
            "upload_bytes_per_s": math.nan,
            "download_bytes_per_s": math.nan,
        }
        failed = Node(index=index, actor=actor, info=info, model=NodeModel(index, {}, 1.0))
        failed.healthy = False
        failed.reason = f"did not start: {type(e).__name__}: {e}"
        return failed
    offset, latency = clock_offset(actor)
    up, down = transfer_rates(actor, latency)
    info.update(
        {
            "clock_offset_s": offset,
            "latency_s": latency,
            "upload_bytes_per_s": up,
            "download_bytes_per_s": down,
        }
    )
    model = NodeModel(index, dict(info["throughput"]), 2.0 / (1.0 / up + 1.0 / down))
    return Node(index=index, actor=actor, info=info, model=model, clock_offset_s=offset)
