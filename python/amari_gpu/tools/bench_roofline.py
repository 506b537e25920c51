"""The roofline: the rows of ``benches/roofline.py`` and of ``amari-gpu bench --roofline``.

For every device of a context (each run alone, in a context of its own adapter) and every
kernel, the achieved rates beside that device's measured limits (``_native.device_limits``:
a streaming copy for bandwidth, dependent-free FMA, add and max-plus loops for the issue
rates, each measured on the device: WGSL on wgpu devices, SIMD on the host, timed on the
clock that times the device's kernels, ``clock`` of the limits) and the fractions; the
bandwidth fraction is the compulsory bytes' (fractions above 1 are marked and footnoted).

A kernel's time is the engine's own: the sum of its ``kernel`` events in a profile of the
call (GPU timestamps where the adapter has them, else the host clock), the median over
rounds. Its operations are the kernel's cost model (``flops_per_item`` of the call records,
the engine's figure). Its bytes are the global-memory traffic of the WGSL kernel as written
(``global_bytes`` of each case: loads and stores of the shader, re-reads counted, see
docs/roofline.md), beside the least any kernel moves (the per-item inputs and outputs of the
call records). The list of cases covers every kernel entry point of the registry
(``_surface.NATIVE``, ``@kernel``) and ``map_rows``; ``tests/test_roofline.py`` checks it.
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _native
from .._adapters import AdapterInfo, adapters
from ..context import MultiGpuContext
from .bench_host import cpu_model
from .roofline_cases import CASES, Case, least_bytes

if TYPE_CHECKING:  # the stub's record types exist for type checkers only
    from .._native import DeviceLimitsDict
    from .roofline_cases import Calls

__all__ = ["CASES", "lines", "measure_case", "run"]


def _profiled(
    ctx: MultiGpuContext, call: Callable[[], Any], host: bool
) -> tuple[float, str, Calls]:
    """One profiled call: the engine's kernel seconds, the clock that timed them and its call
    records. Kernel seconds are the sum of its kernel events; a wgpu kernel the host clock
    timed (an adapter without GPU timestamps) is only its submission, so there the waits
    for it are counted too (clock "host+wait"). The clocks are named as the limits' are
    (``DeviceLimitsDict.clock``: "gpu", "host+wait", "host"), so that a device's header can
    say whether its kernels and its limits were timed on the same one."""
    with ctx.profile() as prof:
        call()
    kernels = [e for e in prof.events if e["kind"] == "kernel"]
    if kernels and all(e["clock"] == "gpu" for e in kernels):
        return sum(e["duration_s"] for e in kernels), "gpu", prof.kernel_calls
    if host:
        return sum(e["duration_s"] for e in kernels), "host", prof.kernel_calls
    timed = [e for e in prof.events if e["kind"] in ("kernel", "wait")]
    return sum(e["duration_s"] for e in timed), "host+wait", prof.kernel_calls


def _limits_row(limits: DeviceLimitsDict) -> dict[str, float]:
    return {
        "stream_gb_s": limits["stream_bytes_per_s"] / 1e9,
        "fma_gflop_s": limits["fma_flops_per_s"] / 1e9,
        "add_gop_s": limits["add_ops_per_s"] / 1e9,
        "max_gop_s": limits["max_ops_per_s"] / 1e9,
    }


def _op_limit(entry: str, limits: dict[str, float]) -> tuple[str, float]:
    """The issue limit a kernel's operations compare with: max-plus (tropical: an add and a
    max a step), add (life's integer adds), else multiply-add."""
    if entry in ("tropical_matmul", "tropical_matvec", "shortest_paths"):
        return "max", limits["max_gop_s"]
    if entry == "life":
        return "add", limits["add_gop_s"]
    return "fma", limits["fma_gflop_s"]


def measure_case(
    ctx: MultiGpuContext,
    case: Case,
    limits: dict[str, float],
    rounds: int,
    quick: bool,
) -> dict[str, Any]:
    """One kernel on one device: median kernel time over ``rounds`` profiled calls, its rates
    and fractions of the device's limits."""
    call = case.make(ctx, quick)
    call()  # first use: compiles, calibrates what the plan needs, not timed
    host = all(d.adapter.is_host for d in ctx.devices)
    runs = [_profiled(ctx, call, host) for _ in range(rounds)]
    seconds = statistics.median(r[0] for r in runs)
    calls = runs[-1][2]
    ops = float(sum(c["items"] * c["flops_per_item"] for c in calls))
    written = case.global_bytes(calls, quick) if case.global_bytes else least_bytes(calls)
    least = least_bytes(calls)
    gop_s = ops / seconds / 1e9 if seconds > 0 else 0.0
    gb_s = written / seconds / 1e9 if seconds > 0 else 0.0
    row = {
        "entry": case.entry,
        "case": case.name,
        "kernels": sorted({c["kernel"] for c in calls}),
        "items": sum(c["items"] for c in calls),
        "kernel_s": seconds,
        "clock": runs[-1][1],
        "ops": ops,
        "bytes_written": written,
        "bytes_least": least,
        "intensity_ops_per_byte": ops / written if written else 0.0,
        "gop_s": gop_s,
        "gb_s": gb_s,
        "least_gb_s": least / seconds / 1e9 if seconds > 0 else 0.0,
        "op_limit": _op_limit(case.entry, limits)[0],
    }
    _fractions(row, limits)
    return row


def _fractions(row: dict[str, Any], limits: dict[str, float]) -> None:
    """Sets the fractions of a measured row to those of ``limits``."""
    if "not_run" in row:
        return
    op_limit = _op_limit(row["entry"], limits)[1]
    stream = limits["stream_gb_s"]
    row["op_fraction"] = row["gop_s"] / op_limit if op_limit else 0.0
    # The bandwidth fraction is the compulsory traffic's (per-item inputs and outputs): the
    # bytes as written count re-reads of what a neighbour loaded, which on a CPU (the host,
    # lavapipe, llvmpipe) come from the caches, so only the compulsory bytes are held
    # against a stream figure measured past the caches. The as-written one is kept beside.
    row["bw_fraction"] = row["least_gb_s"] / stream if stream else 0.0
    row["written_fraction"] = row["gb_s"] / stream if stream else 0.0


def _device(info: AdapterInfo, limits: DeviceLimitsDict) -> dict[str, Any]:
    return {
        "name": info.name,
        "backend": info.backend,
        "driver": " ".join(s for s in (info.driver, info.driver_info) if s),
        "threads": info.limits.get("threads"),
        "simd": info.features[0] if info.is_host and info.features else None,
        "measured_with": limits["measured_with"],
        "limits_clock": limits["clock"],
        "limits": _limits_row(limits),
    }


_WGSL_ONLY = "a user's WGSL kernel: the host device runs no WGSL"


def run(
    rounds: int = 5,
    quick: bool = False,
    backends: list[str] | None = None,
    cases: tuple[Case, ...] = CASES,
) -> dict[str, Any]:
    """Every case on every device of a context of ``backends`` (one device per adapter;
    default: every backend with an adapter here, software adapters included, which the
    default selection leaves out beside the host device): each device measured alone, in a
    context of its own adapter."""
    if backends is None:
        backends = list(dict.fromkeys(a.backend for a in adapters()))
    with MultiGpuContext(backends=backends, devices_per_adapter=1) as whole:
        infos = [d.adapter for d in whole.devices]
    devices = []
    rows = []
    for info in infos:
        # GPU timestamps wherever the adapter has them: the kernel's own time on the device.
        options: dict[str, Any] = (
            {"backends": ["host"]}
            if info.is_host
            else {"adapters": [info.index], "gpu_timestamps": True}
        )
        with MultiGpuContext(**options) as ctx:
            (before,) = _native.device_limits(ctx._native)
            device = _device(info, before)
            devices.append(device)
            for case in cases:
                row: dict[str, Any]
                if case.wgsl_only and info.is_host:
                    row = {"entry": case.entry, "case": case.name, "not_run": _WGSL_ONLY}
                else:
                    row = measure_case(ctx, case, device["limits"], rounds, quick)
                row["device"] = len(devices) - 1
                rows.append(row)
            # A limit is what the device can do: the better of two measurements, before and
            # after the kernels, as a busy machine only slows one down. The fractions are
            # then taken of it.
            (after,) = _native.device_limits(ctx._native)
            best = _limits_row(after)
            for key, value in best.items():
                device["limits"][key] = max(device["limits"][key], value)
            for row in rows[len(rows) - len(cases) :]:
                _fractions(row, device["limits"])
    machine = {"cpu": cpu_model(), "python": platform.python_version()}
    return {**machine, "rounds": rounds, "quick": quick, "devices": devices, "rows": rows}


def _clocks(limits_clock: str, kernel_clocks: list[str]) -> str:
    """Which clocks timed a device's limits and its kernels, and whether they are one."""
    others = [c for c in kernel_clocks if c != limits_clock]
    if not others:
        return f"limits and kernels on the same clock ({limits_clock})"
    return (
        f"limits on the {limits_clock} clock, as {len(kernel_clocks) - len(others)} of "
        f"{len(kernel_clocks)} kernels; the others on {', '.join(sorted(set(others)))} (the "
        "engine does not timestamp them; a host+wait time includes the submission, so their "
        "fractions are if anything low)"
    )


def _mark(fraction: float, marker: str) -> str:
    """``marker`` after a fraction above 1 (a footnote says why), else a space."""
    return marker if fraction > 1.0 else " "


def lines(result: dict[str, Any]) -> list[str]:
    """The report: per device its description, the clocks that timed its limits and its
    kernels, its limits, then one line per kernel; footnotes for the fractions above 1."""
    out = [
        f"CPU: {result['cpu']}; python {result['python']}; the median of {result['rounds']} "
        "profiled calls per kernel (the engine's kernel time: GPU timestamps where the adapter "
        "has them, else the host clock, with the waits for a wgpu kernel); each limit the "
        "fastest of its runs on the same clock; one run on a shared machine: compare within "
        "a device.",
    ]
    marked: set[str] = set()
    for i, d in enumerate(result["devices"]):
        lim = d["limits"]
        extra = f"; SIMD {d['simd']}, {d['threads']} threads" if d["simd"] else ""
        rows = [r for r in result["rows"] if r["device"] == i]
        clocks = _clocks(d["limits_clock"], [r["clock"] for r in rows if "not_run" not in r])
        out += [
            "",
            f"device {i}: {d['name']} ({d['backend']}, driver {d['driver'] or '?'}){extra}",
            f"  timing: {clocks}",
            f"  limits (best of before and after the kernels; {d['measured_with']}): "
            f"stream {lim['stream_gb_s']:.2f} GB/s, "
            f"FMA {lim['fma_gflop_s']:.2f} GFLOP/s, add {lim['add_gop_s']:.2f} Gop/s, "
            f"max-plus {lim['max_gop_s']:.2f} Gop/s",
            f"  {'kernel':44} {'ms':>9} {'op/B':>7} {'Gop/s':>8} {'of':>4} {'frac':>7} "
            f"{'min GB/s':>8} {'frac':>7} {'GB/s':>8} {'frac':>7}  engine kernels",
        ]
        for r in rows:
            if "not_run" in r:
                out.append(f"  {r['case']:44} not run: {r['not_run']}")
                continue
            marks = (
                _mark(r["op_fraction"], "!"),
                _mark(r["bw_fraction"], "!"),
                _mark(r["written_fraction"], "*"),
            )
            marked.update(m for m in marks if m != " ")
            out.append(
                f"  {r['case']:44} {r['kernel_s'] * 1e3:9.3f} "
                f"{r['intensity_ops_per_byte']:7.2f} {r['gop_s']:8.2f} {r['op_limit']:>4} "
                f"{r['op_fraction']:6.1%}{marks[0]} {r['least_gb_s']:8.2f} "
                f"{r['bw_fraction']:6.1%}{marks[1]} {r['gb_s']:8.2f} "
                f"{r['written_fraction']:6.1%}{marks[2]}  {', '.join(r['kernels'])} ({r['clock']})"
            )
    out.append(
        "(op/B: operations per byte of global memory as written; frac: of the device's limit "
        "named in 'of', of its stream bandwidth for the compulsory bytes (min GB/s: per-item "
        "inputs and outputs only, the primary bandwidth figure) and for the bytes as written "
        "(GB/s))"
    )
    if "*" in marked:
        out.append(
            "* bytes as written above the stream figure: the kernel re-reads what a neighbour "
            "loaded, and on a CPU (the host, lavapipe, llvmpipe) those re-reads are cache "
            "hits, not the RAM traffic the stream kernel measures (its arrays are sized past "
            "the caches); the compulsory bytes' fraction (min GB/s) is the one to read."
        )
    if "!" in marked:
        out.append(
            "! above the measured limit: the limit was measured low (a busy machine during "
            "every run of it) or, for bandwidth, the kernel's compulsory data fit a cache the "
            "stream kernel's arrays do not (on a CPU: a small problem re-run from L2/L3)."
        )
    return out
