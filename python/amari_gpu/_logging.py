"""The ``amari_gpu`` logger: the Rust core's records (adapter selection, calibration, cache
hits, device failures, grid rebalances) arrive here through pyo3-log, under
``amari_gpu.<core module>`` (e.g. ``amari_gpu.calibration.context``).

Like any library, the package adds only a ``NullHandler``: nothing is printed unless the
application configures logging (``logging.basicConfig(level=logging.INFO)`` shows the
calibration lines; warnings such as device failures then show at the default level)."""

from __future__ import annotations

import logging

from . import _native

logging.getLogger("amari_gpu").addHandler(logging.NullHandler())


def reset_log_levels() -> None:
    """Makes the core read the ``amari_gpu`` loggers' levels again.

    The bridge caches each logger's effective level the first time the core logs through
    it, so that a disabled level costs nothing; call this after changing a level (for
    example ``logging.getLogger("amari_gpu").setLevel(logging.DEBUG)``) once the package
    has already logged."""
    _native.reset_log_levels()
