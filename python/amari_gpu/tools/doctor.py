"""``amari-gpu doctor``: is there a usable adapter, does each one compute correctly, and what
exactly to install when something is missing.

Each adapter, and the host CPU device, is opened alone and is calibrated, then runs three
small kernels (a Cl(3,0) product, a max-plus product, a Fisher matrix), each checked against a
CPU reference computed here. The report also says which devices the default selection uses and
why, and the host device's SIMD level and threads.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time
from typing import Any, Callable

import numpy as np

from .. import __version__, _native
from .._adapters import AdapterInfo, adapters, default_selection
from .._system import Check, given_runtime_dir, platform_checks
from ..context import MultiGpuContext
from ..reference import geometric_product as reference_product
from .progress import Progress

MESA_VULKAN = "sudo apt-get install mesa-vulkan-drivers libvulkan1"
MESA_GL = "sudo apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri"


def _calibrate(ctx: MultiGpuContext) -> tuple[bool, str]:
    # Kernels calibrate on first need; doing it first keeps its time out of theirs.
    cap = ctx.calibrate()[0]
    rate = cap.throughput.get("geometric_algebra")
    ok = rate is not None and rate > 0
    source = "cached" if cap.from_cache else "measured"
    wide = "".join(f", {k} at {v:.3g}x float32" for k, v in sorted(cap.dtype_rates.items()))
    return ok, f"calibration ({source}): {rate or 0:.3g} Cl(3,0) products/s{wide}"


def _ga(ctx: MultiGpuContext) -> tuple[bool, str]:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4096, 8)).astype(np.float32)
    b = rng.standard_normal((4096, 8)).astype(np.float32)
    want = reference_product(a, b)
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-3)
    err = float((np.abs(ctx.geometric_product(a, b) - want) / scale).max())
    return err < 1e-5, f"Cl(3,0) product, 4096 rows: max rel. error {err:.1e}"


def _tropical(ctx: MultiGpuContext) -> tuple[bool, str]:
    rng = np.random.default_rng(12)
    a = rng.integers(-50, 50, (96, 48)).astype(np.float32)
    b = rng.integers(-50, 50, (48, 40)).astype(np.float32)
    exact = np.array_equal(ctx.tropical_matmul(a, b), (a[:, :, None] + b[None]).max(axis=1))
    return exact, f"max-plus 96x48 @ 48x40: {'exact' if exact else 'WRONG'}"


def _fisher(ctx: MultiGpuContext) -> tuple[bool, str]:
    scores = np.random.default_rng(13).standard_normal((2048, 16)).astype(np.float32)
    s64 = scores.astype(np.float64)
    want = s64.T @ s64 / len(s64)
    err = float(np.abs(ctx.fisher_information(scores) - want).max() / np.abs(want).max())
    return err < 1e-4, f"Fisher 2048x16: rel. error {err:.1e}"


SMOKE: tuple[tuple[str, Callable[[MultiGpuContext], tuple[bool, str]]], ...] = (
    ("calibrate", _calibrate),
    ("geometric_product", _ga),
    ("tropical_matmul", _tropical),
    ("fisher_information", _fisher),
)


def smoke(info: AdapterInfo, progress: Progress) -> dict[str, Any]:
    """Opens ``info`` alone and runs every smoke kernel; errors are results, not crashes."""
    result: dict[str, Any] = {
        "index": info.index,
        "name": info.name,
        "backend": info.backend,
        "device_type": info.device_type,
        "driver": " ".join(s for s in (info.driver, info.driver_info) if s),
        "describe": info.describe(),
        "kernels": [],
        "error": None,
    }
    if info.is_host:
        # Alone, the host device's pool takes every hardware thread; said explicitly so the
        # report names the pool that ran the kernels.
        threads = int(info.limits.get("threads", 1))
        result.update(simd=info.features[0] if info.features else "none", threads=threads)
    try:
        ctx = (
            MultiGpuContext(adapters=[info.index], host_threads=result["threads"])
            if info.is_host
            else MultiGpuContext(adapters=[info.index])
        )
    except Exception as e:  # any failure to open is what the doctor must report
        result["error"] = f"opening a device failed: {type(e).__name__}: {e}"
        result["ok"] = False
        progress.advance(len(SMOKE))
        return result
    for kernel, run in SMOKE:
        progress.advance(0, note=f"[{info.index}] {kernel}")
        start = time.perf_counter()
        try:
            ok, detail = run(ctx)
        except Exception as e:  # a kernel that raises is a failed check, reported as such
            ok, detail = False, f"{kernel} raised {type(e).__name__}: {e}"
        seconds = time.perf_counter() - start
        result["kernels"].append({"kernel": kernel, "ok": ok, "detail": detail, "s": seconds})
        progress.advance()
    result["ok"] = all(k["ok"] for k in result["kernels"])
    return result


def unavailable_backends(
    backends: list[str] | None, found: list[AdapterInfo]
) -> list[dict[str, str]]:
    """The backends named with ``--backends`` that have no adapter here, each with the core's
    reason (Metal and DX12 exist only on their platforms; else which driver is missing)."""
    present = {a.backend for a in found}
    return [
        {"backend": b, "reason": _native.backend_unavailable_reason(b)}
        for b in dict.fromkeys(backends or [])
        if b not in present
    ]


def fixes(
    checks: list[Check],
    found: list[AdapterInfo],
    results: list[dict[str, Any]],
    backends: list[str] | None = None,
) -> list[str]:
    """What to do about each missing piece, most useful first. With ``backends`` named, only
    the hints about those backends: Mesa's Vulkan and GL loaders (and the XDG_RUNTIME_DIR
    they want) say nothing about Metal or DX12."""
    out: list[str] = []
    by_name = {c.name: c for c in checks}
    present = {a.backend for a in found}
    for absent in unavailable_backends(backends, found):
        if absent["backend"] != "host":
            out.append(f"Backend {absent['backend']}: {absent['reason']}.")
    mesa = backends is None or bool({"vulkan", "gl"} & set(backends))
    if not found and backends is None:
        if sys.platform == "darwin":
            out.append("Metal is built into macOS 10.13+; wgpu found no Metal GPU on this Mac.")
        elif sys.platform == "win32":
            out.append(
                "DX12 is built into Windows 10+: install or update the GPU vendor's driver "
                "(Windows' WARP software adapter also needs the DX12 runtime)."
            )
        else:
            out.append(
                "No adapter: install your GPU vendor's driver, or on Debian/Ubuntu Mesa's "
                f"software Vulkan adapter (lavapipe): {MESA_VULKAN}"
            )
    if sys.platform.startswith("linux") and mesa:
        loader, icds = by_name["Vulkan loader"], by_name["Vulkan drivers (ICD manifests)"]
        if not loader.ok:
            out.append(f"Vulkan loader missing (libvulkan.so.1): {MESA_VULKAN}")
        if not icds.ok:
            out.append(
                "No Vulkan driver manifest: install your GPU vendor's Vulkan driver, or "
                f"lavapipe: {MESA_VULKAN}"
            )
        if loader.ok and icds.ok and "vulkan" not in present:
            out.append(
                "Vulkan loader and drivers are installed but wgpu found no Vulkan adapter: "
                "run `vulkaninfo --summary` (sudo apt-get install vulkan-tools) to see why."
            )
        given = given_runtime_dir()
        if not (given and os.path.isdir(given)):
            out.append(
                "Programs that do not import amari_gpu print Mesa's 'XDG_RUNTIME_DIR is "
                "invalid or not set' without one: export XDG_RUNTIME_DIR=$(mktemp -d)"
            )
        gl = ("EGL library", "EGL vendors (GLVND)", "Mesa DRI drivers (GL)")
        missing = [name for name in gl if not by_name[name].ok]
        if missing:
            out.append(f"GL/EGL missing ({', '.join(missing)}): {MESA_GL}")
        elif "gl" not in present:
            out.append(
                "EGL and Mesa are installed but wgpu found no GL adapter: run `eglinfo` "
                "(sudo apt-get install mesa-utils) to see why."
            )
    for r in results:
        if not r["ok"]:
            why = r["error"] or "; ".join(k["detail"] for k in r["kernels"] if not k["ok"])
            out.append(
                f"Adapter [{r['index']}] ({r['backend']}) failed: {why}. Update its driver, "
                f"or leave it out (MultiGpuContext(adapters=[...]) or --backends)."
            )
    return out


def diagnose(backends: list[str] | None, show_progress: bool) -> dict[str, Any]:
    """Runs every check; the report ``render`` prints and ``--json`` dumps."""
    checks = platform_checks()
    every = adapters()
    chosen = [a for a in every if backends is None or a.backend in backends]
    results: list[dict[str, Any]] = []
    with Progress(len(chosen) * len(SMOKE), "doctor", enabled=show_progress) as bar:
        for info in chosen:
            results.append(smoke(info, bar))
    usable = sum(r["ok"] for r in results)
    return {
        "amari_gpu_version": __version__,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "checks": [dataclasses.asdict(c) for c in checks],
        "adapters": results,
        "adapters_found": len(every),
        "usable": usable,
        "ok": usable > 0,
        "default_selection": [
            {"index": info.index, "used": used, "reason": why}
            for info, used, why in default_selection()
        ],
        "unavailable_backends": unavailable_backends(backends, every),
        "fixes": fixes(checks, [a for a in every if not a.is_host], results, backends),
    }


def render(report: dict[str, Any], say: Callable[[str], None] = print) -> None:
    """The report as text."""
    say(f"amari_gpu {report['amari_gpu_version']} doctor on {report['platform']}")
    say("System:")
    for c in report["checks"]:
        mark = {True: "ok  ", False: "MISS", None: "note"}[c["ok"]]
        say(f"  {mark}  {c['name']}: {c['detail']}")
    say(f"Adapters and the host device ({report['adapters_found']} found, each opened alone):")
    for r in report["adapters"]:
        say(f"  {'ok  ' if r['ok'] else 'FAIL'}  {r['describe']}")
        if "simd" in r:
            say(f"        host device: SIMD {r['simd']}, {r['threads']} threads")
        if r["error"]:
            say(f"        {r['error']}")
        for k in r["kernels"]:
            mark = "ok  " if k["ok"] else "FAIL"
            say(f"        {mark} {k['detail']} ({k['s'] * 1e3:.0f} ms)")
    for missing in report["unavailable_backends"]:
        say(f"  none  backend {missing['backend']}: {missing['reason']}")
    used = [d for d in report["default_selection"] if d["used"]]
    say("Default selection (MultiGpuContext()):")
    for d in report["default_selection"]:
        say(f"  {'used' if d['used'] else 'left out':<8}  [{d['index']}] {d['reason']}")
    if not used:
        say("  nothing: name adapters with backends= or adapters=")
    tested = len(report["adapters"])
    if report["ok"]:
        say(f"Result: {report['usable']} of {tested} devices usable.")
    elif tested:
        say(f"Result: none of the {tested} devices is usable.")
    else:
        say("Result: no device to test on the backends named.")
    if report["fixes"]:
        say("To fix:" if not report["ok"] else "Optional fixes:")
        for line in report["fixes"]:
            say(f"  - {line}")
