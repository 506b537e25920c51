"""`auto` with the host device beside lavapipe, which runs on the same cores: calibration
measures the pair's speedup (bounded at 1 when the host's pool has a thread on every hardware
thread), and with it `auto` plans every chunk of a Cl(3,0) call onto the host device. The
results are bit-identical whatever the plan. Nothing here is timed: the tests check plans,
figures' bounds and results."""

from __future__ import annotations

import logging

import amari_gpu as ag
import numpy as np
import pytest
from amari_gpu import STRATEGIES, MultiGpuContext

N = 1 << 20


@pytest.fixture(scope="module")
def mixed() -> MultiGpuContext:
    ctx = MultiGpuContext(backends=["vulkan", "host"])
    assert [d.adapter.backend for d in ctx.devices] == ["vulkan", "host"]
    ctx.calibrate()
    return ctx


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(15)
    return (
        rng.standard_normal((N, 8), dtype=np.float32),
        rng.standard_normal((N, 8), dtype=np.float32),
    )


def test_the_host_and_lavapipe_are_one_group_that_gains_nothing_together(mixed):
    vulkan, host = (d.capabilities for d in mixed.devices)
    assert vulkan.shares_hardware_with == [1] and host.shares_hardware_with == [0]
    speedup = host.group_speedup
    assert speedup is not None and 0 < speedup <= 1.0, speedup


def test_auto_plans_every_chunk_of_a_cl3_product_onto_the_host(mixed, batch):
    a, b = batch
    workload = ag.Workload("geometric_product", N, 64.0, 32.0, 120.0)
    planned = mixed.distribute_workload(workload, "auto")
    assert [(w.device_id, w.chunks) for w in planned] == [(1, planned.n_chunks)]
    got = mixed.geometric_product(a, b, strategy="auto")
    plan = mixed.last_plan
    assert plan is not None and plan.requested_strategy == "auto"
    assert [(w.device_id, w.chunks) for w in plan] == [(1, plan.n_chunks)]
    assert plan.n_chunks > 1
    # Whatever the plan, the same bits: every strategy here, and lavapipe alone.
    alone = MultiGpuContext(backends=["vulkan"]).geometric_product(a, b)
    assert np.array_equal(got, alone)
    for strategy in STRATEGIES:
        assert np.array_equal(mixed.geometric_product(a, b, strategy=strategy), got), strategy


def test_a_cpu_adapter_keeps_no_core_from_the_host_pool(caplog):
    # Lavapipe's worker waits for its driver, whose threads run on the host's cores: the host
    # pool still takes every hardware thread (a hardware GPU's worker would keep one).
    caplog.set_level(logging.INFO, logger="amari_gpu")
    ag.reset_log_levels()  # the bridge caches levels it has seen
    try:
        MultiGpuContext(backends=["vulkan", "host"])
    finally:
        ag.reset_log_levels()
    threads = ag.adapters()[-1].limits["threads"]
    opened = [r.getMessage() for r in caplog.records if r.name == "amari_gpu.context.open"]
    assert any(f"host device 1: {threads} threads" in m for m in opened), opened
