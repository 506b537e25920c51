"""Exceptions raised by amari_gpu, all rooted at :class:`AmariGpuError`."""

from __future__ import annotations

__all__ = [
    "AmariGpuError",
    "DeviceLostError",
    "InvalidArgumentError",
    "KernelCompileError",
    "NoAdapterError",
    "OutOfMemoryError",
    "ShapeError",
]


class AmariGpuError(Exception):
    """Base class of every error amari_gpu raises on purpose."""


class NoAdapterError(AmariGpuError):
    """No GPU adapter (or none matching the request) is available.

    The message says how to get one: a GPU driver, or Mesa's software rasterisers
    (``apt-get install mesa-vulkan-drivers``) on a machine without a GPU.
    """


class DeviceLostError(AmariGpuError):
    """A device was lost, timed out or failed a step, and no healthy device could take over."""


class OutOfMemoryError(AmariGpuError):
    """A device could not allocate the buffers a step needed."""


class ShapeError(AmariGpuError, ValueError):
    """An array has the wrong shape; the message names the argument, expected and actual shape."""


class InvalidArgumentError(AmariGpuError, ValueError):
    """A non-array argument is out of range or unknown; the message names it."""


class KernelCompileError(AmariGpuError, ValueError):
    """A user's WGSL kernel (``map_rows``) does not compile, its ``row`` function does not
    match the arrays passed, it declares what ``map_rows`` does not allow (its own resources,
    ``var<workgroup>``, ``override``, entry points, over 16 KiB of private memory per row), a
    driver refuses it, or its loops ran past Mesa's loop cap; the message gives the line and
    column in the user's source (and naga's text), or says which part does not match, or
    which device and rows. No device is marked unhealthy."""
