"""Information geometry: Fisher information matrices, batched."""

from __future__ import annotations

from ._mixin import KernelHost


class InformationGeometryMixin(KernelHost):
    """Information-geometry methods of ``MultiGpuContext``."""
