"""Contexts of the dtype tests: module-scoped contexts of one chunk size over named backends,
so that every batch is several chunks on every device, and the device mixes whose results of
one dtype must be the same bits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import amari_gpu
import pytest


def context(chunk: int, **options: Any) -> amari_gpu.MultiGpuContext:
    """A context whose chunks are ``chunk`` items."""
    return amari_gpu.MultiGpuContext(chunk_items=chunk, **options)


def module_context(chunk: int, backends: list[str]) -> Callable[[], Any]:
    """A module-scoped fixture: a context of ``chunk``-item chunks over ``backends``, closed
    after the module."""

    @pytest.fixture(scope="module")
    def fixture() -> Iterator[amari_gpu.MultiGpuContext]:
        ctx = context(chunk, backends=backends)
        yield ctx
        ctx.close()

    return fixture


MIXES: tuple[dict[str, Any], ...] = (
    {"backends": ["vulkan"]},
    {"backends": ["vulkan"], "devices_per_adapter": 3},
    {"backends": ["vulkan", "host"], "devices_per_adapter": 2},
)
"""lavapipe alone, three logical devices on it, and two beside two host devices."""


def over_mixes(chunk: int, call: Callable[[amari_gpu.MultiGpuContext, str], Any]) -> list[Any]:
    """``call(ctx, strategy)`` on a context of each of ``MIXES`` (``chunk``-item chunks) with
    each strategy, in order; a balanced plan is checked to use every device."""
    results = []
    for option in MIXES:
        ctx = context(chunk, **option)
        try:
            for strategy in ("balanced", "latency", "auto"):
                results.append(call(ctx, strategy))
                plan = ctx.last_plan
                assert plan is not None
                if strategy == "balanced":
                    assert {d.device_id for d in plan} == {d.id for d in ctx.devices}, plan
        finally:
            ctx.close()
    return results
