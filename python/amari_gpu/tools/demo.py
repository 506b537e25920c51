"""The main job: list every adapter and the host CPU device, run every kernel family (the
geometric product, a tropical product, a Fisher matrix, heat and Life grids) on every device,
check each, then the same on the default selection.

Timings are wall-clock seconds measured in this run on the devices named beside them;
software adapters (lavapipe, llvmpipe) run on the CPU, so they say nothing about GPU speed.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import numpy as np

from .. import __version__
from .._adapters import AdapterInfo, adapters, default_selection
from ..context import MultiGpuContext
from ..errors import AmariGpuError
from ..reference import geometric_product as reference_product

T = TypeVar("T")


def _timed(call: Callable[[], T]) -> tuple[T, float]:
    """``call()``'s result and the wall-clock seconds it took."""
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def _verdict(ok: bool, good: str = "OK") -> str:
    """``good`` for a result that checked out, else WRONG."""
    return good if ok else "WRONG"


def _report(say: Callable[[str], None], label: str, checks: list[tuple[str, bool, str]]) -> bool:
    """Says one line of ``label``'s checks, each as ``text (word)`` (WRONG where it failed),
    then OK or WRONG for them all; returns whether every check passed."""
    ok = all(passed for _, passed, _ in checks)
    parts = "; ".join(f"{text} ({_verdict(passed, word)})" for text, passed, word in checks)
    say(f"  {label}: {parts} {_verdict(ok)}")
    return ok


def _check(ctx: MultiGpuContext, n: int, label: str, say: Callable[[str], None]) -> bool:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((n, 8)).astype(np.float32)
    b = rng.standard_normal((n, 8)).astype(np.float32)
    ctx.geometric_product(a[:1024], b[:1024])  # compile and warm the pipelines
    out, seconds = _timed(lambda: ctx.geometric_product(a, b))
    want = reference_product(a, b)
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-3)
    err = float((np.abs(out - want) / scale).max())
    ok = err < 1e-5
    say(
        f"  {label}: {n:,} Cl(3,0) products in {seconds * 1e3:.1f} ms "
        f"({n / seconds / 1e6:.2f} M/s), max rel. error {err:.1e} {_verdict(ok)}"
    )
    return ok


def _families(ctx: MultiGpuContext, label: str, say: Callable[[str], None]) -> bool:
    """A tropical product and a Fisher matrix, each checked against numpy."""
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, (512, 256)).astype(np.float32)
    b = rng.integers(-50, 50, (256, 384)).astype(np.float32)
    got, t_trop = _timed(lambda: ctx.tropical_matmul(a, b, semiring="max_plus"))
    want = (a[:, :, None] + b[None, :, :]).max(axis=1)
    scores = rng.standard_normal((20_000, 64)).astype(np.float32)
    fisher, t_fisher = _timed(lambda: ctx.fisher_information(scores))
    reference = scores.astype(np.float64).T @ scores.astype(np.float64) / len(scores)
    fisher_err = float(np.abs(fisher - reference).max() / np.abs(reference).max())
    return _report(
        say,
        label,
        [
            (
                f"max-plus 512x256 @ 256x384 in {t_trop * 1e3:.1f} ms",
                bool(np.array_equal(got, want)),
                "exact",
            ),
            (
                f"Fisher 20000x64 in {t_fisher * 1e3:.1f} ms, rel. error {fisher_err:.1e}",
                fisher_err < 1e-4,
                "within 1e-4",
            ),
        ],
    )


def _grids(ctx: MultiGpuContext, label: str, say: Callable[[str], None]) -> bool:
    """Heat steps and Life on a grid cut into bands across the devices, checked against
    numpy (float64 heat, exact Life)."""
    rng = np.random.default_rng(5)
    u = rng.random((512, 384), dtype=np.float32)
    steps = 20
    got, t_heat = _timed(lambda: ctx.stencil(u, steps, alpha=0.2, boundary="periodic", halo=4))
    want = u.astype(np.float64)
    for _ in range(steps):
        s = sum(np.roll(want, k, axis) for k in (1, -1) for axis in (0, 1))
        want = want + 0.2 * (s - 4.0 * want)
    heat_err = float(np.abs(got - want).max())
    cells = (rng.random((300, 200)) < 0.3).astype(np.uint8)
    life = ctx.life(cells, steps, halo=4)
    g = cells.astype(np.int64)
    for _ in range(steps):
        n = sum(np.roll(np.roll(g, dr, 0), dc, 1) for dr in (-1, 0, 1) for dc in (-1, 0, 1))
        n -= g
        g = ((n == 3) | ((n == 2) & (g == 1))).astype(np.int64)
    bands = ctx.last_run.layouts[0]["bands"] if ctx.last_run else 0
    return _report(
        say,
        label,
        [
            (
                f"heat 512x384 x {steps} steps in {t_heat * 1e3:.1f} ms, abs. error {heat_err:.1e}",
                heat_err < 1e-5,
                "within 1e-5",
            ),
            (
                f"Life 300x200 x {steps} steps in {bands} band(s)",
                bool(np.array_equal(life, g)),
                "exact",
            ),
        ],
    )


def _grids_where_possible(ctx: MultiGpuContext, label: str, say: Callable[[str], None]) -> bool:
    """The grids, or a line saying they were not run: a context of the host device alone
    has no grid kernels until the host gains them (then this runs them)."""
    try:
        return _grids(ctx, label, say)
    except AmariGpuError as e:
        if all(d.adapter.is_host for d in ctx.devices) and "the host device has no" in str(e):
            say(f"  {label}: heat and Life not run: {e}")
            return True
        raise


def _devices(ctx: MultiGpuContext) -> str:
    return ", ".join(f"{d.id}: {d.adapter.name} ({d.adapter.backend})" for d in ctx.devices)


def _plan_line(ctx: MultiGpuContext) -> str:
    """The last call's strategy and the devices its plan gave chunks to."""
    plan = ctx.last_plan
    if plan is None:
        return "no plan"
    used = ", ".join(
        f"{w.device_id} ({ctx.devices[w.device_id].adapter.backend}) {w.chunks} chunks"
        for w in plan
    )
    return f"strategy {plan.strategy} on {used}"


def _alone(info: AdapterInfo) -> MultiGpuContext:
    return MultiGpuContext(adapters=[info.index])


def run(n: int = 1_000_000, say: Callable[[str], None] = print) -> int:
    """Runs the demo; returns a process exit code (0 when every check passed)."""
    say(f"amari_gpu {__version__}")
    found = adapters()
    say("Adapters and the host device (default selection: used / left out, and why):")
    for info, used, why in default_selection():
        say(f"  {info.describe()}")
        say(f"      {'used' if used else 'left out'}: {why}")
    ok = True
    say("Each device alone:")
    for info in found:
        alone = _alone(info)
        label = f"[{info.index}] {info.backend}"
        ok &= _check(alone, n, info.describe(), say)
        ok &= _families(alone, label, say)
        ok &= _grids_where_possible(alone, label, say)
    wgpu = [info.index for info in found if not info.is_host]
    every = [*wgpu, *(info.index for info in found if info.is_host)]
    ctx = MultiGpuContext(adapters=every, devices_per_adapter=2)
    say(
        f"Everything together, 2 logical devices per wgpu adapter ({len(ctx.devices)} devices: "
        f"{_devices(ctx)}):"
    )
    ok &= _check(ctx, n, "all devices", say)
    say(f"    {_plan_line(ctx)}")
    ok &= _families(ctx, "all devices", say)
    ok &= _grids(ctx, "all devices", say)
    default = MultiGpuContext()
    say(f"Default selection ({len(default.devices)} devices: {_devices(default)}):")
    ok &= _check(default, n, "default", say)
    say(f"    {_plan_line(default)}")
    ok &= _families(default, "default", say)
    ok &= _grids_where_possible(default, "default", say)
    return 0 if ok else 1
