"""Contexts of the dtype tests: module-scoped contexts of one chunk size over named backends,
so that every batch is several chunks on every device."""

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
