"""Shared fixtures of the amari_gpu test suite.

Contexts open wgpu devices, which is not free, so every context fixture is session-scoped and
shared by all the tests that use it. Random batches and their float64 references (from the
independent reference in ``cl3.py``) are cached for the session too, so the large ones are
computed once and checked against every context. Calibration figures go to a private cache
directory (``AMARI_GPU_CACHE_DIR``), never to the user's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Mesa's loaders print "XDG_RUNTIME_DIR is invalid or not set" on stderr without a valid one;
# give them a private directory before amari_gpu (and so wgpu) is loaded.
_RUNTIME_DIR = tempfile.mkdtemp(prefix="amari-gpu-tests-")
os.chmod(_RUNTIME_DIR, 0o700)
os.environ["XDG_RUNTIME_DIR"] = _RUNTIME_DIR
atexit.register(shutil.rmtree, _RUNTIME_DIR, ignore_errors=True)

# Calibration figures are cached on disk (AMARI_GPU_CACHE_DIR, read by the native code each
# time it calibrates): keep the suite's in a private directory, never the user's cache.
_CACHE_DIR = tempfile.mkdtemp(prefix="amari-gpu-test-cache-")
os.environ["AMARI_GPU_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)

# The test modules import the helpers in ``cl3.py`` next to this file; make that work in
# pytest's "importlib" import mode too, which does not put this directory on sys.path.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

import amari_gpu  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from cl3 import random_batch, reference_product  # noqa: E402


def _adapter_params() -> list[int | None]:
    # Collection needs the parameters before any fixture runs. With no adapter at all the
    # single None parameter makes the fixture fail through ``all_adapters`` (with its
    # install hint) instead of pytest silently skipping an empty parameter set.
    # The host CPU device (listed last) has its own tests (test_host_device.py,
    # test_host_grid.py, test_host_auto.py): these parameters are the wgpu adapters.
    return [info.index for info in amari_gpu.adapters() if info.backend != "host"] or [None]


_ADAPTER_PARAMS = _adapter_params()


@pytest.fixture(scope="session")
def all_adapters() -> list[amari_gpu.AdapterInfo]:
    """Every adapter wgpu reports; the suite needs at least one."""
    found = amari_gpu.adapters()
    assert found, (
        "wgpu reports no adapter. Install a GPU driver or, on a machine without a GPU, "
        "Mesa's software rasterisers: apt-get install mesa-vulkan-drivers libegl-mesa0"
    )
    return found


@pytest.fixture(
    scope="session",
    params=_ADAPTER_PARAMS,
    ids=lambda index: f"adapter{index}",
)
def adapter_ctx(
    request: pytest.FixtureRequest, all_adapters: list[amari_gpu.AdapterInfo]
) -> amari_gpu.MultiGpuContext:
    """A context with one device on one adapter, for every adapter in turn."""
    index = request.param
    assert index is not None and index < len(all_adapters)
    ctx = amari_gpu.MultiGpuContext(adapters=[index])
    assert [d.adapter.index for d in ctx.devices] == [index]
    return ctx


@pytest.fixture(scope="session")
def default_ctx(all_adapters: list[amari_gpu.AdapterInfo]) -> amari_gpu.MultiGpuContext:
    """The suite's wgpu context: the Vulkan adapters (lavapipe on a machine without a GPU).

    The default selection on such a machine is the host device alone (see
    ``test_adapters.py`` for its rule); naming the backend keeps these tests on wgpu.
    """
    return amari_gpu.MultiGpuContext(backends=["vulkan"])


@pytest.fixture(scope="session")
def devices3(all_adapters: list[amari_gpu.AdapterInfo]) -> amari_gpu.MultiGpuContext:
    """Three logical devices on each Vulkan adapter."""
    ctx = amari_gpu.MultiGpuContext(backends=["vulkan"], devices_per_adapter=3)
    assert len(ctx.devices) >= 3
    return ctx


@pytest.fixture(scope="session")
def devices3_chunked(all_adapters: list[amari_gpu.AdapterInfo]) -> amari_gpu.MultiGpuContext:
    """Three logical devices per Vulkan adapter, 4096 items per chunk.

    Small chunks make every device take several chunks even for modest N, and most N leave a
    ragged last chunk.
    """
    ctx = amari_gpu.MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, chunk_items=4096)
    assert len(ctx.devices) >= 3
    return ctx


Batch = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(a, b, float64 reference of a * b)."""


@pytest.fixture(scope="session")
def batch_cache() -> dict[int, Batch]:
    """Storage of :func:`reference_batch`, one entry per batch size."""
    return {}


@pytest.fixture
def reference_batch(batch_cache: dict[int, Batch]):
    """``reference_batch(n)``: random float32 (n, 8) inputs a, b and their float64 product.

    Cached by n for the session; callers must not modify the arrays (they are read-only).
    """

    def get(n: int) -> Batch:
        if n not in batch_cache:
            a, b = random_batch(n, seed=n)
            want = reference_product(a, b)
            for array in (a, b, want):
                array.setflags(write=False)
            batch_cache[n] = (a, b, want)
        return batch_cache[n]

    return get


# --- distribution engine ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def session_cache_dir() -> Path:
    """The private calibration cache directory of the session (``AMARI_GPU_CACHE_DIR``)."""
    return Path(_CACHE_DIR)


@pytest.fixture(scope="session")
def engine_ctx(all_adapters: list[amari_gpu.AdapterInfo]) -> amari_gpu.MultiGpuContext:
    """Two logical devices on each of adapters 0 and 1 (lavapipe and llvmpipe here): four
    devices in two backends that share one piece of hardware."""
    assert len(all_adapters) >= 2, "the engine tests need two adapters (e.g. Vulkan and GL)"
    ctx = amari_gpu.MultiGpuContext(adapters=[0, 1], devices_per_adapter=2)
    assert [d.adapter.index for d in ctx.devices] == [0, 0, 1, 1]
    return ctx


# Contexts of the DeviceArray tests (test_device_array*.py, test_resident_*.py): small chunks so
# that rows span every device; module-scoped like theirs were, closed when the module ends.
@pytest.fixture(scope="module")
def ctx2() -> Iterator[amari_gpu.MultiGpuContext]:
    """Two logical lavapipe devices."""
    ctx = amari_gpu.MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, chunk_items=64)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def ctx3() -> Iterator[amari_gpu.MultiGpuContext]:
    """Three logical lavapipe devices."""
    ctx = amari_gpu.MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, chunk_items=64)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def host() -> Iterator[amari_gpu.MultiGpuContext]:
    """The host CPU device alone (this machine's default context)."""
    ctx = amari_gpu.MultiGpuContext(backends=["host"])
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def mixed() -> Iterator[amari_gpu.MultiGpuContext]:
    """Two lavapipe devices and the host CPU device."""
    ctx = amari_gpu.MultiGpuContext(
        backends=["vulkan", "host"], devices_per_adapter=2, chunk_items=64
    )
    yield ctx
    ctx.close()
