"""Workloads, plans and device capabilities: what ``distribute_workload`` and
``calibrate`` return, as plain frozen dataclasses. The bindings build ``Plan``,
``DeviceWorkload`` and ``Capabilities`` themselves (one keyword per field): each class here is
the one description of its record in Python."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from . import _native
from .errors import InvalidArgumentError

_MAX_ITEMS = 2**64 - 1

STRATEGIES: tuple[str, ...] = _native.STRATEGIES
"""Names of the split strategies, as the core defines them."""


def check_strategy(strategy: Any) -> str:
    """``strategy`` if it names a strategy."""
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise InvalidArgumentError(
            f"strategy: expected one of {list(STRATEGIES)}, got {strategy!r}"
        )
    return strategy


def optional_strategy(strategy: Any) -> str | None:
    """None (the context's default) or a strategy name."""
    return None if strategy is None else check_strategy(strategy)


@dataclass(frozen=True)
class Workload:
    """``items`` independent items of ``kernel`` and what one item costs (frozen); what
    :meth:`MultiGpuContext.distribute_workload` plans.

    Attributes:
        kernel: a kernel name (e.g. "geometric_product") or a family name
            ("geometric_algebra", "tropical", "information_geometry", "elementwise"); the
            family selects which measured throughput applies (an unknown name uses the mean
            of the measured families).
        items: an integer in [0, 2**64 - 1].
        bytes_in_per_item: a finite number >= 0.
        bytes_out_per_item: a finite number >= 0.
        flops_per_item: a finite number >= 0 (planning refuses an item that costs
            nothing).

    Raises:
        InvalidArgumentError: a field is out of its range (the core's rule, applied when
            the ``Workload`` is constructed).
    """

    kernel: str
    items: int
    bytes_in_per_item: float
    bytes_out_per_item: float
    flops_per_item: float

    def __post_init__(self) -> None:
        # Types and the conversion of ``items`` to u64 are checked here; values (a kernel
        # name, finite non-negative costs) by the core's rule, the one planning applies.
        if not isinstance(self.kernel, str):
            raise InvalidArgumentError(f"kernel: expected a kernel name, got {self.kernel!r}")
        object.__setattr__(self, "kernel", str(self.kernel))
        items = self.items
        if isinstance(items, bool) or not isinstance(items, (int, np.integer)) or items < 0:
            raise InvalidArgumentError(f"items: expected an integer >= 0, got {items!r}")
        if items > _MAX_ITEMS:
            raise InvalidArgumentError(
                f"items: expected at most {_MAX_ITEMS} (2**64 - 1), got {items}"
            )
        object.__setattr__(self, "items", int(items))
        for name in ("bytes_in_per_item", "bytes_out_per_item", "flops_per_item"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)
            ):
                raise InvalidArgumentError(f"{name}: expected a finite number >= 0, got {value!r}")
            # numpy scalars (np.float32(1.0), np.int64(8)) are numbers too; the core takes
            # a Python float.
            object.__setattr__(self, name, float(value) if isinstance(value, np.number) else value)
        _native.check_workload(self)


@dataclass(frozen=True)
class DeviceWorkload:
    """One device's part of a plan: items ``[start, stop)``, which are ``chunks`` whole
    chunks of the grid starting at ``first_chunk``."""

    device_id: int
    start: int
    stop: int
    items: int
    chunks: int
    estimated_seconds: float
    first_chunk: int


@dataclass(frozen=True)
class Plan:
    """A split of one workload across devices (frozen). Iterating (or indexing, ``len()``)
    gives the ``DeviceWorkload``s in item order; together they cover ``[0, items)`` exactly
    once.

    Attributes:
        strategy: the strategy that made the split.
        requested_strategy: what was asked for ("auto" chooses, and ``strategy`` says what).
        items: the problem's items.
        chunk_items: items per chunk of its chunk grid.
        n_chunks: chunks of the grid.
        assignments: ``tuple[DeviceWorkload, ...]``.
        estimated_makespan_s: the model's estimate of the slowest device's time.
        lower_bound_s: max(total work / the most the groups can stream together under the
            model, launches left out, one chunk on the fastest device): no plan under the
            model beats it (see docs/strategies.md).
        efficiency: ``lower_bound_s / estimated_makespan_s``.
        fast_path: the call was too small for a split to pay (by the cost model): it ran
            on its one device, on the calling thread, from a cached decision (estimates are
            those of its size class). On the host device, a chunk its kernel would share
            among threads runs on the device's own threads instead.
        left_out: ``(device_id, reason)`` for every healthy device the call could give no
            work to, e.g. ``(1, "float64 needs SHADER_F64: device 1 'llvmpipe' (gl) lacks
            it")``; empty for ``distribute_workload``.
    """

    strategy: str
    requested_strategy: str
    items: int
    chunk_items: int
    n_chunks: int
    assignments: tuple[DeviceWorkload, ...]
    estimated_makespan_s: float
    lower_bound_s: float
    efficiency: float
    fast_path: bool = False
    left_out: tuple[tuple[int, str], ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        """Builds one from a dict with one key per field, ``assignments`` a sequence of
        dicts with one key per field of ``DeviceWorkload`` (the native layer returns
        ``Plan``s themselves)."""
        fields: dict[str, Any] = {
            **d,
            "assignments": tuple(DeviceWorkload(**a) for a in d["assignments"]),
        }
        return cls(**fields)

    def __iter__(self) -> Iterator[DeviceWorkload]:
        return iter(self.assignments)

    def __len__(self) -> int:
        return len(self.assignments)

    @overload
    def __getitem__(self, index: int) -> DeviceWorkload: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[DeviceWorkload, ...]: ...
    def __getitem__(self, index: int | slice) -> DeviceWorkload | tuple[DeviceWorkload, ...]:
        return self.assignments[index]


@dataclass(frozen=True)
class Capabilities:
    """What a device can do, measured on it (frozen; ``None`` where unknown).

    Attributes:
        device_id: the device.
        memory_bandwidth_gb_s: the driver's on-device buffer copy, bytes read + written per
            second.
        kernel_bandwidth_gb_s: what a streaming-copy kernel reaches (on CPU adapters the
            driver copy is a memcpy no shader approaches, so kernels are judged against this
            one too).
        transfer_gb_s: host↔device, the harmonic mean of both directions.
        h2d_gb_s: host to device.
        d2h_gb_s: device to host.
        launch_latency_s: the smallest complete chunk (upload, dispatch, readback).
        throughput: kernel family ("geometric_algebra", "tropical",
            "information_geometry", "elementwise") → items/s of its reference kernel on
            resident data.
        peak_gflops: measured arithmetic peak (chains of fused multiply-adds).
        dtype_rates: dtype ("float64") → the device's rate in it relative to float32 (one
            probe kernel timed in both), measured when a plan first splits work of that dtype
            (or by ``calibrate``) and cached; float64 work is split by it.
        timestamp_cost_s: what timing a chunk's kernel with GPU timestamps adds to it.
        max_buffer_bytes: the device's largest buffer.
        max_storage_binding_bytes: the device's largest storage binding.
        memory_budget_bytes: memory a workload may use: half the host's available memory
            for CPU adapters, None for GPUs (no portable API reports it).
        device_type: as in ``AdapterInfo``.
        backend: as in ``AdapterInfo``.
        from_cache: figures read from the on-disk cache rather than measured now.
        shares_hardware_with: the context's other devices on the same hardware (logical
            devices of one adapter, or one device through two backends).
        group_speedup: their measured aggregate speed together over one alone (members of
            different speeds, like the host beside lavapipe: each timed alone, then all
            together on a capability split; at most 1 when the host device's pool has a
            thread on every hardware thread).
    """

    device_id: int
    memory_bandwidth_gb_s: float | None
    kernel_bandwidth_gb_s: float | None
    transfer_gb_s: float | None
    h2d_gb_s: float | None
    d2h_gb_s: float | None
    launch_latency_s: float | None
    throughput: dict[str, float] = field(hash=False)
    peak_gflops: float | None
    dtype_rates: dict[str, float] = field(hash=False)
    timestamp_cost_s: float | None
    max_buffer_bytes: int
    max_storage_binding_bytes: int
    memory_budget_bytes: int | None
    device_type: str
    backend: str
    from_cache: bool
    shares_hardware_with: list[int] = field(hash=False)
    group_speedup: float | None
