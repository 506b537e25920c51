"""``MultiGpuContext.stats`` and ``health``: per-device counters of the distribution engine.

On fresh contexts (so the counters start at zero): after a call the items, chunks and bytes
moved add up to the problem (64 bytes up and 32 down per Cl(3,0) product), busy time is positive
exactly for the devices that worked, the counters accumulate over calls, and a static plan
(every strategy but the adaptive one) is followed device by device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from amari_gpu import STRATEGIES, MultiGpuContext
from cl3 import REL_TOL, relative_error

N = 100_003
CHUNK = 4096
BYTES_UP = 64  # a and b: 2 x 8 float32 per item
BYTES_DOWN = 32  # the product: 8 float32 per item
KEYS = {
    "device_id",
    "bytes_moved",
    "bytes_up",
    "bytes_down",
    "resident_bytes",
    "items_done",
    "chunks_done",
    "failed_chunks",
    "busy_s",
    "memory_in_use_bytes",
    "user_pipelines",
    "healthy",
    "reason",
}
COUNTERS = ("bytes_moved", "bytes_up", "bytes_down", "items_done", "chunks_done", "failed_chunks")


def _check_shape(stats: list[dict], devices: int) -> None:
    assert isinstance(stats, list) and len(stats) == devices
    for device_id, s in enumerate(stats):
        assert set(s) == KEYS
        assert s["device_id"] == device_id
        for name in (*COUNTERS, "memory_in_use_bytes", "user_pipelines"):
            assert isinstance(s[name], int) and s[name] >= 0, (name, s[name])
        assert isinstance(s["busy_s"], float) and math.isfinite(s["busy_s"]) and s["busy_s"] >= 0
        assert s["bytes_moved"] == s["bytes_up"] + s["bytes_down"]
        assert (s["healthy"], s["reason"]) == (True, None)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_counters_add_up_to_the_problem(reference_batch, strategy):
    a, b, want = reference_batch(N)
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, chunk_items=CHUNK)
    before = ctx.stats()
    _check_shape(before, 3)
    assert all(s[name] == 0 for s in before for name in COUNTERS)
    assert all(s["busy_s"] == 0.0 for s in before)

    out = ctx.geometric_product(a, b, strategy=strategy)
    assert relative_error(out, want) < REL_TOL
    plan = ctx.last_plan
    stats = ctx.stats()
    _check_shape(stats, 3)
    assert sum(s["items_done"] for s in stats) == N
    assert sum(s["chunks_done"] for s in stats) == plan.n_chunks == 25
    assert sum(s["bytes_up"] for s in stats) == N * BYTES_UP
    assert sum(s["bytes_down"] for s in stats) == N * BYTES_DOWN
    assert sum(s["bytes_moved"] for s in stats) == N * (BYTES_UP + BYTES_DOWN)
    assert all(s["failed_chunks"] == 0 for s in stats)
    for s in stats:
        worked = s["items_done"] > 0
        assert (s["busy_s"] > 0) is worked, s
        assert (s["chunks_done"] > 0) is worked, s
        assert s["bytes_up"] == s["items_done"] * BYTES_UP
        assert s["bytes_down"] == s["items_done"] * BYTES_DOWN
        if worked:
            # The device keeps its buffers pooled for the next call.
            assert s["memory_in_use_bytes"] > 0
    if plan.strategy != "adaptive":
        # A static plan is followed as planned: each device did exactly its share.
        share = {p.device_id: p for p in plan}
        for s in stats:
            planned = share.get(s["device_id"])
            assert s["items_done"] == (planned.items if planned else 0)
            assert s["chunks_done"] == (planned.chunks if planned else 0)

    ctx.geometric_product(a, b, strategy=strategy)
    again = ctx.stats()
    assert sum(s["items_done"] for s in again) == 2 * N
    assert sum(s["bytes_moved"] for s in again) == 2 * N * (BYTES_UP + BYTES_DOWN)
    for s, t in zip(stats, again):
        assert t["items_done"] >= s["items_done"]
        assert t["busy_s"] >= s["busy_s"]


def test_balanced_work_is_spread_over_every_device(reference_batch):
    a, b, _ = reference_batch(N)
    ctx = MultiGpuContext(adapters=[0, 1], devices_per_adapter=2, chunk_items=CHUNK)
    ctx.geometric_product(a, b, strategy="balanced")
    stats = ctx.stats()
    _check_shape(stats, 4)
    # 25 chunks over 4 devices: 7, 6, 6, 6 with the extra chunk on the lowest id; the last
    # device also holds the short last chunk.
    assert [s["chunks_done"] for s in stats] == [7, 6, 6, 6]
    assert [s["items_done"] for s in stats] == [7 * CHUNK, 6 * CHUNK, 6 * CHUNK, N - 19 * CHUNK]
    assert all(s["busy_s"] > 0 for s in stats)


def test_an_empty_call_does_no_work():
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=2)
    empty = np.zeros((0, 8), dtype=np.float32)
    out = ctx.geometric_product(empty, empty)
    assert out.shape == (0, 8) and out.dtype == np.float32
    assert ctx.last_plan.items == 0 and len(ctx.last_plan) == 0
    stats = ctx.stats()
    _check_shape(stats, 2)
    assert all(s[name] == 0 for s in stats for name in COUNTERS)
    assert all(s["busy_s"] == 0.0 for s in stats)


def test_health_reports_every_device(engine_ctx):
    health = engine_ctx.health()
    assert health == {d.id: {"healthy": True, "reason": None} for d in engine_ctx.devices}


@pytest.mark.parametrize("backends", [["host"], ["vulkan"], ["vulkan", "host"]])
def test_resident_work_counts_in_busy_time_and_memory_in_use(backends):
    # DeviceArray operations only (no numpy call first): their chunks count busy time on the
    # device that ran them, like any call's, and their shards count in the memory the
    # device holds, on the host device (host memory) as on a wgpu device (pooled buffers).
    ctx = MultiGpuContext(backends=backends, chunk_items=CHUNK)
    try:
        rows = np.random.default_rng(7).random((N, 8), dtype=np.float32)
        x = ctx.asarray(rows)
        y = ctx.geometric_product(x, x)
        stats = ctx.stats()
        _check_shape(stats, len(ctx.devices))
        assert sum(s["items_done"] for s in stats) == N
        for s in stats:
            assert (s["busy_s"] > 0) is (s["items_done"] > 0), s
            assert s["memory_in_use_bytes"] >= s["resident_bytes"], s
        assert sum(s["resident_bytes"] for s in stats) == 2 * N * 8 * 4
        del x, y
        assert all(s["resident_bytes"] == 0 for s in ctx.stats())
    finally:
        ctx.close()


def test_grid_rounds_and_fast_path_calls_count_in_busy_time():
    ctx = MultiGpuContext(backends=["vulkan", "host"])
    try:
        grid = np.random.default_rng(3).random((64, 48), dtype=np.float32)
        ctx.stencil(grid, 4, 0.2, "periodic")
        worked = [s for s in ctx.stats() if s["items_done"] > 0]
        assert worked and all(s["busy_s"] > 0 for s in worked)
        before = {s["device_id"]: s["busy_s"] for s in ctx.stats()}
        a = np.ones((1, 8), np.float32)
        ctx.geometric_product(a, a)
        assert ctx.last_plan is not None and ctx.last_plan.fast_path
        device = ctx.last_plan.assignments[0].device_id
        assert ctx.stats()[device]["busy_s"] > before[device]
    finally:
        ctx.close()
