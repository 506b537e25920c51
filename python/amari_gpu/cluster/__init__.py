"""amari_gpu on a Ray cluster: :class:`RayContext` runs the kernels of
:class:`~amari_gpu.MultiGpuContext` over every node that offers the ``amari_gpu`` resource,
each node a device to the cluster planner, with results bit-identical to one context.

Needs Ray (``pip install 'amari-gpu[ray]'``); ``import amari_gpu`` alone never imports it.
"""

from __future__ import annotations

try:
    import ray as _ray  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("amari_gpu.cluster needs Ray: pip install 'amari-gpu[ray]'") from e

from .context import DEFAULT_RESOURCE, NodeInfo, RayContext
from .profile import ClusterProfile

__all__ = ["DEFAULT_RESOURCE", "ClusterProfile", "NodeInfo", "RayContext"]
