"""One timeline for a cluster: the user's calls on the driver and every node's profile
(events on its own clock) aligned to the driver's clock and merged. The summary and the
Chrome trace are the core's (``_native.profile_summary``, ``_native.chrome_trace_of``):
the trace has the driver's calls in one process and each node's timeline, with the core's
tracks and overlap lanes, in a process of its own."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from .. import _native
from ..profiler import CallsOf
from .dispatch import Dispatcher, Node

if TYPE_CHECKING:
    from .._mixin import KernelHost
    from .._native import EventDict, KernelCallDict, TraceProcessDict, UserCallDict
    from ..planning import Plan

_DRIVER_PID = 1_000_000
"""The driver's process in the trace (nodes are 0, 1, ...)."""


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
        # Per user call, the cluster plans its dispatches made (the model's figures).
        self._plans: dict[int, list[Plan]] = {}
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

    def planned(self, plan: Plan) -> None:
        """Notes a cluster plan the current thread's user call runs."""
        index = getattr(self._inside, "call", None)
        if index is not None:
            with self._lock:
                self._plans.setdefault(index, []).append(plan)

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

    def _user_call_of(self, start_s: float) -> int:
        """The user call a node's step at ``start_s`` (driver clock) belongs to: the one
        whose span holds it, else the nearest (clock offsets are measured, not exact); the
        index past the calls when there are none."""
        if not self.calls:
            return 0

        def distance(c: dict[str, Any]) -> float:
            return max(float(c["start_s"]) - start_s, start_s - float(c["end_s"]), 0.0)

        return min(range(len(self.calls)), key=lambda i: distance(self.calls[i]))

    def summary(self) -> dict[str, Any]:
        """The core's summary of the cluster's timeline, with each user call as one call of
        the cluster (its span, and the plans its dispatches made over the nodes):
        ``makespan_s``, ``predicted_lower_bound_s``, ``efficiency``, ``imbalance``,
        ``bottleneck`` and ``figures`` as a local profile's; ``calls`` (the user's calls),
        ``kernel_calls`` (the kernel calls the nodes made), ``devices`` keyed ``(node,
        device)``, ``busy_s`` per node, and ``nodes``: each node's own summary."""
        keys = sorted({(e["node"], e["device"]) for e in self.events if e["device"] is not None})
        ids = {key: i for i, key in enumerate(keys)}
        events = [
            {
                **e,
                "device": None if e["device"] is None else ids[(e["node"], e["device"])],
                "call": self._user_call_of(e["start_s"]),
            }
            for e in self.events
        ]
        records = [self._record(i) for i in range(max(len(self.calls), 1))]
        users = [{**c, "kernel_calls": [i]} for i, c in enumerate(self.calls)]
        s: dict[str, Any] = dict(
            _native.profile_summary(
                cast("list[EventDict]", events),
                cast("list[KernelCallDict]", records),
                cast("list[UserCallDict]", users),
            )
        )
        s["kernel_calls"] = len(self.kernel_calls)
        s["devices"] = {keys[d]: figures for d, figures in s["devices"].items()}
        busy: dict[int, float] = {}
        for (node, _), d in s["devices"].items():
            busy[node] = busy.get(node, 0.0) + d["busy_s"]
        s["busy_s"] = busy
        s["nodes"] = dict(self.node_summaries)
        return s

    def _record(self, index: int) -> dict[str, Any]:
        """User call ``index`` as one kernel call of the cluster, for the core's summary."""
        plans = self._plans.get(index, [])
        call = self.calls[index] if index < len(self.calls) else {"method": "outside calls"}
        return {
            "kernel": call["method"],
            "items": sum(p.items for p in plans),
            "flops_per_item": 1.0,
            "bytes_per_item": 0.0,
            "strategy": ", ".join(dict.fromkeys(p.strategy for p in plans)),
            "lower_bound_s": sum(p.lower_bound_s for p in plans),
            "estimated_makespan_s": sum(p.estimated_makespan_s for p in plans),
        }

    def chrome_trace(self) -> dict[str, Any]:
        """The Trace Event Format object, written by the core: a ``driver`` process whose
        "calls" track holds the user's calls (one slice per call, named as called), and one
        process per node (pid = node index) with its kernel calls and, per device, its
        queue, worker and retries tracks."""
        processes: list[dict[str, Any]] = []
        if self.calls:
            users = [{**c, "kernel_calls": []} for c in self.calls]
            processes.append(_process(_DRIVER_PID, "driver", [], [], users, {}))
        for node, label in sorted(self.node_labels.items()):
            events = [e for e in self.events if e["node"] == node]
            made = [c for c in self.kernel_calls if c["node"] == node]
            processes.append(_process(node, label, events, made, [], self.names.get(node, {})))
        trace: dict[str, Any] = json.loads(
            _native.chrome_trace_of(cast("list[TraceProcessDict]", processes))
        )
        return trace

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


def _process(
    pid: int,
    label: str,
    events: list[dict[str, Any]],
    kernel_calls: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    names: dict[int, str],
) -> dict[str, Any]:
    """One process of the merged trace, as ``_native.chrome_trace_of`` takes it."""
    return {
        "pid": pid,
        "label": label,
        "events": events,
        "kernel_calls": kernel_calls,
        "calls": calls,
        "names": names,
    }


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
        self._cluster.recorder = self._profile
        return self._profile

    def __exit__(self, *exc: object) -> None:
        CallsOf.remove(self._host)
        self._cluster.recorder = None
        # A node lost meanwhile took its timeline with it.
        nodes = [n for n in self._started if n.healthy]
        calls = [(n, n.actor.profile_stop.remote()) for n in nodes]
        recorded = self._cluster.ask(calls, "profile_stop()")
        for node in nodes:
            if node.index in recorded:
                self._profile.merge(node, self._t0, recorded[node.index])
