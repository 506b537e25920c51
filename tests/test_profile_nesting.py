"""Slices on a profile track nest or do not overlap, as Perfetto requires.

The tracks are the ones the Chrome-trace export draws: per device its queue (kernels), its
worker thread (uploads, waits, readbacks) and its re-runs. On a mixed Vulkan+GL context with
GPU timestamps, a readback used to begin a rounding error before its wait ended, and a
kernel aligned with a tighter GPU clock offset began before the previous one ended. The
check reads the events as a user does, in Python floats: end = start + duration.
"""

from __future__ import annotations

from collections import defaultdict

import amari_gpu as ag
import numpy as np
import pytest


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


def test_the_checker_finds_a_partial_overlap():
    wait = {"device": 0, "kind": "wait", "start_s": 1.0, "duration_s": 0.5}
    late = {"device": 0, "kind": "readback", "start_s": 1.4, "duration_s": 0.5}
    inside = {"device": 0, "kind": "readback", "start_s": 1.1, "duration_s": 0.1}
    after = {"device": 0, "kind": "readback", "start_s": 1.5, "duration_s": 0.1}
    other = {"device": 0, "kind": "kernel", "start_s": 1.2, "duration_s": 1.0}
    assert _partial_overlaps([wait, late]) == [(wait, late)]
    assert _partial_overlaps([wait, inside, after, other]) == []
