"""Deprecated alias of :mod:`amari_gpu.tools.cli`, kept for one release.

The command line moved into the ``amari_gpu.tools`` subpackage so the package root is the
API; ``amari-gpu`` and ``python -m amari_gpu`` are unchanged.
"""

from __future__ import annotations

import sys
import warnings

from .tools.cli import main

__all__ = ["main"]

warnings.warn(
    "amari_gpu.cli is deprecated and will be removed in the next release; "
    "use amari_gpu.tools.cli (or the amari-gpu command) instead",
    DeprecationWarning,
    stacklevel=2,
)

if __name__ == "__main__":
    sys.exit(main())
