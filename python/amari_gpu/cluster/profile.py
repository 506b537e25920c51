"""One timeline for a cluster: the user's calls on the driver, and every node's profile
(events on its own clock) aligned to the driver's clock and merged; a summary per node and
device; a Chrome trace with the calls on the driver's track, one process per node and
tracks per device."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from ..profiler import CallsOf
from .dispatch import Dispatcher, Node

if TYPE_CHECKING:
    from .._mixin import KernelHost

# Tracks of a device within its node's process: kernels (its queue), its worker's steps,
# re-runs; as the single-context trace, so slices on a track nest or are disjoint.
_LANES = {"kernel": 0, "retry": 2}
_LANE_NAMES = ("queue", "worker", "retries")
_HOST_TID = 1_000_000
# The driver's process in the trace (nodes are 0, 1, ...), its calls on one track.
_DRIVER_PID = 1_000_000


class ClusterProfile:
    """What the cluster's calls did while ``with rc.profile() as prof:`` was active.

    ``calls`` are the user's calls on the driver (as :attr:`amari_gpu.Profile.calls`
    names them: ``name``, ``method``, ``args``, ``start_s``, ``end_s``, on the driver's
    clock); ``kernel_calls`` the kernel calls the nodes made for them, with ``node``.
    ``events`` are the nodes' events (see :class:`amari_gpu.Profile`) with ``node`` (the
    node index) added and ``start_s`` in seconds since the driver started the profile,
    aligned with each node's measured clock offset; ``device`` is the device id within
    its node. ``node_summaries`` holds each node's own summary."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.kernel_calls: list[dict[str, Any]] = []
        self.node_summaries: dict[int, dict[str, Any]] = {}
        self.names: dict[int, dict[int, str]] = {}
        self.node_labels: dict[int, str] = {}
        self.t0 = time.time()
        self._lock = threading.Lock()
        self._inside = threading.local()

    def begin_call(self, method: str, args: str) -> int | None:
        """Opens a user call on the driver's clock; None when this thread is already in one
        (a call inside another belongs to the outer one)."""
        if getattr(self._inside, "call", None) is not None:
            return None
        start = time.time() - self.t0
        with self._lock:
            self.calls.append(
                {
                    "name": f"{method}({args})",
                    "method": method,
                    "args": args,
                    "start_s": start,
                    "end_s": start,
                }
            )
            index = len(self.calls) - 1
        self._inside.call = index
        return index

    def end_call(self, index: int) -> None:
        """Closes user call ``index`` (opened on this thread)."""
        with self._lock:
            self.calls[index]["end_s"] = max(time.time() - self.t0, self.calls[index]["start_s"])
        self._inside.call = None

    def merge(self, node: Node, driver_t0: float, recorded: dict[str, Any]) -> None:
        """Adds one node's recording."""
        shift = recorded["t0"] - node.clock_offset_s - driver_t0
        for e in recorded["events"]:
            self.events.append({**e, "node": node.index, "start_s": e["start_s"] + shift})
        self.kernel_calls.extend({**c, "node": node.index} for c in recorded["kernel_calls"])
        if recorded["summary"] is not None:
            self.node_summaries[node.index] = recorded["summary"]
        self.names[node.index] = {int(k): str(v) for k, v in recorded["names"].items()}
        self.node_labels[node.index] = f"node {node.index}: {node.info['address']}"
        self.events.sort(key=lambda e: e["start_s"])

    def summary(self) -> dict[str, Any]:
        """``makespan_s`` (first start to last end over all nodes), ``calls`` (the user's
        calls), ``kernel_calls`` (the kernel calls the nodes made), ``busy_s`` per node,
        and ``devices`` keyed ``(node, device)``: busy_s, kernel_s, utilization, items,
        chunks; ``nodes``: each node's own summary."""
        if not self.events:
            return {
                "calls": len(self.calls),
                "kernel_calls": len(self.kernel_calls),
                "makespan_s": 0.0,
                "nodes": {},
                "devices": {},
                "busy_s": {},
            }
        start = min(e["start_s"] for e in self.events)
        end = max(e["start_s"] + e["duration_s"] for e in self.events)
        makespan = end - start
        devices: dict[tuple[int, int], dict[str, Any]] = {}
        for e in self.events:
            if e["device"] is None:
                continue
            d = devices.setdefault(
                (e["node"], e["device"]),
                {"busy_s": 0.0, "kernel_s": 0.0, "items": 0, "chunks": 0},
            )
            if e["kind"] == "kernel":
                d["kernel_s"] += e["duration_s"]
                d["items"] += e["items"]
                d["chunks"] += 1
            if e["kind"] != "wait":
                d["busy_s"] += e["duration_s"]
        for d in devices.values():
            d["utilization"] = d["kernel_s"] / makespan if makespan > 0 else 0.0
        busy: dict[int, float] = {}
        for (node, _), d in devices.items():
            busy[node] = busy.get(node, 0.0) + d["busy_s"]
        return {
            "calls": len(self.calls),
            "kernel_calls": len(self.kernel_calls),
            "makespan_s": makespan,
            "busy_s": busy,
            "devices": devices,
            "nodes": dict(self.node_summaries),
        }

    def chrome_trace(self) -> dict[str, Any]:
        """The Trace Event Format object: the driver's process with the user's calls on
        its "calls" track (one slice per call, named as called), then process = node,
        threads = device tracks."""
        trace: list[dict[str, Any]] = _driver_calls(self.calls)
        tracks: set[tuple[int, int]] = set()
        for e in self.events:
            pid = e["node"]
            if e["device"] is None:
                tid = _HOST_TID
            else:
                tid = 3 * e["device"] + _LANES.get(e["kind"], 1)
            tracks.add((pid, tid))
            trace.append(
                {
                    "ph": "X",
                    "name": e["kind"],
                    "pid": pid,
                    "tid": tid,
                    "ts": e["start_s"] * 1e6,
                    "dur": e["duration_s"] * 1e6,
                    "args": {
                        k: e[k] for k in ("chunk", "call", "bytes", "items", "clock", "device")
                    },
                }
            )
        for pid, label in self.node_labels.items():
            trace.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
        for pid, tid in sorted(tracks):
            if tid == _HOST_TID:
                name = "host"
            else:
                device = tid // 3
                adapter = self.names.get(pid, {}).get(device, "?")
                name = f"device {device}: {adapter} ({_LANE_NAMES[tid % 3]})"
            trace.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
            )
        return {"traceEvents": trace, "displayTimeUnit": "ms"}

    def save_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes :meth:`chrome_trace` as JSON (open it in Perfetto or chrome://tracing)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.chrome_trace(), f)

    def __str__(self) -> str:
        s = self.summary()
        lines = [
            f"calls {s['calls']} (kernel calls {s['kernel_calls']} on the nodes)  "
            f"makespan {s['makespan_s'] * 1e3:.2f} ms",
            f"{'node':>5} {'device':>6} {'busy ms':>9} {'util':>6} {'items':>10} {'chunks':>7}",
        ]
        for (node, device), d in sorted(s["devices"].items()):
            lines.append(
                f"{node:>5} {device:>6} {d['busy_s'] * 1e3:>9.2f} {d['utilization']:>6.0%} "
                f"{d['items']:>10} {d['chunks']:>7}"
            )
        return "\n".join(lines)


def _driver_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's calls as slices of the driver's process: on its first track while they
    follow one another, on a further one where calls from several threads overlap (slices
    on a track nest or are disjoint)."""
    if not calls:
        return []
    trace: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": _DRIVER_PID, "args": {"name": "driver"}}
    ]
    lanes: list[float] = []
    for call in sorted(calls, key=lambda c: (c["start_s"], -c["end_s"])):
        lane = next((i for i, end in enumerate(lanes) if end <= call["start_s"]), len(lanes))
        if lane == len(lanes):
            lanes.append(0.0)
            label = "calls" if lane == 0 else f"calls (lane {lane + 1})"
            trace.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": _DRIVER_PID,
                    "tid": lane,
                    "args": {"name": label},
                }
            )
        lanes[lane] = call["end_s"]
        trace.append(
            {
                "ph": "X",
                "name": call["name"],
                "cat": "call",
                "pid": _DRIVER_PID,
                "tid": lane,
                "ts": call["start_s"] * 1e6,
                "dur": (call["end_s"] - call["start_s"]) * 1e6,
                "args": {"method": call["method"], "args": call["args"]},
            }
        )
    return trace


class ClusterRecording:
    """The context manager behind ``rc.profile()``; every node gets ``node_timeout_s`` to
    start and to stop recording (one that does not answer is marked hung, its timeline
    left out). The user's calls are recorded on the driver, through the context's kernel
    entry points as on a local context."""

    def __init__(self, cluster: Dispatcher, host: KernelHost) -> None:
        self._cluster = cluster
        self._host = host
        self._profile = ClusterProfile()
        self._t0 = 0.0
        self._started: list[Node] = []

    def __enter__(self) -> ClusterProfile:
        healthy = self._cluster.healthy()
        calls = [(n, n.actor.profile_start.remote()) for n in healthy]
        started = self._cluster.ask(calls, "profile_start()")
        self._started = [n for n in healthy if n.index in started]
        self._t0 = self._profile.t0 = time.time()
        CallsOf.install(self._host, self._profile)
        return self._profile

    def __exit__(self, *exc: object) -> None:
        CallsOf.remove(self._host)
        # A node lost meanwhile took its timeline with it.
        nodes = [n for n in self._started if n.healthy]
        calls = [(n, n.actor.profile_stop.remote()) for n in nodes]
        recorded = self._cluster.ask(calls, "profile_stop()")
        for node in nodes:
            if node.index in recorded:
                self._profile.merge(node, self._t0, recorded[node.index])
