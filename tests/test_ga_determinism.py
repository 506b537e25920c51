"""Geometric-algebra results are the same bits whatever the device set and the strategy.

Kernels covering every code path of the generator (a batch product, a broadcast rotor bound
whole, a one-word output, normalisation) run on 1, 2, 3 and 8 logical devices of lavapipe
and on two devices of each of lavapipe and llvmpipe, with 256-item chunks so that every
device takes several chunks and the last one is ragged, under every strategy. Every result
must equal, bit for bit, the result on one device with the default chunking, which must
match the float64 reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from _ga_helpers import assert_close, assert_normalized, product, random_rows, sandwich
from amari_gpu import STRATEGIES, Algebra, MultiGpuContext

N = 10_007
CHUNK = 256
PGA = Algebra(3, 0, 1)
STA = Algebra(1, 3)

CONFIGS = [
    pytest.param(
        {"backends": ["vulkan"], "devices_per_adapter": k, "chunk_items": CHUNK},
        id=f"lavapipe-x{k}",
    )
    for k in (1, 2, 3, 8)
] + [
    pytest.param(
        {"adapters": [0, 1], "devices_per_adapter": 2, "chunk_items": CHUNK}, id="mixed-x2"
    )
]


def _run_all(ctx: MultiGpuContext, data: dict[str, np.ndarray], strategy: str | None):
    return {
        "sta_product": ctx.geometric_product(data["a"], data["b"], STA, strategy=strategy),
        "pga_sandwich": ctx.sandwich(data["r"], data["x"], PGA, strategy=strategy),
        "cl3_scalar": ctx.scalar_product(data["c"], data["d"], strategy=strategy),
        "pga_normalize": ctx.normalize(data["x"], PGA, strategy=strategy),
    }


@pytest.fixture(scope="module")
def expected() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Inputs and their results on one device, checked against the references."""
    data = {
        "a": random_rows(N, 16, 1),
        "b": random_rows(N, 16, 2),
        "r": random_rows(1, 16, 3)[0],
        "x": random_rows(N, 16, 4),
        "c": random_rows(N, 8, 5),
        "d": random_rows(N, 8, 6),
    }
    for array in data.values():
        array.setflags(write=False)
    results = _run_all(MultiGpuContext(adapters=[0]), data, "balanced")
    assert_close(results["sta_product"], *product("geometric", STA.signature, data["a"], data["b"]))
    assert_close(results["pga_sandwich"], *sandwich(PGA.signature, data["r"], data["x"]))
    assert_close(results["cl3_scalar"], *product("scalar", (3, 0, 0), data["c"], data["d"]))
    assert_normalized(results["pga_normalize"], PGA.signature, data["x"])
    return data, results


@pytest.mark.parametrize("config", CONFIGS)
def test_bit_identical_for_every_device_set_and_strategy(expected, config):
    data, want = expected
    ctx = MultiGpuContext(**config)
    assert len(ctx.devices) == config["devices_per_adapter"] * len(config.get("adapters", [0]))
    for strategy in STRATEGIES:
        got = _run_all(ctx, data, strategy)
        for name, result in got.items():
            assert result.tobytes() == want[name].tobytes(), (name, strategy)
        plan = ctx.last_plan
        assert plan.requested_strategy == strategy
        if strategy == "balanced":  # every device takes chunks
            assert len({w.device_id for w in plan if w.chunks}) == len(ctx.devices)
        assert plan.chunk_items == CHUNK and plan.n_chunks == -(-N // CHUNK)
        assert sum(w.items for w in plan) == N
