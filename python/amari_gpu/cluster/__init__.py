"""amari_gpu on a Ray cluster: :class:`RayContext` runs the kernels of
:class:`~amari_gpu.MultiGpuContext` over every node that offers the ``amari_gpu`` resource,
each node a device to the cluster planner, with results bit-identical to one context.

Needs Ray (``pip install '.[ray]'`` in a clone, or ``pip install 'ray>=2.40'``); ``import
amari_gpu`` alone never imports it.
"""

from __future__ import annotations

try:
    import ray as _ray  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "amari_gpu.cluster needs Ray: pip install '.[ray]' in a clone of amari-gpu, "
        "or pip install 'ray>=2.40'"
    ) from e

from .array import ClusterArray
from .context import RayContext
from .nodes import DEFAULT_RESOURCE, NodeInfo
from .profile import ClusterProfile

__all__ = ["DEFAULT_RESOURCE", "ClusterArray", "ClusterProfile", "NodeInfo", "RayContext"]
