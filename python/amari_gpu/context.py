"""The multi-device context: the public entry point for running kernels."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _native
from ._adapters import BACKENDS, DEVICE_TYPES, AdapterInfo
from ._validate import index_list, integer, name_list, optional_positive_int, positive_int
from .array import ResidentMixin
from .domain import DomainMixin
from .errors import InvalidArgumentError
from .ga import GeometricAlgebraMixin
from .information import InformationGeometryMixin
from .planning import Capabilities, Plan, Workload, check_strategy, optional_strategy
from .profiler import Profile, _Recording
from .rows import RowsMixin
from .tropical import TropicalMixin

MAX_DEVICES_PER_ADAPTER = 64
"""Largest ``devices_per_adapter`` (the core's bound, checked there): each logical device is a
wgpu device with its own queue, worker thread and buffer pools, and opening one takes tens of
milliseconds."""


@dataclass(frozen=True)
class Device:
    """A device opened by a context: a wgpu device + queue on one adapter, or the host CPU
    device (``adapter.backend == "host"``)."""

    id: int
    adapter: AdapterInfo
    _native: Any = field(repr=False, compare=False, hash=False)
    gpu_timestamps: bool = False

    @property
    def capabilities(self) -> Capabilities:
        """Measured capabilities (the context calibrates on first need)."""
        caps: Capabilities = self._native.capabilities(self.id)
        return caps


class MultiGpuContext(
    GeometricAlgebraMixin,
    TropicalMixin,
    InformationGeometryMixin,
    DomainMixin,
    RowsMixin,
    ResidentMixin,
):
    """Devices on every selected adapter, used together by every kernel call.

    Selection: by default every distinct hardware GPU adapter (one per physical device,
    preferring Vulkan/Metal/DX12 over GL) plus the host CPU device; on a machine without a
    hardware GPU, the host device alone. CPU adapters (lavapipe, llvmpipe, WARP) run on the
    host's cores and are opened only when named: ``backends=["vulkan"]`` picks lavapipe,
    ``backends=["vulkan", "host"]`` lavapipe beside the host. ``backends=`` or ``adapters=``
    select exactly what they name, including an adapter that is another backend's view of the
    same device. ``device_types=`` filters by kind (``"cpu"`` takes the software adapters and
    the host), ``max_devices=`` caps the count, and ``devices_per_adapter=N`` opens N logical
    devices (each with its own queue) per wgpu adapter, 1 <= N <= 64
    (``MAX_DEVICES_PER_ADAPTER``).

    ``strategy`` is the default split of every call ("balanced", "capability", "memory",
    "latency", "adaptive" or "auto"); each kernel method also takes ``strategy=``.
    Assigning ``ctx.strategy`` changes the default of later calls.
    ``gpu_timestamps`` chooses how profiled kernels are timed: ``None`` (default) with GPU
    timestamp queries where the adapter has them and one costs under 3% of a chunk
    (calibration measures the cost: some drivers synchronise around every timestamp),
    ``True`` with timestamps wherever available, ``False`` on the host. ``chunk_items``
    overrides the items per chunk, 1 to 2**32 - 1 (default: derived from the problem size
    only); ``sync_timeout_ms`` (1 to 86_400_000, a day) turns a device that takes longer
    than that for one chunk into a failure whose chunks are re-run on the other devices.

    The host CPU is a device too: :func:`~amari_gpu.adapters` lists it last with
    ``backend == "host"``; it is opened once, whatever ``devices_per_adapter``. Its kernels
    reproduce the WGSL kernels' arithmetic, rounding ``fma`` as the context's wgpu devices do
    (measured when the context opens), so results stay bit-identical. Every kernel family
    runs on it (the grid methods as bands beside the wgpu devices' bands; the softmax of
    ``fisher_categorical(logits=...)`` is taken once on the host for every context, so it is
    the same bits for any device mix) except users' WGSL kernels (:meth:`map_rows`), which
    run on the wgpu devices only.
    ``host_threads`` sizes its thread pool (default: the machine's hardware threads minus
    one per hardware-GPU device of the context, at least 1; CPU adapters keep no core; at
    most 4 per hardware thread). A number out of its range raises
    :class:`~amari_gpu.InvalidArgumentError` naming it, the range and the value.
    Beside CPU adapters, ``strategy="auto"`` gives the host every chunk when calibration
    measured that running both at once gains nothing.

    A context holds its devices (and their memory) until it is closed: use it as a context
    manager (``with MultiGpuContext() as ctx:``) or call :meth:`close`. Every call on a
    closed context (and assigning ``ctx.strategy``) raises :class:`~amari_gpu.AmariGpuError`
    saying so.
    """

    def __init__(
        self,
        backends: str | Sequence[str] | None = None,
        device_types: str | Sequence[str] | None = None,
        adapters: int | Sequence[int] | None = None,
        max_devices: int | None = None,
        devices_per_adapter: int = 1,
        *,
        chunk_items: int | None = None,
        sync_timeout_ms: int | None = None,
        strategy: str = "auto",
        gpu_timestamps: bool | None = None,
        host_threads: int | None = None,
    ) -> None:
        self._native = _native.Context(
            {
                "backends": name_list("backends", backends, BACKENDS),
                "device_types": name_list("device_types", device_types, DEVICE_TYPES),
                "adapters": index_list("adapters", adapters),
                "max_devices": optional_positive_int("max_devices", max_devices),
                "devices_per_adapter": positive_int("devices_per_adapter", devices_per_adapter),
                "chunk_items": optional_positive_int("chunk_items", chunk_items),
                "sync_timeout_ms": optional_positive_int("sync_timeout_ms", sync_timeout_ms),
                "strategy": check_strategy(strategy),
                "gpu_timestamps": None if gpu_timestamps is None else bool(gpu_timestamps),
                "host_threads": optional_positive_int("host_threads", host_threads),
            }
        )
        self.devices: list[Device] = [
            Device(
                id=d["id"],
                adapter=d["adapter"],
                _native=self._native,
                gpu_timestamps=d["gpu_timestamps"],
            )
            for d in self._native.devices()
        ]
        self.last_plan: Plan | None = None

    def close(self) -> None:
        """Releases the devices: their buffers are freed and the wgpu devices destroyed
        (a call running on another thread finishes first). Later calls raise
        :class:`~amari_gpu.AmariGpuError` ("the context is closed"); closing again does
        nothing."""
        self._native.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return bool(self._native.closed)

    def __enter__(self) -> MultiGpuContext:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def strategy(self) -> str:
        """The default strategy of calls that name none; assigning it (a name from
        ``amari_gpu.STRATEGIES``) changes the default of later calls (on an open context)."""
        return str(self._native.strategy)

    @strategy.setter
    def strategy(self, strategy: str) -> None:
        self._native.set_strategy(check_strategy(strategy))

    def __repr__(self) -> str:
        if self.closed:
            return "MultiGpuContext(closed)"
        names = ", ".join(f"{d.id}: {d.adapter.name} ({d.adapter.backend})" for d in self.devices)
        return f"MultiGpuContext([{names}])"

    def _device_id(self, device_id: Any) -> int:
        ids = range(len(self.devices))
        if isinstance(device_id, bool) or not isinstance(device_id, (int, np.integer)):
            raise InvalidArgumentError(
                f"device_id: expected an integer in {ids}, got {device_id!r}"
            )
        if int(device_id) not in ids:
            raise InvalidArgumentError(f"device_id: expected an integer in {ids}, got {device_id}")
        return int(device_id)

    def calibrate(self, force: bool = False) -> list[Capabilities]:
        """Measures every device: transfer both ways, on-device copy bandwidth and items/s of
        each kernel family. Figures are cached on disk per adapter, driver and package
        version (``AMARI_GPU_CACHE_DIR`` overrides the user cache dir); ``force`` measures
        again. Contexts calibrate on first need, so calling this is optional."""
        caps: list[Capabilities] = self._native.calibrate(bool(force))
        return caps

    def distribute_workload(self, workload: Workload, strategy: str | None = None) -> Plan:
        """The plan ``workload`` would run with, without running it."""
        if not isinstance(workload, Workload):
            raise InvalidArgumentError(
                f"workload: expected an amari_gpu.Workload, got {type(workload).__name__}"
            )
        plan: Plan = self._native.distribute_workload(workload, optional_strategy(strategy))
        return plan

    def profile(self) -> AbstractContextManager[Profile]:
        """Records every step of every call while active::

            with ctx.profile() as prof:
                ctx.geometric_product(a, b)
            print(prof)                     # summary table
            prof.save_chrome_trace("run.json")

        Kernels are timed with GPU timestamp queries where the device has them
        (``device.gpu_timestamps``) and, by default, where one costs under 3% of a chunk
        (``device.capabilities.timestamp_cost_s``); else on the host. Each event says which
        clock timed it. One profile per context at a time."""
        return _Recording(self._native)

    def health(self) -> dict[int, dict[str, Any]]:
        """``{device_id: {"healthy": bool, "reason": str | None}}``. A device that failed is
        left out of later calls until ``reset_health``."""
        return dict(self._native.health())

    def stats(self) -> list[dict[str, Any]]:
        """Per device: bytes moved, items and chunks done, busy seconds, device memory the
        context holds (``resident_bytes`` of it held by live DeviceArrays), health."""
        return list(self._native.stats())

    def inject_fault(self, device_id: int, after_chunks: int = 0) -> None:
        """Makes ``device_id`` fail when it starts a chunk after completing ``after_chunks``
        more (for testing recovery): its unfinished chunks go to the healthy devices."""
        after = integer("after_chunks", after_chunks, 0)
        self._native.inject_fault(self._device_id(device_id), after)

    def reset_health(self, device_id: int | None = None) -> None:
        """Marks ``device_id`` (or every device) healthy again."""
        self._native.reset_health(None if device_id is None else self._device_id(device_id))
