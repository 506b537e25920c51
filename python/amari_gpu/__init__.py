"""amari_gpu: geometric-algebra, tropical and information-geometry batch kernels on every GPU
in the machine, of any vendor (Vulkan, Metal, DX12, GL through wgpu)."""

from __future__ import annotations

from . import _native
from ._adapters import AdapterInfo, adapters
from .context import Device, MultiGpuContext
from .errors import (
    AmariGpuError,
    DeviceLostError,
    InvalidArgumentError,
    NoAdapterError,
    OutOfMemoryError,
    ShapeError,
)

__version__: str = _native.__version__

__all__ = [
    "AdapterInfo",
    "AmariGpuError",
    "Device",
    "DeviceLostError",
    "InvalidArgumentError",
    "MultiGpuContext",
    "NoAdapterError",
    "OutOfMemoryError",
    "ShapeError",
    "__version__",
    "adapters",
]
