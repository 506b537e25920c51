"""Hypothesis: random chains of GA operations on DeviceArrays placed by random strategies,
on contexts of 2 to 3 logical lavapipe devices with and without the host device, equal the
numpy path bit for bit."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _batch(n: int, seed: int) -> np.ndarray:
    """A float32 (n, 8) batch of standard normal numbers."""
    return np.random.default_rng(seed).standard_normal((n, 8), dtype=np.float32)


CONTEXTS = {
    "vulkan x2": {"backends": ["vulkan"], "devices_per_adapter": 2},
    "vulkan x3": {"backends": ["vulkan"], "devices_per_adapter": 3},
    "vulkan x2 + host": {"backends": ["vulkan", "host"], "devices_per_adapter": 2},
}
PLACEMENTS = ["balanced", "capability", "memory", "latency", "adaptive", "auto"]
UNARY = ["reverse", "grade_involution", "normalize", "dual"]
BINARY = ["geometric_product", "outer_product", "inner_product"]


@pytest.fixture(scope="module", params=list(CONTEXTS))
def ctx(request) -> ag.MultiGpuContext:
    context = ag.MultiGpuContext(chunk_items=32, **CONTEXTS[request.param])
    yield context
    context.close()


step = st.one_of(
    st.tuples(st.sampled_from(UNARY)),
    st.tuples(st.sampled_from(BINARY), st.sampled_from(["resident", "numpy", "single"])),
    st.tuples(st.just("sandwich")),
    st.tuples(st.just("grade_projection"), st.integers(0, 3)),
)


def _run(ctx: ag.MultiGpuContext, x, other, single, chain):
    for op in chain:
        name = op[0]
        if name in UNARY:
            x = getattr(ctx, name)(x)
        elif name == "sandwich":
            x = ctx.sandwich(single, x)
        elif name == "grade_projection":
            x = ctx.grade_projection(x, op[1])
        else:
            y = {"resident": other, "numpy": other, "single": single}[op[1]]
            x = getattr(ctx, name)(x, y)
    return x


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.integers(1, 400),
    placement=st.tuples(st.sampled_from(PLACEMENTS), st.sampled_from(PLACEMENTS)),
    chain=st.lists(step, min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_random_chains_equal_the_numpy_path(ctx, rows, placement, chain, seed) -> None:
    a, b = _batch(rows, seed), _batch(rows, seed + 1)
    single = _batch(1, seed + 2)[0]
    expected = _run(ctx, a, b, single, chain)
    da = ctx.asarray(a, strategy=placement[0])
    db = ctx.asarray(b, strategy=placement[1])
    resident_other = [db if op[1:] == ("resident",) else None for op in chain]
    x = da
    for op, other in zip(chain, resident_other, strict=True):
        x = _run(ctx, x, other if other is not None else b, single, [op])
    assert isinstance(x, ag.DeviceArray)
    assert x.sharding[0][1] == 0 and x.sharding[-1][2] == rows
    np.testing.assert_array_equal(x.numpy(), expected)
