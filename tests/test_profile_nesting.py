"""Slices on a profile track nest or do not overlap, as Perfetto requires.

The tracks are the ones the Chrome-trace export draws: the calls track (a slice per user
call, its kernel calls nested under it), then per device its queue (kernels), its worker
thread (uploads, waits, readbacks) and its re-runs. On a mixed Vulkan+GL context with
GPU timestamps, a readback used to begin a rounding error before its wait ended, and a
kernel aligned with a tighter GPU clock offset began before the previous one ended. The
check reads the events as a user does, in Python floats: end = start + duration.
"""

from __future__ import annotations

import json
from collections import defaultdict

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu.profiler import TIMES as X


def _track(event: dict) -> tuple[object, str]:
    if event["device"] is None:
        return (None, "host")
    role = {"kernel": "queue", "retry": "retries"}.get(event["kind"], "worker")
    return (event["device"], role)


def _partial_overlaps(events: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of slices on one track that overlap without one containing the other."""
    tracks: dict[tuple[object, str], list[tuple[float, float, dict]]] = defaultdict(list)
    for e in events:
        tracks[_track(e)].append((e["start_s"], e["start_s"] + e["duration_s"], e))
    found = []
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        for i, (_, a1, a) in enumerate(spans):
            for b0, b1, b in spans[i + 1 :]:
                if b0 >= a1:
                    break
                if b1 > a1:  # starts inside a, ends after it
                    found.append((a, b))
    return found


@pytest.fixture(scope="module")
def mixed_timed() -> ag.MultiGpuContext:
    ctx = ag.MultiGpuContext(backends=["vulkan", "gl"], gpu_timestamps=True)
    yield ctx
    ctx.close()


def test_every_track_of_large_products_nests(mixed_timed):
    ctx = mixed_timed
    assert {d.adapter.backend for d in ctx.devices} == {"vulkan", "gl"}
    assert all(d.gpu_timestamps for d in ctx.devices)
    a = np.random.default_rng(0).standard_normal((1_000_000, 8), dtype=np.float32)
    # Balanced: both devices get chunks whatever the model thinks of them.
    ctx.geometric_product(a, a, strategy="balanced")  # compiled and measured before
    with ctx.profile() as prof:
        for _ in range(3):
            ctx.geometric_product(a, a, strategy="balanced")
    events = prof.events
    kernels = [e for e in events if e["kind"] == "kernel"]
    assert {e["device"] for e in kernels} == {d.id for d in ctx.devices}
    assert any(e["clock"] == "gpu" for e in kernels)
    bad = _partial_overlaps(events)
    assert bad == [], f"{len(bad)} partial overlaps, first: {bad[:2]}"


def _trace_partial_overlaps(trace: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of X slices on one track of a trace that overlap without nesting, in whole
    nanoseconds (the trace's resolution)."""
    events = [
        {
            "track": e["tid"],
            "start_s": round(e["ts"] * 1e3),
            "duration_s": round(e["dur"] * 1e3),
            "name": e["name"],
        }
        for e in trace
        if e["ph"] == "X"
    ]
    tracks: dict[object, list[dict]] = defaultdict(list)
    for e in events:
        tracks[e["track"]].append(e)
    return [pair for spans in tracks.values() for pair in _partial_overlaps_on(spans)]


def _partial_overlaps_on(spans: list[dict]) -> list[tuple[dict, dict]]:
    return _partial_overlaps([{**e, "device": 0, "kind": "kernel"} for e in spans])


def test_the_calls_track_nests_user_calls_over_their_kernel_calls(mixed_timed, tmp_path):
    ctx = mixed_timed
    w = np.random.default_rng(1).uniform(1.0, 5.0, (200, 200)).astype(np.float32)
    a = np.random.default_rng(2).standard_normal((200_000, 8), dtype=np.float32)
    ctx.shortest_paths(w), ctx.geometric_product(a, a, strategy="balanced")
    with ctx.profile() as prof:
        ctx.shortest_paths(w)
        ctx.geometric_product(a, a, strategy="balanced")
    path = tmp_path / "calls.json"
    prof.save_chrome_trace(path)
    trace = json.loads(path.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    calls = [e for e in trace if e["ph"] == "X" and names[e["tid"]].startswith("calls")]
    user = [e["name"] for e in calls if "kernel_calls" in e["args"]]
    assert user == [f"shortest_paths(200{X}200)", f"geometric_product(200000{X}8, 200000{X}8)"]
    assert len(calls) > len(user) + 2, "the kernel calls' slices are on the calls track too"
    bad = _trace_partial_overlaps(trace)
    assert bad == [], f"{len(bad)} partial overlaps, first: {bad[:2]}"


def test_the_checker_finds_a_partial_overlap():
    wait = {"device": 0, "kind": "wait", "start_s": 1.0, "duration_s": 0.5}
    late = {"device": 0, "kind": "readback", "start_s": 1.4, "duration_s": 0.5}
    inside = {"device": 0, "kind": "readback", "start_s": 1.1, "duration_s": 0.1}
    after = {"device": 0, "kind": "readback", "start_s": 1.5, "duration_s": 0.1}
    other = {"device": 0, "kind": "kernel", "start_s": 1.2, "duration_s": 1.0}
    assert _partial_overlaps([wait, late]) == [(wait, late)]
    assert _partial_overlaps([wait, inside, after, other]) == []
