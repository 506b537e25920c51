"""pytest-benchmark suite of the Python API: one call of each kernel family (and of the
heat and Life grids) through ``MultiGpuContext`` (default selection, and every adapter
together), and the planner's decision time. Every result is checked against a CPU reference
once, outside the timing; each benchmark records the adapters it ran on in ``extra_info``
(saved with ``--benchmark-json``).

    .venv/bin/pytest benches/ --benchmark-only
"""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu.reference import geometric_product as reference_product

GA_ROWS = 100_000
TROPICAL_N = 256
FISHER_ROWS, FISHER_PARAMS = 32_768, 64
GRID, GRID_STEPS = 512, 8


def _contexts() -> dict[str, ag.MultiGpuContext]:
    found = ag.adapters()
    contexts = {"default": ag.MultiGpuContext(backends=["vulkan"])}
    if len(found) > 1:
        contexts["all-adapters"] = ag.MultiGpuContext(adapters=[a.index for a in found])
    return contexts


CONTEXTS = _contexts()


@pytest.fixture(params=sorted(CONTEXTS), scope="module")
def ctx(request: pytest.FixtureRequest) -> ag.MultiGpuContext:
    return CONTEXTS[request.param]


def _describe(benchmark, ctx: ag.MultiGpuContext) -> None:
    benchmark.extra_info["amari_gpu_version"] = ag.__version__
    benchmark.extra_info["devices"] = [d.adapter.describe() for d in ctx.devices]


def test_geometric_product(benchmark, ctx):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((GA_ROWS, 8), dtype=np.float32)
    b = rng.standard_normal((GA_ROWS, 8), dtype=np.float32)
    want = reference_product(a, b)
    assert np.abs(ctx.geometric_product(a, b) - want).max() < 1e-4 * np.abs(want).max()
    _describe(benchmark, ctx)
    benchmark(ctx.geometric_product, a, b)


def test_tropical_matmul(benchmark, ctx):
    rng = np.random.default_rng(2)
    a = rng.integers(-1000, 1000, (TROPICAL_N, TROPICAL_N)).astype(np.float32)
    b = rng.integers(-1000, 1000, (TROPICAL_N, TROPICAL_N)).astype(np.float32)
    assert np.array_equal(ctx.tropical_matmul(a, b), (a[:, :, None] + b[None]).max(axis=1))
    _describe(benchmark, ctx)
    benchmark(ctx.tropical_matmul, a, b)


def test_fisher_information(benchmark, ctx):
    scores = np.random.default_rng(3).standard_normal((FISHER_ROWS, FISHER_PARAMS), np.float32)
    s64 = scores.astype(np.float64)
    want = s64.T @ s64 / FISHER_ROWS
    assert np.abs(ctx.fisher_information(scores) - want).max() < 1e-4 * np.abs(want).max()
    _describe(benchmark, ctx)
    benchmark(ctx.fisher_information, scores)


def test_stencil(benchmark, ctx):
    u = np.random.default_rng(4).random((GRID, GRID), dtype=np.float32)
    want = u.astype(np.float64)
    for _ in range(GRID_STEPS):
        s = sum(np.roll(want, k, axis) for k in (1, -1) for axis in (0, 1))
        want = want + 0.2 * (s - 4.0 * want)
    assert np.abs(ctx.stencil(u, GRID_STEPS, 0.2, "periodic", halo=4) - want).max() < 1e-5
    _describe(benchmark, ctx)
    benchmark(ctx.stencil, u, GRID_STEPS, 0.2, "periodic", 4)


def test_life(benchmark, ctx):
    cells = (np.random.default_rng(5).random((GRID, GRID)) < 0.3).astype(np.uint8)
    g = cells.astype(np.int64)
    for _ in range(GRID_STEPS):
        n = sum(np.roll(np.roll(g, dr, 0), dc, 1) for dr in (-1, 0, 1) for dc in (-1, 0, 1)) - g
        g = ((n == 3) | ((n == 2) & (g == 1))).astype(np.int64)
    assert np.array_equal(ctx.life(cells, GRID_STEPS, halo=4), g)
    _describe(benchmark, ctx)
    benchmark(ctx.life, cells, GRID_STEPS, 4)


@pytest.mark.parametrize("strategy", ag.STRATEGIES)
def test_distribute_workload(benchmark, strategy):
    # Planning only (no kernel runs): 10^9 Cl(3,0) products on the default devices.
    ctx = CONTEXTS["default"]
    workload = ag.Workload("geometric_product", 10**9, 64, 32, 128)
    plan = ctx.distribute_workload(workload, strategy=strategy)
    assert sum(w.items for w in plan) == workload.items
    _describe(benchmark, ctx)
    benchmark(ctx.distribute_workload, workload, strategy)
