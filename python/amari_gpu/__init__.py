"""amari_gpu: geometric-algebra, tropical and information-geometry batch kernels on every GPU
in the machine, of any vendor (Vulkan, Metal, DX12, GL through wgpu)."""

from __future__ import annotations

from . import _native
from ._adapters import AdapterInfo, adapters
from ._logging import reset_log_levels
from ._system import quiet_mesa
from .algebra import Algebra
from .array import DeviceArray
from .context import Device, MultiGpuContext
from .domain import DomainReport
from .errors import (
    AmariGpuError,
    DeviceLostError,
    InvalidArgumentError,
    KernelCompileError,
    NoAdapterError,
    OutOfMemoryError,
    ShapeError,
)
from .planning import STRATEGIES, Capabilities, DeviceWorkload, Plan, Workload
from .profiler import Profile

# Importing enumerates nothing; this runs before anything can: without a valid
# XDG_RUNTIME_DIR, Mesa's loaders print "XDG_RUNTIME_DIR is invalid or not set" on every
# headless machine (docs/platforms.md).
quiet_mesa()

__version__: str = _native.__version__


def __getattr__(name: str) -> object:
    # RayContext needs Ray, an optional dependency: imported on first use only, so that
    # ``import amari_gpu`` never imports Ray.
    if name == "RayContext":
        from .cluster import RayContext

        return RayContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "STRATEGIES",
    "AdapterInfo",
    "Algebra",
    "AmariGpuError",
    "Capabilities",
    "Device",
    "DeviceArray",
    "DeviceLostError",
    "DeviceWorkload",
    "DomainReport",
    "InvalidArgumentError",
    "KernelCompileError",
    "MultiGpuContext",
    "NoAdapterError",
    "OutOfMemoryError",
    "Plan",
    "Profile",
    "ShapeError",
    "Workload",
    "__version__",
    "adapters",
    "reset_log_levels",
]
