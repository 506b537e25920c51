"""Tropical algebra: max-plus and min-plus products, and all-pairs shortest paths."""

from __future__ import annotations

from ._mixin import KernelHost


class TropicalMixin(KernelHost):
    """Tropical-algebra methods of ``MultiGpuContext``."""
