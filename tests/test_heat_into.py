"""A heat run writes its grid where it returns it: into the caller's ``out``, or into a new
array (a large one in memory an earlier result gave back, whatever that holds). The bits
are those of a run on any other devices; a device failing mid-run starts the run again
from the caller's grid, which the run never writes; a failure after the run began writing
the caller's ``out`` says so."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _domain_helpers import heat_reference


def grid_of(height: int, width: int, seed: int, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).random((height, width)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_into_out_or_a_new_array_the_bits_of_one_device(dtype):
    # lavapipe alone, and two of its devices beside the host device (which then rounds
    # `fma` as lavapipe does).
    one = ag.MultiGpuContext(backends=["vulkan"])
    many = ag.MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2)
    # 512 x 512 float32 is 1 MiB, the smallest result in reused memory; widths with and
    # without padding; a run of no steps.
    for (height, width), steps in [((512, 512), 9), ((40, 36), 7), ((40, 37), 7), ((40, 36), 0)]:
        grid = grid_of(height, width, height + width, dtype)
        before = grid.copy()
        want = one.stencil(grid, steps, 0.2, "periodic", halo=3)
        for _ in range(2):  # the second new array may reuse the first one's memory
            got = many.stencil(grid, steps, 0.2, "periodic", halo=3)
            assert got.tobytes() == want.tobytes(), (height, width, steps)
            out = np.full((height, width), np.nan, dtype)
            returned = many.stencil(grid, steps, 0.2, "periodic", halo=3, out=out)
            assert returned is out
            assert out.tobytes() == want.tobytes(), (height, width, steps)
        np.testing.assert_array_equal(grid, before)
        atol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(want, heat_reference(grid, steps, 0.2, "periodic"), atol=atol)


@pytest.mark.parametrize("into_out", [False, True])
def test_a_device_failing_mid_run_starts_again_from_the_callers_grid(into_out):
    grid = grid_of(96, 64, 5)
    want = ag.MultiGpuContext(adapters=[0]).stencil(grid, 20, 0.2, "dirichlet", halo=2)
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=3)
    ctx.inject_fault(1, after_chunks=3)  # fails when it starts its fourth round
    out = np.full(grid.shape, np.nan, np.float32) if into_out else None
    got = ctx.stencil(grid, 20, 0.2, "dirichlet", halo=2, out=out)
    assert [device for device, _ in ctx.last_run.failures] == [1]
    assert got.tobytes() == want.tobytes()


def test_every_device_failing_after_out_was_written_says_so():
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)
    ctx.inject_fault(0, 2)
    ctx.inject_fault(1, 2)
    grid = grid_of(64, 64, 7)
    out = np.zeros_like(grid)
    with pytest.raises(ag.DeviceLostError, match="out may hold part of the result"):
        ctx.stencil(grid, 12, 0.2, "periodic", halo=2, out=out)
