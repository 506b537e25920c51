"""Resident calls run as pieces of the engine's one worker loop: a device that fails mid-call
hands its pieces to another (which rebuilds the lost rows from their lineage), and the fault
shows where the engine's own failures show — the device's ``failed_chunks`` counter and a
``retry`` event of the device that took the piece over — for row kernels and reductions
alike, with results bit-identical to the numpy path."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest

ROWS = 3000


@pytest.fixture()
def two() -> ag.MultiGpuContext:
    """Two lavapipe devices, so the rows of the failing one have exactly one place to go."""
    ctx = ag.MultiGpuContext(
        backends=["vulkan"], devices_per_adapter=2, chunk_items=256, strategy="balanced"
    )
    yield ctx
    ctx.close()


def _failed(ctx: ag.MultiGpuContext) -> list[int]:
    return [s["failed_chunks"] for s in ctx.stats()]


def _fails_over(ctx: ag.MultiGpuContext, call) -> list[dict]:
    """Runs ``call()`` with device 1 failing at its first piece; returns the profile events."""
    before = _failed(ctx)
    ctx.inject_fault(1, after_chunks=0)
    with ctx.profile() as prof:
        call()
    assert not ctx.health()[1]["healthy"]
    assert [a - b for a, b in zip(_failed(ctx), before)] == [0, 1]
    retries = [e for e in prof.events if e["kind"] == "retry"]
    assert len(retries) == 1 and retries[0]["device"] == 0, retries
    return prof.events


def test_a_row_kernel_hands_a_failed_devices_piece_to_the_other(two) -> None:
    a = np.random.default_rng(3).standard_normal((ROWS, 8), dtype=np.float32)
    da = two.asarray(a, strategy="balanced")
    assert {device for device, _, _ in da.sharding} == {0, 1}
    got = []
    events = _fails_over(two, lambda: got.append(two.reverse(da)))
    assert np.array_equal(got[0].numpy(), two.reverse(a))
    assert {device for device, _, _ in got[0].sharding} == {0}
    kernels = [e for e in events if e["kind"] == "kernel"]
    assert sum(e["items"] for e in kernels) == ROWS


def test_a_reduction_hands_a_failed_devices_chunks_to_the_other(two) -> None:
    rng = np.random.default_rng(4)
    s = rng.standard_normal((ROWS, 9)).astype(np.float32)
    w = rng.random(ROWS).astype(np.float32)
    want = two.fisher_information(s, w)
    ds = two.asarray(s, strategy="balanced")
    got = []
    _fails_over(two, lambda: got.append(two.fisher_information(ds, w)))
    assert np.array_equal(got[0].view(np.uint64), want.view(np.uint64))
    # The lost shard was rebuilt on device 0 and stays there.
    assert {device for device, _, _ in ds.sharding} == {0}
