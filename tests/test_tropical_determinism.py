"""Tropical results are bit-identical for 1 to 8 devices and every split strategy.

Each output is reduced over k in a fixed order by one thread, and chunk boundaries depend
only on the problem, so neither the device count nor the strategy may change a single bit.
Small chunks (2 row blocks for products, 16 rows for matrix-vector products) make every
device take several chunks.
"""

from __future__ import annotations

import amari_gpu
import numpy as np
import pytest
from _tropical_helpers import graph_without_negative_cycles, random_operand, reference_matmul
from amari_gpu import MultiGpuContext

DEVICE_COUNTS = list(range(1, 9))


@pytest.fixture(scope="module")
def contexts() -> dict[int, MultiGpuContext]:
    """Contexts of 1..8 logical devices on adapter 0, 2 items per chunk."""
    return {
        count: MultiGpuContext(adapters=[0], devices_per_adapter=count, chunk_items=2)
        for count in DEVICE_COUNTS
    }


@pytest.fixture(scope="module")
def operands() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    return random_operand(rng, (2, 700, 48), 0.05), random_operand(rng, (2, 48, 90), 0.05)


@pytest.mark.parametrize("count", DEVICE_COUNTS)
def test_products_are_identical_for_every_device_count_and_strategy(
    contexts: dict[int, MultiGpuContext], operands: tuple[np.ndarray, np.ndarray], count: int
) -> None:
    a, b = operands
    want = reference_matmul(a, b, "min_plus")
    ctx = contexts[count]
    for strategy in amari_gpu.STRATEGIES:
        got = ctx.tropical_matmul(a, b, "min_plus", strategy=strategy)
        assert got.tobytes() == want.tobytes(), strategy
        plan = ctx.last_plan
        assert plan is not None and plan.n_chunks == 11  # 2 x 11 blocks, 2 per chunk


def test_matvec_and_paths_are_identical_across_devices_and_strategies(
    contexts: dict[int, MultiGpuContext],
) -> None:
    rng = np.random.default_rng(12)
    a = random_operand(rng, (3, 400, 33), 0.1)
    x = random_operand(rng, (3, 33), 0.1)
    w = graph_without_negative_cycles(rng, 150, 0.1, integer=False)
    first_mv = contexts[1].tropical_matvec(a, x, "max_plus")
    first_sp = contexts[1].shortest_paths(w)
    for count, ctx in contexts.items():
        for strategy in ("balanced", "adaptive", "auto"):
            mv = ctx.tropical_matvec(a, x, "max_plus", strategy=strategy)
            assert mv.tobytes() == first_mv.tobytes(), (count, strategy)
        assert ctx.shortest_paths(w, strategy="capability").tobytes() == first_sp.tobytes(), count
