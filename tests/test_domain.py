"""Domain decomposition against float64 numpy references: heat (both boundaries) and Life on
1..6 devices, halo widths 1, 2 and 4, odd sizes and grids with fewer rows than devices; and
bit-identical results across device counts, halos, adapters and layouts."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _domain_helpers import heat_reference, life_reference

SHAPES = [(37, 29), (5, 3), (3, 8), (1, 6), (2, 1)]
HALOS = [1, 2, 4]
DEVICES = [1, 2, 3, 4, 5, 6]


@pytest.fixture(scope="module")
def contexts() -> dict[int, ag.MultiGpuContext]:
    return {n: ag.MultiGpuContext(adapters=[0], devices_per_adapter=n) for n in DEVICES}


def _grid(shape: tuple[int, int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def _cells(shape: tuple[int, int], seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(shape) < 0.4).astype(np.uint8)


@pytest.mark.parametrize("devices", DEVICES)
@pytest.mark.parametrize("boundary", ["dirichlet", "periodic"])
def test_heat_matches_numpy_for_every_halo_and_shape(contexts, devices, boundary):
    ctx = contexts[devices]
    for i, shape in enumerate(SHAPES):
        grid = _grid(shape, i)
        want = heat_reference(grid, 9, 0.2, boundary)
        for halo in HALOS:
            got = ctx.stencil(grid, 9, alpha=0.2, boundary=boundary, halo=halo)
            assert got.dtype == np.float32 and got.shape == shape
            np.testing.assert_allclose(got, want, atol=1e-5, rtol=0, err_msg=f"{shape} h={halo}")
            report = ctx.last_run
            assert report is not None and report.steps == 9 and report.halo == halo
            assert sum(r["steps"] for r in report.rounds) == 9
            assert sum(rows for _, rows in report.layouts[0]["split"]) == shape[0]


@pytest.mark.parametrize("devices", DEVICES)
def test_life_matches_numpy_exactly(contexts, devices):
    ctx = contexts[devices]
    for i, shape in enumerate([*SHAPES, (40, 33), (16, 64)]):
        grid = _cells(shape, 100 + i)
        want = life_reference(grid, 13)
        for halo in HALOS:
            got = ctx.life(grid, 13, halo=halo)
            assert got.dtype == np.uint8 and got.shape == shape
            np.testing.assert_array_equal(got, want, err_msg=f"{shape} h={halo}")


def test_a_glider_comes_back_after_crossing_the_torus(contexts):
    grid = np.zeros((12, 10), dtype=np.uint8)
    grid[0, 1] = grid[1, 2] = grid[2, 0] = grid[2, 1] = grid[2, 2] = 1
    # A glider moves one cell diagonally every 4 steps: 4 * lcm(12, 10) steps bring it home.
    got = contexts[3].life(grid, 4 * 60, halo=4)
    np.testing.assert_array_equal(got, grid)


def test_results_are_bit_identical_across_devices_halos_and_layouts(contexts):
    grid = _grid((61, 47), 7)
    cells = _cells((61, 47), 8)
    heat = {}
    life = {}
    for devices in DEVICES:
        ctx = contexts[devices]
        for halo in HALOS:
            for boundary in ("dirichlet", "periodic"):
                heat[devices, halo, boundary] = ctx.stencil(grid, 17, 0.25, boundary, halo)
            life[devices, halo] = ctx.life(cells, 17, halo)
        skewed = [61 - (devices - 1)] + [1] * (devices - 1)
        heat[devices, "skewed"] = ctx.stencil(grid, 17, 0.25, "periodic", 2, split=skewed)
        heat[devices, "static"] = ctx.stencil(grid, 17, 0.25, "periodic", 2, rebalance=False)
    for key, value in heat.items():
        boundary = key[2] if len(key) == 3 else "periodic"
        assert value.view(np.uint32).tobytes() == heat[1, 1, boundary].view(np.uint32).tobytes(), (
            key
        )
    for key, value in life.items():
        np.testing.assert_array_equal(value, life[1, 1], err_msg=str(key))


def test_gl_and_vulkan_devices_together_give_the_same_bits():
    if len(ag.adapters()) < 2:
        pytest.fail("this machine is expected to have lavapipe and llvmpipe (GL)")
    grid = _grid((50, 31), 9)
    alone = ag.MultiGpuContext(adapters=[0]).stencil(grid, 11, 0.1, "dirichlet", 2)
    both = ag.MultiGpuContext(adapters=[0, 1], devices_per_adapter=2)
    together = both.stencil(grid, 11, 0.1, "dirichlet", 2)
    assert together.tobytes() == alone.tobytes()
    assert {d for d, rows in both.last_run.layouts[0]["split"] if rows} == {0, 1, 2, 3}
    np.testing.assert_array_equal(
        both.life(_cells((50, 31), 3), 11, 2), life_reference(_cells((50, 31), 3), 11)
    )


def test_grids_larger_than_one_binding_are_cut_into_several_bands_per_device(contexts):
    ctx = contexts[1]
    binding = ctx.devices[0].adapter.limits["max_storage_buffer_binding_size"]
    width = 2048
    height = binding // (4 * width) + 37  # more rows than one float32 binding holds
    grid = np.random.default_rng(3).random((height, width), dtype=np.float32)
    got = ctx.stencil(grid, 2, 0.25, "periodic", halo=2)
    assert ctx.last_run.layouts[0]["bands"] >= 2
    np.testing.assert_allclose(got, heat_reference(grid, 2, 0.25, "periodic"), atol=1e-5, rtol=0)


def test_zero_steps_return_a_copy(contexts):
    grid = _grid((4, 5), 1)
    got = contexts[2].stencil(grid, 0)
    assert got is not grid and got.tobytes() == grid.tobytes()
    assert np.isnan(contexts[2].last_run.step_s)
