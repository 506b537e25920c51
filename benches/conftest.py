"""Shared setup of the pytest-benchmark suite (``pytest benches/ --benchmark-only``).

Not part of the normal test run: pyproject's ``testpaths`` names only ``tests/``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# Mesa's loaders print "XDG_RUNTIME_DIR is invalid or not set" without a valid one; give
# them a private directory before amari_gpu (and so wgpu) is loaded.
if not os.environ.get("XDG_RUNTIME_DIR"):
    _RUNTIME_DIR = tempfile.mkdtemp(prefix="amari-gpu-bench-")
    os.chmod(_RUNTIME_DIR, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = _RUNTIME_DIR
    atexit.register(shutil.rmtree, _RUNTIME_DIR, ignore_errors=True)
