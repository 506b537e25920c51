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
    """``items`` independent items of ``kernel`` and what one item costs.

    ``kernel`` is a kernel name (e.g. ``"geometric_product"``) or a kernel family
    (``"geometric_algebra"``); the family selects which measured throughput applies.
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
    """A split of one workload across devices. Iterating gives the ``DeviceWorkload``s in
    item order; together they cover ``[0, items)`` exactly once.

    ``strategy`` is the strategy that made the split; ``requested_strategy`` is what was
    asked for (``"auto"`` chooses and says which here). ``lower_bound_s`` is
    max(total work / sum of throughputs, one chunk on the fastest device), and
    ``efficiency = lower_bound_s / estimated_makespan_s``. ``fast_path`` says the call was
    too small for a split to pay (by the cost model): it ran on its one device, on the
    calling thread, from a cached decision (estimates are those of its size class).
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
    """What a device can do, measured on it (``None`` where unknown).

    ``memory_bandwidth_gb_s``: the driver's on-device buffer copy (bytes read + written
    per second); ``kernel_bandwidth_gb_s``: what a streaming-copy kernel reaches (on CPU
    adapters the driver copy is a memcpy no shader approaches, so kernels are judged
    against this one too);
    ``transfer_gb_s``: host↔device (harmonic mean of both directions); ``throughput``:
    kernel family → items/s of the family's reference kernel on resident data;
    ``peak_gflops``: measured arithmetic peak (chains of fused multiply-adds);
    ``timestamp_cost_s``: what timing a chunk's kernel with GPU timestamps adds to it;
    ``launch_latency_s``: the smallest complete chunk (upload, dispatch, readback).
    ``shares_hardware_with`` lists the context's other devices on the same hardware (logical
    devices of one adapter, or one device through two backends) and ``group_speedup`` is
    their measured aggregate speed together over one of them alone.
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
    timestamp_cost_s: float | None
    max_buffer_bytes: int
    max_storage_binding_bytes: int
    memory_budget_bytes: int | None
    device_type: str
    backend: str
    from_cache: bool
    shares_hardware_with: list[int] = field(hash=False)
    group_speedup: float | None
