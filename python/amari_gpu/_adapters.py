"""Adapter descriptions: what wgpu reports about every adapter on every native backend.
The bindings build ``AdapterInfo`` themselves (one keyword per field): the class is the one
description of the record in Python."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import _native

BACKENDS: tuple[str, ...] = _native.BACKENDS
"""Backend names the core accepts, in order of preference."""
DEVICE_TYPES: tuple[str, ...] = _native.DEVICE_TYPES
"""Adapter kinds the core reports."""


@dataclass(frozen=True)
class AdapterInfo:
    """One adapter as wgpu reports it, before any device is opened on it (frozen); the last
    entry of :func:`adapters` is the host CPU device (``backend == "host"``,
    ``device_type == "cpu"``, ``name`` the CPU model, ``driver`` "amari-gpu host kernels",
    ``limits["threads"]``, ``features`` its SIMD level first: "avx512f", "avx2", "neon" or
    "portable").

    Attributes:
        index: position in ``adapters()``; what ``MultiGpuContext(adapters=...)`` takes.
        name: as the driver reports it.
        vendor: as the driver reports it (for display only).
        vendor_id: backend-specific id (the PCI id for hardware adapters).
        device_id: backend-specific id (the PCI id for hardware adapters).
        backend: "vulkan", "metal", "dx12", "gl" or "host".
        device_type: "discrete_gpu", "integrated_gpu", "virtual_gpu", "cpu" or "other", as
            the adapter reports it.
        driver: the driver's name.
        driver_info: the driver's version text.
        pci_bus_id: where the backend reports one, else "".
        limits: the adapter's limits by WebGPU name, e.g.
            ``max_storage_buffer_binding_size``.
        features: optional features it supports, lower-case names (e.g.
            ``timestamp_query``).
        same_device_as: index of an earlier entry that is the same physical device seen
            through another backend (e.g. a GPU through both Vulkan and GL), else None.
    """

    index: int
    name: str
    vendor: str
    vendor_id: int
    device_id: int
    backend: str
    device_type: str
    driver: str
    driver_info: str
    pci_bus_id: str
    limits: dict[str, int] = field(repr=False, hash=False)
    features: list[str] = field(repr=False, hash=False)
    same_device_as: int | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AdapterInfo:
        """Builds one from a dict with one key per field (the native layer returns
        ``AdapterInfo``s themselves)."""
        return cls(**d)

    @property
    def is_software(self) -> bool:
        """True for adapters that run on the CPU (lavapipe, llvmpipe, WARP...)."""
        return self.device_type == "cpu"

    @property
    def is_host(self) -> bool:
        """True for the host CPU device (native kernels, not a wgpu adapter)."""
        return self.backend == "host"

    def describe(self) -> str:
        """One line: index, name, backend, kind and driver."""
        driver = " ".join(s for s in (self.driver, self.driver_info) if s)
        dup = "" if self.same_device_as is None else f", same device as [{self.same_device_as}]"
        return f"[{self.index}] {self.name} ({self.backend}, {self.device_type}, {driver}{dup})"


def adapters() -> list[AdapterInfo]:
    """Every adapter wgpu reports on every native backend (Vulkan, Metal, DX12, GL), then the
    host CPU device."""
    return _native.adapters()


def default_selection() -> list[tuple[AdapterInfo, bool, str]]:
    """Every adapter of :func:`adapters`, whether the default selection (``MultiGpuContext()``)
    uses it, and why (or why not) in a few words."""
    found, explained = adapters(), _native.default_selection()
    assert len(found) == len(explained), "one reason per adapter"
    return [(info, used, why) for info, (used, why) in zip(found, explained)]
