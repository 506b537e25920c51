"""Deprecated alias of :mod:`amari_gpu.tools.scaling`, kept for one release.

The scaling study moved into the ``amari_gpu.tools`` subpackage so the package root is the
API; ``amari-gpu bench`` is unchanged.
"""

from __future__ import annotations

import warnings

from .tools.scaling import FULL, QUICK, Settings, run_study, write_report

__all__ = ["FULL", "QUICK", "Settings", "run_study", "write_report"]

warnings.warn(
    "amari_gpu.scaling is deprecated and will be removed in the next release; "
    "use amari_gpu.tools.scaling instead",
    DeprecationWarning,
    stacklevel=2,
)
