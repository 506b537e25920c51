"""What the operating system offers wgpu: the Vulkan loader and drivers, EGL and Mesa's DRI
drivers on Linux; Metal and DX12 are part of macOS and Windows. Used by ``amari-gpu doctor``
(and ``quiet_mesa`` when the package is imported).

Every check looks for real files or libraries and reports what it found where; nothing is
assumed from the platform name alone except that Metal and DX12 ship with the OS.
"""

from __future__ import annotations

import atexit
import ctypes.util
import glob
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One system check: ``ok`` is None for a note that is neither good nor bad."""

    name: str
    ok: bool | None
    detail: str


def _env_paths(name: str, default: str) -> list[str]:
    return [p for p in os.environ.get(name, default).split(os.pathsep) if p]


def vulkan_icd_dirs() -> list[str]:
    """Where the Vulkan loader looks for driver manifests (ICD JSON files) on Linux."""
    config = _env_paths("XDG_CONFIG_DIRS", "/etc/xdg")
    data = _env_paths("XDG_DATA_DIRS", "/usr/local/share:/usr/share")
    home = os.path.expanduser("~/.local/share")
    dirs = [os.path.join(d, "vulkan", "icd.d") for d in [*config, "/etc", *data, home]]
    return list(dict.fromkeys(dirs))


def vulkan_override() -> tuple[str, str] | None:
    """The loader override in force, as (variable, value): the loader reads the manifests
    it names instead of searching (VK_DRIVER_FILES; VK_ICD_FILENAMES before loader 1.3.207,
    which newer loaders still honour when VK_DRIVER_FILES is unset)."""
    for name in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        value = os.environ.get(name)
        if value:
            return name, value
    return None


def vulkan_icds() -> list[str]:
    """Paths of the Vulkan driver manifests the loader would read."""
    override = vulkan_override()
    if override:
        return [p for p in override[1].split(os.pathsep) if os.path.isfile(p)]
    return sorted(p for d in vulkan_icd_dirs() for p in glob.glob(os.path.join(d, "*.json")))


def _icd_detail(icds: list[str]) -> str:
    override = vulkan_override()
    if override is None:
        return _names(icds) if icds else "none in " + ", ".join(vulkan_icd_dirs())
    name, value = override
    missing = [p for p in value.split(os.pathsep) if p and not os.path.isfile(p)]
    found = _names(icds) if icds else "no existing file"
    gone = f"; missing: {', '.join(missing)}" if missing else ""
    return f"{name}={value} (overrides the search): {found}{gone}"


def egl_vendors() -> list[str]:
    """GLVND's EGL vendor manifests (Mesa's is 50_mesa.json)."""
    dirs = ["/etc/glvnd/egl_vendor.d", "/usr/share/glvnd/egl_vendor.d"]
    dirs += [os.path.join(d, "glvnd", "egl_vendor.d") for d in _env_paths("XDG_DATA_DIRS", "")]
    return sorted({p for d in dirs for p in glob.glob(os.path.join(d, "*.json"))})


def mesa_dri_drivers() -> list[str]:
    """Mesa's DRI drivers (swrast_dri.so is llvmpipe), which Mesa's EGL loads."""
    patterns = ["/usr/lib/*/dri/*_dri.so", "/usr/lib64/dri/*_dri.so", "/usr/lib/dri/*_dri.so"]
    patterns += [os.path.join(d, "*_dri.so") for d in _env_paths("LIBGL_DRIVERS_PATH", "")]
    return sorted({p for pattern in patterns for p in glob.glob(pattern)})


def _names(paths: list[str], limit: int = 6) -> str:
    names = [os.path.basename(p) for p in paths]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    where = sorted({os.path.dirname(p) for p in paths})
    return f"{', '.join(names[:limit])}{more} in {', '.join(where)}"


def linux_checks() -> list[Check]:
    """The Vulkan and GL/EGL pieces wgpu loads on Linux, each found or not."""
    loader = ctypes.util.find_library("vulkan")
    icds = vulkan_icds()
    egl = ctypes.util.find_library("EGL")
    vendors = egl_vendors()
    dri = mesa_dri_drivers()
    runtime = given_runtime_dir()
    return [
        Check("Vulkan loader", loader is not None, loader or "libvulkan.so.1 not found"),
        Check("Vulkan drivers (ICD manifests)", bool(icds), _icd_detail(icds)),
        Check("EGL library", egl is not None, egl or "libEGL.so.1 not found"),
        Check(
            "EGL vendors (GLVND)",
            bool(vendors),
            _names(vendors) if vendors else "no vendor manifest in /usr/share/glvnd/egl_vendor.d",
        ),
        Check(
            "Mesa DRI drivers (GL)",
            bool(dri),
            _names(dri) if dri else "no *_dri.so under /usr/lib/*/dri, /usr/lib64/dri",
        ),
        Check(
            "XDG_RUNTIME_DIR",
            None,
            f"set to {runtime}"
            if runtime and os.path.isdir(runtime)
            else "not set or missing: Mesa warns on stderr in programs that do not set one "
            "(harmless); importing amari_gpu sets a private one for its process",
        ),
    ]


def platform_checks() -> list[Check]:
    """System checks for this platform."""
    if sys.platform.startswith("linux"):
        return linux_checks()
    if sys.platform == "darwin":
        return [Check("Metal", None, "built into macOS (10.13 or later): nothing to install")]
    if sys.platform == "win32":
        vulkan = ctypes.util.find_library("vulkan-1")
        return [
            Check("DX12", None, "built into Windows 10 and later: keep the GPU driver current"),
            Check("Vulkan loader", vulkan is not None, vulkan or "vulkan-1.dll not found"),
        ]
    return [Check("platform", None, f"{sys.platform}: no platform-specific checks")]


_GIVEN: list[str | None] = []


def given_runtime_dir() -> str | None:
    """``XDG_RUNTIME_DIR`` as the process was given it, before ``quiet_mesa`` replaced it."""
    return _GIVEN[0] if _GIVEN else os.environ.get("XDG_RUNTIME_DIR")


def quiet_mesa() -> None:
    """Gives this process a private ``XDG_RUNTIME_DIR`` (removed at exit) on Linux when it
    has no valid one: without it Mesa's window-system loaders print "XDG_RUNTIME_DIR is
    invalid or not set" on stderr, which on a headless machine means nothing. Importing
    ``amari_gpu`` calls it, before any adapter is enumerated; a valid directory already set
    is left alone, and calling it again changes nothing."""
    if not sys.platform.startswith("linux") or _GIVEN:
        return
    current = os.environ.get("XDG_RUNTIME_DIR")
    _GIVEN.append(current)
    if current and os.path.isdir(current):
        return
    private = tempfile.mkdtemp(prefix="amari-gpu-xdg-")  # mode 0700, as the spec asks
    atexit.register(shutil.rmtree, private, True)
    os.environ["XDG_RUNTIME_DIR"] = private
