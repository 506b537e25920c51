"""Configuration that cannot work is refused up front, naming the argument, the allowed range
and the value: a grid ``split=`` whose entries wrap past 2**64 to the grid's height (laying it
out grew a list until the process was killed), ``host_threads=5000`` (27 s to open, 185 s
for the first call on 2 cores), ``chunk_items=2**64 - 1`` and a ``sync_timeout_ms`` no
deadline can hold (accepted, then every call failed), and ``ctx.strategy = ...`` on a closed
context (accepted silently; tested with every other call in test_lifecycle.py)."""

from __future__ import annotations

import re

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import InvalidArgumentError

HALF = 2**63
U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1
DAY_MS = 24 * 60 * 60 * 1000

# --- split= of the grid methods ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "message"),
    [
        # The sum of these wraps past 2**64 to exactly the grid's 8 rows.
        (
            [HALF + 4, HALF + 4, 0],
            rf"expected at most the grid's 8 rows per device, got {HALF + 4} for ",
        ),
        (
            [U64_MAX, 9, 0],
            rf"expected at most the grid's 8 rows per device, got {U64_MAX} for device 0$",
        ),
        (
            [4, 4, 10**12],
            r"expected at most the grid's 8 rows per device, got 1000000000000 for device 2$",
        ),
        ([0, 0, 0], r"expected rows adding up to the grid's 8 rows, got 0$"),
        ([3, 3, 3], r"expected rows adding up to the grid's 8 rows, got 9$"),
        ([4, 4], r"expected rows for each of the 3 devices, got 2 entries$"),
        ([4, 4, 0, 0], r"expected rows for each of the 3 devices, got 4 entries$"),
        ([4, 5, -1], r"expected integers >= 0 \(at most 2\*\*64 - 1\), got -1$"),
    ],
    ids=["wraps-to-height", "u64-max", "huge", "zeros", "too-many-rows", "short", "long", "neg"],
)
def test_a_split_that_cannot_tile_the_grid_names_split(devices3, split, message):
    grid = np.zeros((8, 5), np.float32)
    cells = np.zeros((8, 5), np.uint8)
    given = list(split)
    with pytest.raises(InvalidArgumentError, match=r"^split: " + message):
        devices3.stencil(grid, 2, split=split)
    with pytest.raises(InvalidArgumentError, match=r"^split: " + message):
        devices3.life(cells, 2, split=split)
    assert split == given
    # The context still works, with a split that tiles the grid.
    out = devices3.stencil(grid + 1, 2, split=[3, 5, 0])
    np.testing.assert_array_equal(out, devices3.stencil(grid + 1, 2))


# --- context options -----------------------------------------------------------------------------


def _bound(message: str) -> tuple[int, int]:
    found = re.search(
        r"from 1 to (\d+) or None \(4 per hardware thread of this machine, "
        r"which has (\d+)\), got 5000$",
        message,
    )
    assert found, message
    return int(found[1]), int(found[2])


def test_host_threads_is_bounded_by_four_per_hardware_thread():
    with pytest.raises(InvalidArgumentError, match=r"^host_threads: expected an integer") as err:
        ag.MultiGpuContext(backends=["host"], host_threads=5000)
    bound, hardware = _bound(str(err.value))
    assert bound == 4 * hardware
    # The bound itself opens, with that many threads, and gives the default's bits.
    a = np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32)
    with ag.MultiGpuContext(backends=["host"]) as ctx:
        expected = ctx.geometric_product(a, a)
    with ag.MultiGpuContext(backends=["host"], host_threads=bound) as ctx:
        assert len(ctx.devices) == 1
        np.testing.assert_array_equal(ctx.geometric_product(a, a), expected)


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        (
            "chunk_items",
            U64_MAX,
            rf"expected an integer from 1 to {U32_MAX} or None, got {U64_MAX}$",
        ),
        (
            "chunk_items",
            U32_MAX + 1,
            rf"expected an integer from 1 to {U32_MAX} or None, got {U32_MAX + 1}$",
        ),
        ("sync_timeout_ms", U64_MAX, rf"expected an integer from 1 to {DAY_MS} or None, got "),
        (
            "sync_timeout_ms",
            DAY_MS + 1,
            rf"expected an integer from 1 to {DAY_MS} or None, got {DAY_MS + 1}$",
        ),
        ("devices_per_adapter", 65, r"expected an integer from 1 to 64, got 65$"),
    ],
)
def test_numbers_no_call_could_work_with_are_refused_at_construction(argument, value, message):
    with pytest.raises(InvalidArgumentError, match=rf"^{argument}: {message}"):
        ag.MultiGpuContext(backends=["vulkan"], **{argument: value})


def test_the_largest_accepted_values_open_a_working_context():
    with ag.MultiGpuContext(
        backends=["vulkan"], sync_timeout_ms=DAY_MS, max_devices=U64_MAX, chunk_items=1024
    ) as ctx:
        a = np.ones((3000, 8), np.float32)
        assert ctx.geometric_product(a, a).shape == (3000, 8)
