"""Placing the node actors: which nodes of the Ray cluster offer the resource, one actor
pinned to each, what the driver measures of each (clock offset, transfer rates through
the object store), and, for an actor that waits for its node's resource, what holds it."""

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


def start(
    node: dict[str, Any],
    resources: Mapping[str, float],
    options: dict[str, Any],
    num_gpus: float | None = None,
) -> Any:
    """An actor on ``node`` holding a ``MultiGpuContext`` with ``options``; it takes the
    resources (and ``num_gpus`` GPUs, whose adapters it opens: see ``cluster.gpus``), so a
    node runs one, and is never restarted (a lost node stays lost)."""
    worker = ray.remote(NodeWorker).options(
        num_cpus=0,
        num_gpus=num_gpus or 0,
        resources=dict(resources),
        scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        max_restarts=0,
    )
    return worker.remote(options, num_gpus is not None)


def clock_offset(actor: Any, timeout_s: float, rounds: int = 5) -> tuple[float, float]:
    """The node clock minus the driver's (from the round trip with the smallest time),
    and that round trip in seconds; each round trip waits at most ``timeout_s``."""
    best = (0.0, float("inf"))
    for _ in range(rounds):
        t0 = time.time()
        remote = ray.get(actor.clock.remote(), timeout=timeout_s)
        t1 = time.time()
        if t1 - t0 < best[1]:
            best = (remote - (t0 + t1) / 2, t1 - t0)
    return best


def transfer_rates(
    actor: Any, latency_s: float, timeout_s: float, rounds: int = 3
) -> tuple[float, float]:
    """Bytes/s driver → node and node → driver through the object store, measured with
    ``PROBE_BYTES`` each way (an empty call's round trip taken off), the fastest of
    ``rounds`` (the first touches store pages no call touched yet, which later calls find
    mapped); each way waits at most ``timeout_s``."""
    data = np.ones(PROBE_BYTES, dtype=np.uint8)
    up = down = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        ray.get(actor.receive.remote(ray.put(data)), timeout=timeout_s)
        up = min(up, time.perf_counter() - t0)
        t0 = time.perf_counter()
        ray.get(actor.send.remote(PROBE_BYTES), timeout=timeout_s)
        down = min(down, time.perf_counter() - t0)
    return (
        PROBE_BYTES / max(up - latency_s, 1e-6),
        PROBE_BYTES / max(down - latency_s, 1e-6),
    )


def holders(actor: Any, node: dict[str, Any], wanted: Mapping[str, float]) -> str | None:
    """Why ``actor``, not started yet, is not: other contexts' node actors live on the node
    and hold its ``wanted`` resources (named, with their driver); None when that is not
    so (a process was leased for it: it is opening its devices) or cannot be told.

    An actor with no process may also have been granted its resources just now, its
    process starting; callers ask only after ``node_timeout_s`` of waiting, far longer
    than a process start."""
    try:
        # Ray's actor table without the dashboard: the GCS state accessor
        # (``ray.util.state`` needs the dashboard, which clusters may run without).
        from ray._private import state

        mine = actor._actor_id.hex()
        if state.actors(mine).get("Pid"):
            return None
        table = state.actors().values()
        driver = ray.get_runtime_context().get_job_id()
    except Exception:
        return None
    others = [
        a
        for a in table
        if a["ActorID"] != mine
        and a["State"] == "ALIVE"
        and a["ActorClassName"] == NodeWorker.__name__
        and a["Address"]["NodeID"] == node["NodeID"]
    ]
    if not others:
        return None
    named = ", ".join(
        f"actor {a['ActorID']} (pid {a['Pid']}, "
        f"{'this driver' if a['JobID'] == driver else 'driver job ' + a['JobID']})"
        for a in others
    )
    return (
        f"its resources {dict(wanted)} on {node['NodeManagerAddress']} (Ray node "
        f"{node['NodeID'][:12]}) are held by another RayContext's node actor: {named}; "
        f"close that RayContext first, or give the contexts resources= that the node "
        f"offers enough of for both"
    )


def _failed(index: int, node: dict[str, Any], actor: Any, reason: str) -> Node:
    """A node whose actor did not start (ended, so it never takes the resource later)."""
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
    failed = Node(index=index, actor=actor, info=info, model=NodeModel(index, {}))
    failed.healthy = False
    failed.reason = reason
    return failed


def _measured(
    index: int, node: dict[str, Any], actor: Any, info: dict[str, Any], timeout_s: float
) -> Node:
    """A started node with the driver's measurements of it."""
    try:
        offset, latency = clock_offset(actor, timeout_s)
        up, down = transfer_rates(actor, latency, timeout_s)
    except GetTimeoutError:
        return _failed(
            index,
            node,
            actor,
            f"hung: did not answer the driver's measurements within node_timeout_s={timeout_s}",
        )
    except RayError as e:
        return _failed(index, node, actor, f"did not start: {type(e).__name__}: {e}")
    info.update(
        {
            "clock_offset_s": offset,
            "latency_s": latency,
            "upload_bytes_per_s": up,
            "download_bytes_per_s": down,
        }
    )
    model = NodeModel(index, dict(info["throughput"]), up, down, latency)
    return Node(index=index, actor=actor, info=info, model=model, clock_offset_s=offset)


def connect(
    found: list[dict[str, Any]],
    actors: list[Any],
    wanted: Mapping[str, float],
    timeout_s: float,
) -> list[Node]:
    """The driver's view of the started actors (``actors[i]`` on ``found[i]``): their
    descriptions, clock offsets and rates. A node whose actor does not start (or whose
    devices do not open) is there, failed, its actor ended: one still waiting after
    ``timeout_s`` for resources another context's actor holds (see :func:`holders`; looked
    at again every ``timeout_s``), or not started within ``STARTUP_TIMEOUT_S``."""
    waiting = {
        a.describe.remote(n["NodeID"], n["NodeManagerAddress"]): i
        for i, (n, a) in enumerate(zip(found, actors))
    }
    infos: dict[int, dict[str, Any]] = {}
    reasons: dict[int, str] = {}
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            for i in waiting.values():
                reasons[i] = (
                    f"did not start within {STARTUP_TIMEOUT_S:.0f} s (it waited for the "
                    f"node's resources {dict(wanted)}, or for its devices to open)"
                )
            break
        ready, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=min(timeout_s, left))
        for ref in ready:
            i = waiting.pop(ref)
            try:
                infos[i] = ray.get(ref, timeout=timeout_s)
            except (GetTimeoutError, RayError) as e:
                reasons[i] = f"did not start: {type(e).__name__}: {e}"
        for ref, i in list(waiting.items()):
            held = holders(actors[i], found[i], wanted)
            if held is not None:
                reasons[i] = held
                del waiting[ref]
    return [
        _measured(i, n, a, infos[i], timeout_s) if i in infos else _failed(i, n, a, reasons[i])
        for i, (n, a) in enumerate(zip(found, actors))
    ]
