"""Grids and dtypes: ``life`` keeps a float grid's dtype (cells stay 0.0/1.0, the same
generations as the uint8 grid, bit for bit on the host device, lavapipe and both), bool and
integer grids keep giving uint8, and float cells other than 0 and 1 are refused by name."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from amari_gpu import InvalidArgumentError, MultiGpuContext

RNG = np.random.default_rng(2828)


@pytest.fixture(scope="module")
def both() -> Iterator[MultiGpuContext]:
    """lavapipe (two logical devices) and the host device."""
    ctx = MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2)
    yield ctx
    ctx.close()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_life_keeps_a_float_grids_dtype(both: MultiGpuContext, dtype: type) -> None:
    cells = (RNG.random((67, 45)) < 0.35).astype(np.uint8)
    want = both.life(cells, 9, halo=2)
    grid = cells.astype(dtype)
    before = grid.copy()
    got = both.life(grid, 9, halo=2)
    assert got.dtype == dtype
    assert np.array_equal(got, want.astype(dtype))
    assert np.array_equal(grid, before)
    # Every split of the bands gives the same generations.
    for split in ([67, 0, 0], [0, 30, 37], [20, 20, 27]):
        assert np.array_equal(both.life(grid, 9, halo=3, split=split), got)
    out = np.full((67, 45), 7, dtype)
    assert both.life(grid, 9, halo=2, out=out) is out
    assert np.array_equal(out, got)


def test_life_float_cells_must_be_zero_or_one(both: MultiGpuContext) -> None:
    for bad in (0.5, np.nan, -1.0, 2.0):
        grid = np.zeros((4, 5))
        grid[2, 3] = bad
        with pytest.raises(
            InvalidArgumentError, match=r"grid: expected cells 0 or 1, found .* at \(2, 3\)"
        ):
            both.life(grid, 1)
    with pytest.raises(TypeError, match="out: expected dtype float32"):
        both.life(np.zeros((4, 5), np.float32), 1, out=np.zeros((4, 5), np.uint8))
    with pytest.raises(TypeError, match="grid: expected an array of 0/1 cells"):
        both.life(np.zeros((4, 5), np.longdouble), 1)


def test_life_of_bool_and_integer_grids_stays_uint8(both: MultiGpuContext) -> None:
    for dtype in (np.bool_, np.int64, np.uint8):
        assert both.life(np.ones((4, 5), dtype), 1).dtype == np.uint8
