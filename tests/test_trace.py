"""The Chrome trace keeps in Perfetto: on every track, complete ("X") slices nest or are
disjoint (Perfetto drops a slice that overlaps another without nesting), on a real profiled
run mixing Vulkan and GL devices with GPU timestamps; tracks are named after their device's
adapter and backend; events are named by kind with the chunk in ``args``."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import amari_gpu as ag
import numpy as np
import pytest


def crossings(trace: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Pairs of slices on one track that overlap without one containing the other, with
    times in whole nanoseconds as Perfetto reads them."""
    by_track: dict[tuple[int, int], list[tuple[int, int, Any]]] = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            start = round(e["ts"] * 1000)
            end = start + round(e["dur"] * 1000)
            by_track[(e["pid"], e["tid"])].append((start, end, e))
    bad = []
    for slices in by_track.values():
        # Sweep in start order, longest first: each slice must end within the innermost open
        # one; a stack of open ends suffices.
        slices.sort(key=lambda s: (s[0], -s[1]))
        open_: list[tuple[int, int, Any]] = []
        for s in slices:
            while open_ and open_[-1][1] <= s[0]:
                open_.pop()
            if open_ and open_[-1][1] < s[1]:
                bad.append((open_[-1][2], s[2]))
            open_.append(s)
    return bad


def test_the_checker_finds_crossing_slices():
    def x(tid: int, ts: float, dur: float) -> dict[str, Any]:
        return {"ph": "X", "pid": 1, "tid": tid, "ts": ts, "dur": dur}

    nested = {"traceEvents": [x(0, 0, 10), x(0, 2, 3), x(0, 10, 1), x(1, 5, 10)]}
    assert crossings(nested) == []
    crossed = {"traceEvents": [x(0, 0, 10), x(0, 5, 10)]}
    assert len(crossings(crossed)) == 1


@pytest.fixture(scope="module")
def mixed() -> ag.MultiGpuContext:
    backends = {a.backend for a in ag.adapters()}
    if not {"vulkan", "gl"} <= backends:
        pytest.skip(f"needs a Vulkan and a GL adapter, found {sorted(backends)}")
    return ag.MultiGpuContext(
        backends=["vulkan", "gl"], devices_per_adapter=2, chunk_items=2048, gpu_timestamps=True
    )


def test_a_mixed_backend_trace_nests_on_every_track(mixed, tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((60_000, 8), dtype=np.float32)
    scores = rng.standard_normal((20_000, 16), dtype=np.float32)
    with mixed.profile() as prof:
        mixed.geometric_product(a, a, strategy="adaptive")
        mixed.fisher_information(scores)
    assert len(prof.calls) == 2
    path = tmp_path / "trace.json"
    prof.save_chrome_trace(path)
    trace = json.loads(path.read_text())
    every = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    # The steps; the user calls and their kernel calls are the calls track's slices.
    complete = [e for e in every if e["cat"] != "call"]
    assert len(complete) == len(prof.events)
    assert [e["name"] for e in every if "kernel_calls" in e["args"]] == [
        c["name"] for c in prof.calls
    ]
    assert crossings(trace) == []

    # Grouped by kind; what varies is in args.
    assert {e["name"] for e in complete} <= set(ag.profiler.KINDS)
    kernels = [e for e in complete if e["name"] == "kernel"]
    assert {e["args"]["call"] for e in kernels} == {0, 1}
    assert all(isinstance(e["args"]["chunk"], int) for e in kernels)
    assert {e["args"]["clock"] for e in kernels} <= {"gpu", "host"}

    # Every track is named; device tracks by the device's adapter and backend.
    names = {
        e["tid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert {e["tid"] for e in complete} <= set(names)
    # A device gets tracks once it has events: which devices the planner and the adaptive
    # queue gave chunks to depends on measured rates, so only those are checked.
    worked = {e["args"]["device"] for e in kernels}
    assert len(worked) >= 2, worked
    for d in mixed.devices:
        if d.id not in worked:
            continue
        label = f"{d.adapter.name} ({d.adapter.backend})"
        assert f"device {d.id} queue — {label}" in names.values()
        assert f"device {d.id} worker — {label}" in names.values()
    # Kernels never share a track with the host-side steps of a worker.
    kernel_tids = {e["tid"] for e in kernels}
    assert kernel_tids.isdisjoint({e["tid"] for e in complete if e["name"] != "kernel"})
