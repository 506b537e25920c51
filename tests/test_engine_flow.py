"""A device working alone keeps its chunks flowing: a wgpu device holds two chunks in flight,
so the first chunk is read back before the last one is uploaded, however many chunks the call
has (the host device alone takes all of a call's chunks in one batch; a wgpu device that
did the same would upload the whole call before reading anything back)."""

from __future__ import annotations

import numpy as np
import pytest
from amari_gpu import MultiGpuContext

CHUNK = 4096


@pytest.fixture(scope="module")
def lavapipe() -> MultiGpuContext:
    ctx = MultiGpuContext(backends=["vulkan"], chunk_items=CHUNK)
    assert len(ctx.devices) == 1, ctx.devices
    return ctx


def test_a_lone_wgpu_device_reads_back_before_it_has_uploaded_the_whole_call(
    lavapipe: MultiGpuContext,
) -> None:
    a = np.random.default_rng(0).random((16 * CHUNK, 8), dtype=np.float32)
    want = lavapipe.geometric_product(a, a)
    with lavapipe.profile() as prof:
        got = lavapipe.geometric_product(a, a)
    assert np.array_equal(got, want)
    uploads = [e["start_s"] for e in prof.events if e["kind"] == "upload"]
    readbacks = [e["start_s"] for e in prof.events if e["kind"] == "readback"]
    assert len(uploads) == len(readbacks) == 16
    assert min(readbacks) < max(uploads), "every chunk was uploaded before any was read back"
