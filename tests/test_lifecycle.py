"""Closing a context: ``with`` and ``close()`` release the devices; closing twice is fine;
every later call raises AmariGpuError saying the context is closed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import amari_gpu
import numpy as np
import pytest
from amari_gpu import AmariGpuError, MultiGpuContext

_V = np.ones((4, 8), np.float32)
_M = np.ones((4, 4), np.float32)

CALLS: dict[str, Callable[[MultiGpuContext], Any]] = {
    "geometric_product": lambda c: c.geometric_product(_V, _V),
    "reverse": lambda c: c.reverse(_V),
    "tropical_matmul": lambda c: c.tropical_matmul(_M, _M),
    "tropical_matvec": lambda c: c.tropical_matvec(_M, np.ones(4, np.float32)),
    "shortest_paths": lambda c: c.shortest_paths(_M),
    "fisher_information": lambda c: c.fisher_information(_M),
    "fisher_categorical": lambda c: c.fisher_categorical(probs=_M / 4),
    "fisher_gaussian": lambda c: c.fisher_gaussian(_M, _M),
    "stencil": lambda c: c.stencil(_M, 1),
    "life": lambda c: c.life(np.zeros((4, 4), np.uint8), 1),
    "calibrate": lambda c: c.calibrate(),
    "capabilities": lambda c: c.devices[0].capabilities,
    "distribute_workload": lambda c: c.distribute_workload(
        amari_gpu.Workload("geometric_product", 10, 64.0, 32.0, 64.0)
    ),
    "health": lambda c: c.health(),
    "stats": lambda c: c.stats(),
    "inject_fault": lambda c: c.inject_fault(0),
    "reset_health": lambda c: c.reset_health(),
    "profile": lambda c: c.profile().__enter__(),
    "strategy=": lambda c: setattr(c, "strategy", "balanced"),
}


@pytest.fixture(scope="module")
def closed_ctx(all_adapters: list[amari_gpu.AdapterInfo]) -> MultiGpuContext:
    with MultiGpuContext(backends=["vulkan"]) as ctx:
        assert not ctx.closed
        assert ctx.geometric_product(_V, _V).shape == (4, 8)
    assert ctx.closed
    return ctx


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_call_on_a_closed_context_raises(closed_ctx: MultiGpuContext, name: str) -> None:
    with pytest.raises(AmariGpuError, match="the context is closed"):
        CALLS[name](closed_ctx)


def test_close_is_idempotent_and_shows_in_repr(all_adapters: list[amari_gpu.AdapterInfo]) -> None:
    ctx = MultiGpuContext(backends=["vulkan"])
    assert "closed" not in repr(ctx)
    ctx.close()
    ctx.close()
    assert ctx.closed
    assert repr(ctx) == "MultiGpuContext(closed)"


def test_with_closes_on_an_exception_too(all_adapters: list[amari_gpu.AdapterInfo]) -> None:
    with pytest.raises(ValueError, match="inside"), MultiGpuContext(backends=["vulkan"]) as ctx:
        raise ValueError("inside")
    assert ctx.closed


def test_contexts_opened_and_closed_in_a_loop_keep_working(
    all_adapters: list[amari_gpu.AdapterInfo],
) -> None:
    for _ in range(5):
        with MultiGpuContext(backends=["vulkan"]) as ctx:
            np.testing.assert_array_equal(
                ctx.geometric_product(_V, _V), ctx.geometric_product(_V, _V)
            )
