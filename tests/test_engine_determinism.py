"""Determinism of the distribution engine: the same bits whatever the devices and the strategy.

The geometric product of one batch is computed on contexts of 1 to 8 logical devices of one
adapter and on mixed contexts of 2 to 4 devices on each of two adapters (Vulkan and GL), some
with 4096-item chunks so every device takes several chunks, with every strategy. Each result
must equal, bit for bit, the result of a single device, which must match the independent float64
reference in ``cl3.py``. Also: two threads sharing one context with different strategies.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from amari_gpu import STRATEGIES, MultiGpuContext
from cl3 import REL_TOL, random_batch, reference_product, relative_error

N = 100_003
CHUNK = 4096

CONFIGS = [
    *(
        pytest.param(
            {
                "backends": ["vulkan"],
                "devices_per_adapter": k,
                "chunk_items": CHUNK if k % 2 else None,
            },
            id=f"lavapipe-x{k}" + ("-chunk4096" if k % 2 else ""),
        )
        for k in range(1, 9)
    ),
    *(
        pytest.param(
            {
                "adapters": [0, 1],
                "devices_per_adapter": k,
                "chunk_items": None if k == 3 else CHUNK,
            },
            id=f"mixed-x{k}" + ("" if k == 3 else "-chunk4096"),
        )
        for k in (2, 3, 4)
    ),
]


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs (read-only) and the one-device result, checked against the float64 reference."""
    a, b = random_batch(N, seed=20_240_611)
    for array in (a, b):
        array.setflags(write=False)
    single = MultiGpuContext(adapters=[0])
    assert len(single.devices) == 1
    out = single.geometric_product(a, b, strategy="balanced")
    assert out.dtype == np.float32 and out.shape == (N, 8)
    assert relative_error(out, reference_product(a, b)) < REL_TOL
    out.setflags(write=False)
    return a, b, out


def _assert_bit_identical(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype == np.float32
    assert got.shape == want.shape
    assert np.array_equal(got, want)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("config", CONFIGS)
def test_results_are_bit_identical_for_every_device_set_and_strategy(batch, config):
    a, b, want = batch
    ctx = MultiGpuContext(**config)
    per_adapter = config["devices_per_adapter"]
    assert len(ctx.devices) == per_adapter * len(config.get("adapters", [0]))
    for strategy in STRATEGIES:
        got = ctx.geometric_product(a, b, strategy=strategy)
        _assert_bit_identical(got, want)
        plan = ctx.last_plan
        assert plan.requested_strategy == strategy
        assert plan.items == N and sum(p.items for p in plan) == N
        if config["chunk_items"] is not None:
            assert plan.chunk_items == CHUNK
    # The balanced split really spread the work: every device took several chunks.
    ctx.geometric_product(a, b, strategy="balanced")
    plan = ctx.last_plan
    assert [p.device_id for p in plan] == list(range(len(ctx.devices)))
    if config["chunk_items"] is not None:
        assert min(p.chunks for p in plan) >= 3
    assert all(s["items_done"] > 0 for s in ctx.stats())
    assert all(h["healthy"] for h in ctx.health().values())


def test_two_threads_with_different_strategies_share_one_context(batch):
    a, b, want = batch
    ctx = MultiGpuContext(adapters=[0, 1], devices_per_adapter=2, chunk_items=CHUNK)
    pairs = [("balanced", "adaptive"), ("latency", "capability"), ("memory", "auto")]
    rounds = 3
    for pair in pairs:
        start = threading.Barrier(len(pair))

        def work(strategy: str, start: threading.Barrier = start) -> list[np.ndarray]:
            start.wait(timeout=30)
            return [ctx.geometric_product(a, b, strategy=strategy) for _ in range(rounds)]

        with ThreadPoolExecutor(max_workers=len(pair)) as pool:
            results = list(pool.map(work, pair))
        for outputs in results:
            assert len(outputs) == rounds
            for got in outputs:
                _assert_bit_identical(got, want)
    stats = ctx.stats()
    assert sum(s["items_done"] for s in stats) == len(pairs) * 2 * rounds * N
    assert sum(s["failed_chunks"] for s in stats) == 0
    assert all(h["healthy"] for h in ctx.health().values())
