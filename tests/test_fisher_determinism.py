"""Bit-identical information-geometry results whatever the devices and the strategy.

The empirical Fisher matrix is a reduction: every chunk of rows gives one partial, and the
host sums the partials in chunk order in float64, so 1 to 8 logical devices of one adapter,
and mixed Vulkan + GL contexts, must give the same bits as one device, for every strategy,
with small chunks so that every device takes several. The categorical and Gaussian maps are
checked the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
from _fisher_helpers import (
    FISHER_REL_TOL,
    LOGITS_ABS_TOL,
    random_scores,
    reference_categorical,
    reference_fisher,
    reference_softmax,
    relative_error,
)
from amari_gpu import STRATEGIES, MultiGpuContext

N = 3001
P = 70
CHUNK = 128  # 24 chunks: several per device even with 8 devices

CONFIGS = [
    *(
        pytest.param({"adapters": [0], "devices_per_adapter": k}, id=f"lavapipe-x{k}")
        for k in range(1, 9)
    ),
    pytest.param({"adapters": [0, 1], "devices_per_adapter": 2}, id="mixed-x2"),
]


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    """Read-only inputs and the one-device results, checked against the references."""
    rng = np.random.default_rng(2026)
    d = {
        "scores": random_scores(N, P, seed=2026),
        "weights": rng.random(N).astype(np.float32),
        "logits": (rng.standard_normal((N, 6)) * 4).astype(np.float32),
        "var": (rng.random((N, 3)) + 0.1).astype(np.float32),
    }
    d["mean"] = np.zeros_like(d["var"])
    d["narrow"] = np.ascontiguousarray(d["scores"][:, :20])  # P <= 64: the 8 x 8-block kernel
    one = MultiGpuContext(adapters=[0], chunk_items=CHUNK)
    d["fisher"] = one.fisher_information(d["scores"], d["weights"], strategy="balanced")
    want = reference_fisher(d["scores"], d["weights"])
    assert relative_error(d["fisher"], want) < FISHER_REL_TOL
    d["fisher_narrow"] = one.fisher_information(d["narrow"], strategy="balanced")
    assert relative_error(d["fisher_narrow"], reference_fisher(d["narrow"])) < FISHER_REL_TOL
    d["categorical"] = one.fisher_categorical(logits=d["logits"], strategy="balanced")
    want_cat = reference_categorical(reference_softmax(d["logits"]))
    assert np.abs(d["categorical"] - want_cat).max() < LOGITS_ABS_TOL
    d["gaussian"] = one.fisher_gaussian(d["mean"], d["var"], strategy="balanced")
    for array in d.values():
        array.setflags(write=False)
    return d


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("config", CONFIGS)
def test_same_bits_for_every_device_set_and_strategy(data, config):
    ctx = MultiGpuContext(chunk_items=CHUNK, **config)
    for strategy in STRATEGIES:
        _same_bits(
            ctx.fisher_information(data["scores"], data["weights"], strategy=strategy),
            data["fisher"],
        )
        plan = ctx.last_plan
        assert plan is not None and plan.requested_strategy == strategy
        _same_bits(ctx.fisher_information(data["narrow"], strategy=strategy), data["fisher_narrow"])
        assert plan.items == N and sum(a.items for a in plan) == N
        _same_bits(
            ctx.fisher_categorical(logits=data["logits"], strategy=strategy), data["categorical"]
        )
        _same_bits(
            ctx.fisher_gaussian(data["mean"], data["var"], strategy=strategy), data["gaussian"]
        )
    # The balanced split really spread the rows: every device took several chunks.
    ctx.fisher_information(data["scores"], strategy="balanced")
    plan = ctx.last_plan
    assert plan is not None
    assert [a.device_id for a in plan] == list(range(len(ctx.devices)))
    assert min(a.chunks for a in plan) >= 3
