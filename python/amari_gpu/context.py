"""The multi-device context: the public entry point for running kernels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _native
from ._adapters import BACKENDS, DEVICE_TYPES, AdapterInfo
from ._validate import batch, index_list, name_list, optional_positive_int, positive_int


@dataclass(frozen=True)
class Device:
    """A device (wgpu device + queue) opened by a context on one adapter."""

    id: int
    adapter: AdapterInfo


class MultiGpuContext:
    """Devices on every selected adapter, used together by every kernel call.

    Selection: by default every distinct hardware adapter (one per physical device,
    preferring Vulkan/Metal/DX12 over GL), or the software adapters when the machine has no
    hardware one. ``backends=`` or ``adapters=`` select exactly what they name, including an
    adapter that is another backend's view of the same device. ``device_types=`` filters by
    kind, ``max_devices=`` caps the count, and ``devices_per_adapter=N`` opens N logical
    devices (each with its own queue) per adapter.

    ``chunk_items`` overrides the items per chunk (default: derived from the problem only);
    ``sync_timeout_ms`` turns a device that takes longer than that for one chunk into a
    failure.
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
    ) -> None:
        self._native = _native.Context(
            backends=name_list("backends", backends, BACKENDS),
            device_types=name_list("device_types", device_types, DEVICE_TYPES),
            adapters=index_list("adapters", adapters),
            max_devices=optional_positive_int("max_devices", max_devices),
            devices_per_adapter=positive_int("devices_per_adapter", devices_per_adapter),
            chunk_items=optional_positive_int("chunk_items", chunk_items),
            sync_timeout_ms=optional_positive_int("sync_timeout_ms", sync_timeout_ms),
        )
        self.devices: list[Device] = [
            Device(id=d["id"], adapter=AdapterInfo.from_dict(d["adapter"]))
            for d in self._native.devices()
        ]

    def __repr__(self) -> str:
        names = ", ".join(f"{d.id}: {d.adapter.name} ({d.adapter.backend})" for d in self.devices)
        return f"MultiGpuContext([{names}])"

    def geometric_product(self, a: Any, b: Any) -> npt.NDArray[np.float32]:
        """Geometric product ``a[i] b[i]`` in Cl(3,0) for batches of shape (N, 8).

        Blades are in bitmask order: index i is the blade whose basis vectors are the set
        bits of i: 1, e1, e2, e12, e3, e13, e23, e123. Inputs of any real dtype are converted
        to float32 (a copy; inputs are never modified); the result is a new float32 (N, 8)
        array. Runs on every device of the context.
        """
        a32 = batch("a", a, 8)
        b32 = batch("b", b, 8, rows=a32.shape[0])
        return self._native.geometric_product(a32, b32)
