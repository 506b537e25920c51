"""Deprecated alias of :mod:`amari_gpu.tools.demo`, kept for one release.

The demo moved into the ``amari_gpu.tools`` subpackage so the package root is the API;
``amari-gpu demo`` is unchanged.
"""

from __future__ import annotations

import warnings

from .tools.demo import run

__all__ = ["run"]

warnings.warn(
    "amari_gpu.demo is deprecated and will be removed in the next release; "
    "use amari_gpu.tools.demo (or the amari-gpu demo command) instead",
    DeprecationWarning,
    stacklevel=2,
)
