"""The roofline: the rows of ``benches/roofline.py`` and of ``amari-gpu bench --roofline``.

For every device of a context (each run alone, in a context of its own adapter) and every
kernel, the achieved rates beside that device's measured limits (``_native.device_limits``:
a streaming copy for bandwidth, dependent-free FMA, add and max-plus loops for the issue
rates, each measured on the device: WGSL on wgpu devices, SIMD on the host) and the fraction.

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

import math
import platform
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _native
from .._adapters import AdapterInfo
from ..algebra import Algebra
from ..context import MultiGpuContext
from .bench_host import cpu_model

if TYPE_CHECKING:  # the stub's record types exist for type checkers only
    from .._native import CallDict, DeviceLimitsDict

    Calls = list[CallDict]


@dataclass(frozen=True)
class Case:
    """One kernel run: the registry entry point it goes through, a name, what it runs (built
    once per device: returns the call to time) and the bytes the WGSL kernel moves in global
    memory as written, from the profiled calls and the problem (``None``: the calls'
    per-item inputs and outputs, what a map kernel reads and writes). ``wgsl_only``: a
    user's WGSL kernel, which the host device does not run (its row says so)."""

    entry: str
    name: str
    make: Callable[[MultiGpuContext, bool], Callable[[], Any]]
    global_bytes: Callable[[Calls, bool], float] | None = None
    wgsl_only: bool = False


def _least_bytes(calls: Calls) -> float:
    return float(sum(c["items"] * c["bytes_per_item"] for c in calls))


def _rng() -> np.random.Generator:
    return np.random.default_rng(27)


def _rows(quick: bool, full: int, small: int) -> int:
    return small if quick else full


def _ga(op: str, algebra: Algebra | None, broadcast: bool = False) -> Case:
    """A GA binary product over rows; ``broadcast``: one (2ⁿ,) left operand for every row,
    bound whole and read by every item (2ⁿ words more per item as written)."""
    blades = 8 if algebra is None else algebra.n_blades

    def make(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
        n = _rows(quick, 1 << 18, 1 << 10)
        rng = _rng()
        a = rng.standard_normal((blades,) if broadcast else (n, blades), dtype=np.float32)
        b = rng.standard_normal((n, blades), dtype=np.float32)
        out = np.empty((n, blades), dtype=np.float32)
        method = getattr(ctx, op)
        return lambda: method(a, b, algebra, out=out)

    def global_bytes(calls: Calls, quick: bool) -> float:
        extra = 4 * blades if broadcast else 0
        return float(sum(c["items"] * (c["bytes_per_item"] + extra) for c in calls))

    name = f"{op} {algebra or 'Cl(3,0,0)'}{' one rotor' if broadcast else ''}"
    return Case("ga_apply", name, make, global_bytes)


def _normalize(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 18, 1 << 10)
    x = _rng().standard_normal((n, 8), dtype=np.float32)
    out = np.empty_like(x)
    return lambda: ctx.normalize(x, out=out)


def _matmul_shape(quick: bool) -> tuple[int, int, int]:
    return (64, 48, 64) if quick else (512, 512, 512)


def _matmul(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    m, k, n = _matmul_shape(quick)
    rng = _rng()
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), dtype=np.float32)
    return lambda: ctx.tropical_matmul(a, b, out=out)


def _tiled_bytes(calls: Calls, quick: bool) -> float:
    """matmul_tiled: each 64 x 64 output tile stages its 64 rows of A and 64 columns of B
    over all of K (64 K words each) and stores its tile; per item (64 rows) that is
    ceil(n / 64) tiles."""
    _, k, n = _matmul_shape(quick)
    tiles = math.ceil(n / 64)
    items = sum(c["items"] for c in calls)
    return 4.0 * items * (tiles * 2 * 64 * k + 64 * n + 1)


def _matmul_rows(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    m, k, n = _matmul_shape(quick)
    rng = _rng()
    a = ctx.asarray(rng.standard_normal((m, k), dtype=np.float32))
    b = rng.standard_normal((k, n), dtype=np.float32)
    return lambda: ctx.tropical_matmul(a, b)


def _rows_bytes(calls: Calls, quick: bool) -> float:
    """matmul_rows: the tiled kernel's tiles over rows of any batch (a resident `a`): the
    same traffic per 64 rows as matmul_tiled, per row here."""
    _, k, n = _matmul_shape(quick)
    tiles = math.ceil(n / 64)
    rows = sum(c["items"] for c in calls)
    return 4.0 * rows * (tiles * 2 * k + n + 1)


def _matvec_shape(quick: bool) -> tuple[int, int]:
    return (256, 256) if quick else (4096, 4096)


def _matvec(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    m, k = _matvec_shape(quick)
    rng = _rng()
    a = rng.standard_normal((m, k), dtype=np.float32)
    x = rng.standard_normal(k, dtype=np.float32)
    out = np.empty(m, dtype=np.float32)
    return lambda: ctx.tropical_matvec(a, x, out=out)


def _matvec_bytes(calls: Calls, quick: bool) -> float:
    """matvec: one workgroup per row reads the row and the whole vector (k words each)."""
    _, k = _matvec_shape(quick)
    rows = sum(c["items"] for c in calls)
    return 4.0 * rows * (2 * k + 2)


def _paths_n(quick: bool) -> int:
    return 96 if quick else 512


def _paths(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _paths_n(quick)
    w = _rng().uniform(1.0, 10.0, (n, n)).astype(np.float32)
    np.fill_diagonal(w, 0.0)
    return lambda: ctx.shortest_paths(w)


def _fisher_shape(quick: bool) -> tuple[int, int]:
    return (2048, 96) if quick else (65536, 256)


def _fisher(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    g = _rng().standard_normal(_fisher_shape(quick), dtype=np.float32)
    return lambda: ctx.fisher_information(g)


def _fisher_narrow(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = 2048 if quick else 65536
    g = _rng().standard_normal((n, 48), dtype=np.float32)
    return lambda: ctx.fisher_information(g)


def _syrk_bytes(p: int, calls: Calls) -> float:
    """fisher_tiled (P > 64): each tile pair ti <= tj reads its two 64-column strips of
    every row and the row's weight; fisher_rows (P <= 64): each 8 x 8 block pair its two
    8-column strips and the weight. Partials (one tile set per chunk) are left out."""
    width = 4 * math.ceil(p / 4)
    tile = 64 if p > 64 else 8
    blocks = math.ceil(width / tile)
    pairs = blocks * (blocks + 1) // 2
    rows = sum(c["items"] for c in calls if c["kernel"].startswith("information_geometry/"))
    return 4.0 * rows * pairs * (2 * tile + 1)


def _categorical(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 15, 1 << 9)
    p = _rng().dirichlet(np.ones(16), size=n).astype(np.float32)
    return lambda: ctx.fisher_categorical(p)


def _gaussian(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 15, 1 << 9)
    rng = _rng()
    mean = rng.standard_normal((n, 8), dtype=np.float32)
    var = rng.uniform(0.5, 2.0, (n, 8)).astype(np.float32)
    return lambda: ctx.fisher_gaussian(mean, var)


def _grid_side(quick: bool) -> int:
    return 128 if quick else 1024


def _heat(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    side = _grid_side(quick)
    grid = _rng().random((side, side), dtype=np.float32)
    return lambda: ctx.stencil(grid, 4 if quick else 16, rebalance=False)


def _heat_bytes(calls: Calls, quick: bool) -> float:
    """heat.wgsl: per 4 cells, the vec4 above, below and at the cells, the two scalar
    neighbours at the ends, and the vec4 stored: 18 bytes a cell."""
    return 18.0 * sum(c["items"] for c in calls)


def _life(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    side = _grid_side(quick)
    grid = (_rng().random((side, side)) < 0.3).astype(np.uint8)
    return lambda: ctx.life(grid, 4 if quick else 16, rebalance=False)


def _life_bytes(calls: Calls, quick: bool) -> float:
    """life.wgsl: per word of 4 cells, the words above, at and below, six edge neighbours
    (one word load each) and the word stored: 10 words per 4 cells, 10 bytes a cell."""
    return 10.0 * sum(c["items"] for c in calls)


_COPY = "fn row(x: array<f32, 8>) -> array<f32, 8> {\n    return x;\n}\n"


def _map_rows(ctx: MultiGpuContext, quick: bool) -> Callable[[], Any]:
    n = _rows(quick, 1 << 18, 1 << 10)
    x = _rng().standard_normal((n, 8), dtype=np.float32)
    out = np.empty_like(x)
    return lambda: ctx.map_rows(_COPY, x, out_cols=8, out=out)


CASES: tuple[Case, ...] = (
    _ga("geometric_product", None),
    _ga("geometric_product", Algebra(4, 1)),
    _ga("sandwich", None, broadcast=True),
    _ga("sandwich", Algebra(3, 0, 1), broadcast=True),
    Case("ga_apply", "normalize Cl(3,0,0)", _normalize),
    Case("tropical_matmul", "tropical_matmul max-plus (tiled)", _matmul, _tiled_bytes),
    Case("tropical_matmul", "tropical_matmul resident a (rows)", _matmul_rows, _rows_bytes),
    Case("tropical_matvec", "tropical_matvec max-plus", _matvec, _matvec_bytes),
    Case("shortest_paths", "shortest_paths (blocked, tiled and naive)", _paths),
    Case(
        "fisher_information",
        "fisher_information P > 64 (fisher_tiled)",
        _fisher,
        lambda calls, quick: _syrk_bytes(_fisher_shape(quick)[1], calls),
    ),
    Case(
        "fisher_information",
        "fisher_information P = 48 (fisher_rows)",
        _fisher_narrow,
        lambda calls, quick: _syrk_bytes(48, calls),
    ),
    Case("fisher_categorical", "fisher_categorical K = 16", _categorical),
    Case("fisher_gaussian", "fisher_gaussian D = 8", _gaussian),
    Case("stencil", "heat stencil", _heat, _heat_bytes),
    Case("life", "life", _life, _life_bytes),
    Case("map_rows", "map_rows copy (8 words)", _map_rows, wgsl_only=True),
)


def _profiled(
    ctx: MultiGpuContext, call: Callable[[], Any], host: bool
) -> tuple[float, str, Calls]:
    """One profiled call: the engine's kernel seconds, the clock that timed them and its call
    records. Kernel seconds are the sum of its kernel events; a wgpu kernel the host clock
    timed (an adapter without GPU timestamps) is only its submission, so there the waits
    for it are counted too (clock "host+wait")."""
    with ctx.profile() as prof:
        call()
    kinds = ("kernel",) if host else ("kernel", "wait")
    kernels = [e for e in prof.events if e["kind"] == "kernel"]
    if kernels and all(e["clock"] == "gpu" for e in kernels):
        return sum(e["duration_s"] for e in kernels), "gpu", prof.calls
    timed = [e for e in prof.events if e["kind"] in kinds]
    return sum(e["duration_s"] for e in timed), "+".join(kinds), prof.calls


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
    written = case.global_bytes(calls, quick) if case.global_bytes else _least_bytes(calls)
    least = _least_bytes(calls)
    kind, op_limit = _op_limit(case.entry, limits)
    gop_s = ops / seconds / 1e9 if seconds > 0 else 0.0
    gb_s = written / seconds / 1e9 if seconds > 0 else 0.0
    return {
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
        "op_limit": kind,
        "op_fraction": gop_s / op_limit if op_limit else 0.0,
        "bw_fraction": gb_s / limits["stream_gb_s"] if limits["stream_gb_s"] else 0.0,
    }


def _device(info: AdapterInfo, limits: DeviceLimitsDict) -> dict[str, Any]:
    return {
        "name": info.name,
        "backend": info.backend,
        "driver": " ".join(s for s in (info.driver, info.driver_info) if s),
        "threads": info.limits.get("threads"),
        "simd": info.features[0] if info.is_host and info.features else None,
        "measured_with": limits["measured_with"],
        "limits": _limits_row(limits),
    }


_WGSL_ONLY = "a user's WGSL kernel: the host device runs no WGSL"


def run(
    rounds: int = 5,
    quick: bool = False,
    backends: list[str] | None = None,
    cases: tuple[Case, ...] = CASES,
) -> dict[str, Any]:
    """Every case on every device of a context of ``backends`` (one device per adapter):
    each device measured alone, in a context of its own adapter."""
    with MultiGpuContext(backends=backends, devices_per_adapter=1) as whole:
        adapters = [d.adapter for d in whole.devices]
    devices = []
    rows = []
    for info in adapters:
        # GPU timestamps wherever the adapter has them: the kernel's own time on the device.
        options: dict[str, Any] = (
            {"backends": ["host"]}
            if info.is_host
            else {"adapters": [info.index], "gpu_timestamps": True}
        )
        with MultiGpuContext(**options) as ctx:
            (limits,) = _native.device_limits(ctx._native)
            device = _device(info, limits)
            devices.append(device)
            for case in cases:
                if case.wgsl_only and info.is_host:
                    row = {"entry": case.entry, "case": case.name, "not_run": _WGSL_ONLY}
                else:
                    row = measure_case(ctx, case, device["limits"], rounds, quick)
                row["device"] = len(devices) - 1
                rows.append(row)
    return {
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "rounds": rounds,
        "quick": quick,
        "devices": devices,
        "rows": rows,
    }


def lines(result: dict[str, Any]) -> list[str]:
    """The report: per device its description and limits, then one line per kernel."""
    out = [
        f"CPU: {result['cpu']}; python {result['python']}; median of {result['rounds']} "
        "profiled calls per kernel (the engine's kernel time: GPU timestamps where the adapter "
        "has them, else the host clock, with the waits for a wgpu kernel); one run on a "
        "shared machine: compare within a device.",
    ]
    for i, d in enumerate(result["devices"]):
        lim = d["limits"]
        extra = f"; SIMD {d['simd']}, {d['threads']} threads" if d["simd"] else ""
        out += [
            "",
            f"device {i}: {d['name']} ({d['backend']}, driver {d['driver'] or '?'}){extra}",
            f"  limits ({d['measured_with']}): stream {lim['stream_gb_s']:.2f} GB/s, "
            f"FMA {lim['fma_gflop_s']:.2f} GFLOP/s, add {lim['add_gop_s']:.2f} Gop/s, "
            f"max-plus {lim['max_gop_s']:.2f} Gop/s",
            f"  {'kernel':44} {'ms':>9} {'op/B':>7} {'Gop/s':>8} {'of':>4} {'frac':>6} "
            f"{'GB/s':>8} {'frac':>6} {'min GB/s':>8}  engine kernels",
        ]
        for r in (r for r in result["rows"] if r["device"] == i):
            if "not_run" in r:
                out.append(f"  {r['case']:44} not run: {r['not_run']}")
                continue
            out.append(
                f"  {r['case']:44} {r['kernel_s'] * 1e3:9.3f} "
                f"{r['intensity_ops_per_byte']:7.2f} {r['gop_s']:8.2f} {r['op_limit']:>4} "
                f"{r['op_fraction']:6.1%} {r['gb_s']:8.2f} {r['bw_fraction']:6.1%} "
                f"{r['least_gb_s']:8.2f}  {', '.join(r['kernels'])} ({r['clock']})"
            )
    out.append(
        "(op/B: operations per byte of global memory as written; frac: of the device's limit "
        "named in 'of' and of its stream bandwidth; min GB/s: per-item inputs and outputs only)"
    )
    return out
