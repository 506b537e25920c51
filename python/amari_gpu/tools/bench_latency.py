"""Small-call latency: the rows of ``benches/latency.py`` and of ``amari-gpu bench --family
latency``.

Per kernel family and per device kind (the host device, each wgpu adapter present), the
median time of a tiny call from Python, beside its peer on the same inputs in the same run
(kingdon for the Cl(3,0) product, numpy for Fisher and max-plus), interleaved call by call
so that drift on a busy machine hits both alike. The breakdown comes from the engine's own
records: the native call timed alone (the rest of the median is the Python method's checks
and conversion), and a profiled run of the same calls (``ctx.profile()``), whose steps
(plan, upload, kernel, wait, readback) are summed per call and their medians reported.
Whether each call took the fast path is read from its plan (``last_plan.fast_path``).
Where the rest of a call's wall time goes (``thread``): a loop of the same calls on the
calling thread alone, its CPU time per call and its context switches per call, voluntary
(blocked: waiting for the driver's threads) and involuntary (preempted: a thread it woke,
a wgpu driver's queue thread say, ran in its place on the same core).
For wgpu devices, the same call again with every thread of the process pinned to one core
(``one_core_us``: the driver's hand-offs kept on it). What a thread hand-off costs on the
machine alone (``handoffs``): a byte between two threads
pinned to one core and to two cores, the price of each of the hand-offs a tiny wgpu call
crosses. Last, the planner alone (``planning``): the median time of the core's partitioner on 8 and
16 made-up devices, no context or device involved.
"""

from __future__ import annotations

import functools
import importlib
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _native
from .._adapters import AdapterInfo, adapters
from ..context import MultiGpuContext
from ..planning import Workload
from .bench_host import cpu_model

if TYPE_CHECKING:
    from .._native import DeviceModelDict

STEPS = ("plan", "upload", "kernel", "wait", "readback")


@dataclass
class Call:
    """One tiny call: the method, the native entry alone, and the peer on the same inputs."""

    work: str
    method: Callable[[MultiGpuContext], Any]
    native: Callable[[MultiGpuContext], Any]
    peer_name: str
    peer: Callable[[], Any] | None


def _kingdon(
    a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], arrays: bool = True
) -> Callable[[], Any] | None:
    """kingdon's Cl(3,0) product as its users write it for speed: multivectors made once
    (coefficient arrays, (8, N) in kingdon's blade order, when ``arrays``; else the plain
    coefficients of one multivector), then ``x * y`` (kingdon's generated, cached product)."""
    try:
        kingdon = importlib.import_module("kingdon")
    except ImportError:
        return None
    alg = kingdon.Algebra(3, 0, 0)
    keys = list(alg.multivector(np.zeros((8, 1), dtype=np.float32)).keys())
    if not arrays:
        x = alg.multivector(a[0][keys].tolist())
        y = alg.multivector(b[0][keys].tolist())
    else:
        x = alg.multivector(np.ascontiguousarray(a.T[keys]))
        y = alg.multivector(np.ascontiguousarray(b.T[keys]))
    return lambda: x * y


def calls() -> list[Call]:
    """The tiny call of every family, with its peer."""
    rng = np.random.default_rng(25)
    a1, b1 = (rng.standard_normal((1, 8), dtype=np.float32) for _ in range(2))
    a64, b64 = (rng.standard_normal((64, 8), dtype=np.float32) for _ in range(2))
    g = rng.standard_normal((10, 4), dtype=np.float32)
    m = rng.standard_normal((4, 4), dtype=np.float32)
    p = rng.dirichlet(np.ones(4), size=8).astype(np.float32)
    n = len(g)

    def ga(a: Any, b: Any) -> Callable[[MultiGpuContext], Any]:
        return lambda ctx: _native.ga_apply(
            ctx._native, "geometric_product", (3, 0, 0), [a, b], 0, None, None
        )

    return [
        Call(
            "Cl(3,0) product, 1 row",
            lambda ctx: ctx.geometric_product(a1, b1),
            ga(a1, b1),
            "kingdon x*y, one multivector",
            _kingdon(a1, b1, arrays=False),
        ),
        Call(
            "Cl(3,0) product, 1 row",
            lambda ctx: ctx.geometric_product(a1, b1),
            ga(a1, b1),
            "kingdon x*y, (8, 1) arrays",
            _kingdon(a1, b1),
        ),
        Call(
            "Cl(3,0) product, 64 rows",
            lambda ctx: ctx.geometric_product(a64, b64),
            ga(a64, b64),
            "kingdon x*y, (8, 64) arrays",
            _kingdon(a64, b64),
        ),
        Call(
            "fisher_information 10 x 4",
            lambda ctx: ctx.fisher_information(g),
            lambda ctx: _native.fisher_information(ctx._native, g, None, None, None),
            "numpy g.T @ g / n",
            lambda: g.T @ g / n,
        ),
        Call(
            "fisher_categorical 8 x 4",
            lambda ctx: ctx.fisher_categorical(p),
            lambda ctx: _native.fisher_categorical(ctx._native, p, False, None, None),
            "numpy diag(p) - p p^T",
            lambda: (p[:, :, None] * np.eye(4, dtype=np.float32)) - p[:, :, None] * p[:, None, :],
        ),
        Call(
            "tropical_matmul max-plus 4 x 4",
            lambda ctx: ctx.tropical_matmul(m, m),
            lambda ctx: _native.tropical_matmul(ctx._native, m, m, "max_plus", None, None, None),
            "numpy broadcast max-plus",
            lambda: (m[:, :, None] + m[None, :, :]).max(axis=1),
        ),
    ]


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _interleaved(fs: list[Callable[[], Any]], repeats: int) -> list[list[float]]:
    """Times each of ``fs`` ``repeats`` times, one of each per round."""
    for f in fs:
        for _ in range(max(repeats // 10, 5)):
            f()
    times: list[list[float]] = [[] for _ in fs]
    clock = time.perf_counter
    for _ in range(repeats):
        for f, t in zip(fs, times, strict=True):
            start = clock()
            f()
            t.append(clock() - start)
    return times


def _steps(ctx: MultiGpuContext, call: Call, repeats: int) -> dict[str, float]:
    """Median per call of the engine's recorded time in each step (µs), from a profile."""
    with ctx.profile() as prof:
        for _ in range(repeats):
            call.method(ctx)
    per_call: dict[int, dict[str, float]] = {}
    for e in prof.events:
        kinds = per_call.setdefault(e["call"], dict.fromkeys(STEPS, 0.0))
        if e["kind"] in kinds:
            kinds[e["kind"]] += e["duration_s"]
    return {
        kind: statistics.median(c[kind] for c in per_call.values()) * 1e6 if per_call else 0.0
        for kind in STEPS
    }


def _thread_cost(f: Callable[[], Any], repeats: int) -> dict[str, float | None]:
    """Means per call over ``repeats`` calls of ``f`` on this thread: wall and CPU time (µs;
    the difference is time off the CPU) and context switches, voluntary (the thread blocked)
    and involuntary (it was preempted), ``None`` where the platform does not count them per
    thread. Read once around the whole loop, so that no call pays for the reading."""
    usage = _thread_usage()
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(repeats):
        f()
    # CPU time read first: a call's CPU time never exceeds its wall time.
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    after = _thread_usage()
    n = max(repeats, 1)
    return {
        "wall_us": wall / n * 1e6,
        "cpu_us": cpu / n * 1e6,
        "voluntary": (after[0] - usage[0]) / n if usage and after else None,
        "involuntary": (after[1] - usage[1]) / n if usage and after else None,
    }


def _thread_usage() -> tuple[int, int] | None:
    """This thread's voluntary and involuntary context switches so far (Linux), else None."""
    if sys.platform != "linux":
        return None
    import resource

    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_nvcsw, usage.ru_nivcsw


def one_core(f: Callable[[], Any], repeats: int) -> float | None:
    """The median time (µs) of ``f`` with every thread of this process (a driver's queue and
    shader threads too) pinned to one core, so that each hand-off of a call stays on that
    core; every thread's own affinity is given back after. ``None`` where threads cannot be
    pinned (not Linux) or there is one core. A measurement only: the package never pins."""
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        return None
    core = min(os.sched_getaffinity(0))
    saved: dict[int, set[int]] = {}
    try:
        for tid in (int(t) for t in os.listdir("/proc/self/task")):
            try:
                saved[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, {core})
            except OSError:
                continue  # a thread that ended meanwhile, or one that may not move
        (times,) = _interleaved([f], repeats)
    finally:
        for tid, mask in saved.items():
            try:
                os.sched_setaffinity(tid, mask)
            except OSError:
                continue  # ended meanwhile
    return _median_us(times)


def handoffs(repeats: int) -> dict[str, float] | None:
    """What one thread waking another costs on this machine, without any driver: the median
    of half a round trip (µs) of a byte between two threads over pipes, both pinned to one
    core, and pinned to two cores. A tiny call on a wgpu adapter crosses such hand-offs (the
    calling thread, a driver's queue thread and its shader threads, and back); when the
    other core is idle, the second figure includes waking it (on a virtual machine, a halted
    vCPU). ``None`` where threads cannot be pinned (not Linux) or there is one core."""
    if sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2:
        return None
    first, second = sorted(os.sched_getaffinity(0))[:2]
    return {
        "same_core_us": _pingpong(first, first, repeats),
        "other_core_us": _pingpong(first, second, repeats),
    }


def _pingpong(ours: int, theirs: int, repeats: int) -> float:
    """Median half round trip (µs) of a byte from a thread on core ``ours`` to one on core
    ``theirs`` and back, over two pipes, each hop a blocking read (GIL released) woken by a
    write; the caller's own affinity is restored after."""
    there, back = os.pipe(), os.pipe()
    mine = os.sched_getaffinity(0)

    def echo() -> None:
        os.sched_setaffinity(0, {theirs})
        while os.read(there[0], 1) == b"x":
            os.write(back[1], b"x")

    partner = threading.Thread(target=echo, name="amari-gpu bench echo", daemon=True)
    partner.start()
    times = []
    try:
        os.sched_setaffinity(0, {ours})
        for i in range(repeats + 20):
            start = time.perf_counter()
            os.write(there[1], b"x")
            os.read(back[0], 1)
            if i >= 20:
                times.append((time.perf_counter() - start) / 2)
            # Leave the partner's core idle for a while, as between two tiny calls.
            time.sleep(0.0002)
    finally:
        os.write(there[1], b"q")
        partner.join()
        os.sched_setaffinity(0, mine)
        for fd in (*there, *back):
            os.close(fd)
    return _median_us(times)


def _device_kinds() -> list[tuple[str, dict[str, Any], AdapterInfo]]:
    """(label, context options, adapter) for the host device and each wgpu adapter."""
    kinds: list[tuple[str, dict[str, Any], AdapterInfo]] = []
    for info in adapters():
        if info.is_host:
            kinds.append(("host", {"backends": ["host"]}, info))
        else:
            kinds.append((f"{info.backend} {info.index}", {"adapters": [info.index]}, info))
    return kinds


def _blas() -> str:
    """Which BLAS kernel numpy runs (threadpoolctl, which ``numpy.show_runtime`` also reads),
    in one line."""
    try:
        threadpoolctl = importlib.import_module("threadpoolctl")
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    pools = [
        f"{p.get('internal_api')} {p.get('version')} kernel {p.get('architecture')}, "
        f"{p.get('num_threads')} threads"
        for p in threadpoolctl.threadpool_info()
        if p.get("user_api") == "blas"
    ]
    return "; ".join(pools) or "none loaded"


def _made_up_models(n: int, shared: bool) -> list[DeviceModelDict]:
    """``n`` made-up device models, each with its own rate, bus and launch cost (no two
    alike), on ``n`` adapters or all on one (``shared``: logical devices of one adapter,
    which share its hardware)."""
    return [
        {
            "device": i,
            "group": 0 if shared else i,
            "launch_latency_s": 1e-5 * 100 ** ((i * 7 % n) / n),
            "h2d_bytes_per_s": 1e8 * 500 ** (i / (n - 1)),
            "d2h_bytes_per_s": 2e8 * 250 ** (i / (n - 1)),
            "flops_per_s": 1e10 * 100 ** (1 - i / (n - 1)),
            "correction": 1.0,
            "uncertainty": 0.05,
            "memory_budget_bytes": None,
            "max_binding_bytes": 128 << 20,
            "group_speedup": 1.5 if shared else 1.0,
            "group_members": n if shared else 1,
        }
        for i in range(n)
    ]


def planning(repeats: int) -> list[dict[str, Any]]:
    """The planner's cost alone: the median time of ``plan_models`` (the core's partitioner,
    no context, no device involved) for a 10^7-item Cl(3,0) workload on 8 and 16 made-up
    devices, all different, on their own adapters or sharing one, per strategy."""
    work = Workload("geometric_product", 10_000_000, 64.0, 32.0, 256.0)
    rows = []
    for n in (8, 16):
        for shared in (False, True):
            models = _made_up_models(n, shared)
            for strategy in ("latency", "auto"):
                plan = _native.plan_models(work, 16_384, models, strategy)
                (times,) = _interleaved(
                    [functools.partial(_native.plan_models, work, 16_384, models, strategy)],
                    repeats,
                )
                rows.append(
                    {
                        "devices": n,
                        "adapters": 1 if shared else n,
                        "strategy": strategy,
                        "median_us": _median_us(times),
                        "busy": len(plan.assignments),
                    }
                )
    return rows


def run(repeats: int = 300, only: list[str] | None = None) -> dict[str, Any]:
    """Measures every tiny call on every device kind (``only``: labels to keep)."""
    rows = []
    devices = []
    for label, options, info in _device_kinds():
        if only and label.split()[0] not in only:
            continue
        devices.append(
            {"label": label, "name": info.name, "backend": info.backend, "driver": info.driver}
        )
        with MultiGpuContext(**options) as ctx:
            # Measured figures, so that every device kind's fast-path decision has its
            # launch latency to weigh (a lone host device times its pool hand-off itself).
            ctx.calibrate()
            for call in calls():
                call.method(ctx)  # calibration and first-use costs, not timed
                fs: list[Callable[[], Any]] = [
                    functools.partial(call.method, ctx),
                    functools.partial(call.native, ctx),
                ]
                if call.peer is not None:
                    fs.append(call.peer)
                times = _interleaved(fs, repeats)
                call.method(ctx)
                plan = ctx.last_plan
                ours, native = _median_us(times[0]), _median_us(times[1])
                peer = _median_us(times[2]) if call.peer is not None else None
                rows.append(
                    {
                        "device": label,
                        "work": call.work,
                        "median_us": ours,
                        "native_us": native,
                        "python_us": ours - native,
                        "steps_us": _steps(ctx, call, max(repeats // 3, 20)),
                        "thread": _thread_cost(functools.partial(call.method, ctx), repeats),
                        "one_core_us": None
                        if info.is_host
                        else one_core(functools.partial(call.method, ctx), repeats),
                        "fast_path": bool(plan is not None and plan.fast_path),
                        "peer": call.peer_name if call.peer is not None else "not installed",
                        "peer_us": peer,
                        "ratio": ours / peer if peer else None,
                    }
                )
    return {
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": _blas(),
        "repeats": repeats,
        "devices": devices,
        "rows": rows,
        "planning": planning(max(repeats // 3, 20)),
        "handoffs": handoffs(repeats),
    }


def _us(value: float | None) -> str:
    """A time in µs for a column, or ``-`` when not measured."""
    return "-" if value is None else f"{value:.1f}"


def lines(result: dict[str, Any]) -> list[str]:
    """The report: machine, devices, one line per call and device."""
    out = [
        f"CPU: {result['cpu']}; python {result['python']}, numpy {result['numpy']}; "
        f"BLAS: {result['blas']}",
    ]
    out += [
        f"device {d['label']}: {d['name']} ({d['backend']}, driver {d['driver'] or '?'})"
        for d in result["devices"]
    ]
    out += [
        f"Median of {result['repeats']} calls from Python, interleaved with the peer's, one "
        "run; native = the binding's entry alone (python = the rest); engine steps: medians "
        "per call from a profiled run of the same calls (profiling adds its own cost); cpu = "
        "the calling thread's CPU time per call and vol/inv its context switches per call "
        "(blocked / preempted), means over a loop of the same calls; 1 core = the median with "
        "every thread of the process (the driver's too) pinned to one core, a wgpu device's "
        "hand-offs kept on it.",
        "",
        f"{'device':10} {'work':32} {'ours':>8} {'python':>7} {'native':>7} "
        + " ".join(f"{s:>8}" for s in STEPS)
        + f" {'cpu':>7} {'vol/inv':>9} {'1 core':>7} {'fast':>5} {'peer':>8} {'ratio':>6}  peer",
    ]
    for r in result["rows"]:
        peer = f"{r['peer_us']:8.1f}" if r["peer_us"] is not None else f"{'-':>8}"
        ratio = f"{r['ratio']:6.2f}" if r["ratio"] is not None else f"{'-':>6}"
        steps = " ".join(f"{r['steps_us'][s]:8.1f}" for s in STEPS)
        thread = r["thread"]
        switches = (
            f"{thread['voluntary']:.1f}/{thread['involuntary']:.1f}"
            if thread["voluntary"] is not None and thread["involuntary"] is not None
            else "-"
        )
        out.append(
            f"{r['device']:10} {r['work']:32} {r['median_us']:8.1f} {r['python_us']:7.1f} "
            f"{r['native_us']:7.1f} {steps} {thread['cpu_us']:7.1f} {switches:>9} "
            f"{_us(r.get('one_core_us')):>7} "
            f"{'yes' if r['fast_path'] else 'no':>5} "
            f"{peer} {ratio}  {r['peer']}"
        )
    out.append("(times in µs)")
    hand = result.get("handoffs")
    if hand is not None:
        out.append(
            "one thread waking another (pipes, no driver), median of half a round trip: "
            f"on one core {hand['same_core_us']:.1f} µs, to another core "
            f"{hand['other_core_us']:.1f} µs"
        )
    out += ["", "planning (plan_models alone, made-up devices all different, 10^7 items):"]
    out += [
        f"  {p['devices']:2} devices on {p['adapters']:2} adapter(s), {p['strategy']:8} "
        f"{p['median_us']:9.1f} µs  ({p['busy']} busy)"
        for p in result.get("planning", [])
    ]
    return out
