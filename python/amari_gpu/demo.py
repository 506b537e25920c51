"""The main job: list every adapter, run the geometric product on every device, check it.

Timings are wall-clock seconds measured in this run on the adapters named beside them;
software adapters (lavapipe, llvmpipe) run on the CPU, so they say nothing about GPU speed.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from . import __version__
from ._adapters import adapters
from .context import MultiGpuContext
from .errors import NoAdapterError
from .reference import geometric_product as reference_product


def _check(ctx: MultiGpuContext, n: int, label: str, say: Callable[[str], None]) -> bool:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((n, 8)).astype(np.float32)
    b = rng.standard_normal((n, 8)).astype(np.float32)
    ctx.geometric_product(a[:1024], b[:1024])  # compile and warm the pipelines
    start = time.perf_counter()
    out = ctx.geometric_product(a, b)
    seconds = time.perf_counter() - start
    want = reference_product(a, b)
    scale = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-3)
    err = float((np.abs(out - want) / scale).max())
    ok = err < 1e-5
    say(
        f"  {label}: {n:,} Cl(3,0) products in {seconds * 1e3:.1f} ms "
        f"({n / seconds / 1e6:.2f} M/s), max rel. error {err:.1e} {'OK' if ok else 'WRONG'}"
    )
    return ok


def _families(ctx: MultiGpuContext, label: str, say: Callable[[str], None]) -> bool:
    """A tropical product and a Fisher matrix, each checked against numpy."""
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, (512, 256)).astype(np.float32)
    b = rng.integers(-50, 50, (256, 384)).astype(np.float32)
    start = time.perf_counter()
    got = ctx.tropical_matmul(a, b, semiring="max_plus")
    t_trop = time.perf_counter() - start
    want = (a[:, :, None] + b[None, :, :]).max(axis=1)
    scores = rng.standard_normal((20_000, 64)).astype(np.float32)
    start = time.perf_counter()
    fisher = ctx.fisher_information(scores)
    t_fisher = time.perf_counter() - start
    reference = scores.astype(np.float64).T @ scores.astype(np.float64) / len(scores)
    fisher_err = float(np.abs(fisher - reference).max() / np.abs(reference).max())
    ok = bool(np.array_equal(got, want)) and fisher_err < 1e-4
    say(
        f"  {label}: max-plus 512x256 @ 256x384 in {t_trop * 1e3:.1f} ms "
        f"({'exact' if np.array_equal(got, want) else 'WRONG'}); Fisher 20000x64 in "
        f"{t_fisher * 1e3:.1f} ms (rel. error {fisher_err:.1e}) {'OK' if ok else 'WRONG'}"
    )
    return ok


def run(n: int = 1_000_000, say: Callable[[str], None] = print) -> int:
    """Runs the demo; returns a process exit code (0 when every check passed)."""
    say(f"amari_gpu {__version__}")
    found = adapters()
    if not found:
        raise NoAdapterError(
            "No GPU adapter found. Install a GPU driver, or Mesa's software rasterisers: "
            "apt-get install mesa-vulkan-drivers libegl-mesa0"
        )
    say("Adapters:")
    for info in found:
        say("  " + info.describe())
    ok = True
    say("Each adapter alone:")
    for info in found:
        alone = MultiGpuContext(adapters=[info.index])
        ok &= _check(alone, n, info.describe(), say)
        ok &= _families(alone, f"[{info.index}] {info.backend}", say)
    every = [info.index for info in found]
    ctx = MultiGpuContext(adapters=every, devices_per_adapter=2)
    say(f"All adapters together, 2 logical devices each ({len(ctx.devices)} devices):")
    ok &= _check(ctx, n, "all devices", say)
    ok &= _families(ctx, "all devices", say)
    default = MultiGpuContext()
    names = ", ".join(d.adapter.describe() for d in default.devices)
    say(f"Default selection: {names}")
    return 0 if ok else 1
