"""The ``amari_gpu`` logger: the Rust core's records (adapter selection, calibration, cache
hits, device failures, grid rebalances) arrive here through pyo3-log, under
``amari_gpu.<core module>`` (e.g. ``amari_gpu.calibration.context``).

Like any library, the package adds only a ``NullHandler``: nothing is printed unless the
application configures logging (``logging.basicConfig(level=logging.INFO)`` shows the
calibration lines; warnings such as device failures then show at the default level).

The bridge caches each logger's effective level so that a disabled level (the per-chunk
DEBUG lines) costs the core no GIL and no Python call. That cache is emptied whenever
Python's ``logging`` empties its own level cache — on every ``Logger.setLevel`` (which
``logging.basicConfig``, ``dictConfig`` and pytest's ``caplog`` go through) and every
``logging.disable`` — so configuring logging at any point shows the package's records from
the next one on, with nothing to call by hand."""

from __future__ import annotations

import logging

from . import _native

logging.getLogger("amari_gpu").addHandler(logging.NullHandler())


def reset_log_levels() -> None:
    """Makes the core read the ``amari_gpu`` loggers' levels again.

    Level changes made through ``logging`` (``setLevel``, ``basicConfig``, ``dictConfig``,
    ``logging.disable``) are seen without it; it is needed only after a level was assigned
    behind ``logging``'s back (``logger.level = ...``), which Python's own level cache does
    not see either."""
    _native.reset_log_levels()


def _follow_level_changes(manager: logging.Manager) -> None:
    # ``Manager._clear_cache`` is where the standard library itself invalidates the level
    # cache of every logger when any level changes: hooking it keeps the core's cache exactly
    # as fresh as Python's, at no cost per call or per record. The hook is an attribute of
    # this manager instance (the class is left alone), installed once even if the package is
    # reloaded.
    clear = getattr(manager, "_clear_cache", None)
    if clear is None or getattr(clear, "_amari_gpu_hook", False):
        return

    def _clear_cache() -> None:
        clear()
        _native.reset_log_levels()

    _clear_cache._amari_gpu_hook = True  # type: ignore[attr-defined]
    manager._clear_cache = _clear_cache  # type: ignore[attr-defined]


_follow_level_changes(logging.Logger.manager)
