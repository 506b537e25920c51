"""Every split strategy on the wgpu adapters and the host device together, next to each
device alone and the default context.

Runs the Cl(3,0) geometric product on each device alone (every wgpu adapter and the host CPU
device), on the default context (``MultiGpuContext()``: every hardware GPU plus the host; the
host alone on a machine without a GPU), on the host beside the Vulkan adapters
(``backends=["vulkan", "host"]``) with each strategy, and on every device together with
``auto``, interleaving the configurations round by round so that drift on a noisy machine
hits them alike. Prints medians with their spread, the ratio to the best single device and the
plan each configuration ran, all measured in this run. With --check, exits 1 if the default
context or ``auto`` on vulkan + host is more than 10% slower than the best single device (for
the default context: the best single device it is not, never itself).

    python benches/strategies.py [--items N] [--rounds R] [--check]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

import amari_gpu as ag


def timed(ctx: ag.MultiGpuContext, a: np.ndarray, b: np.ndarray, strategy: str | None) -> float:
    start = time.perf_counter()
    ctx.geometric_product(a, b, strategy=strategy)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--check", action="store_true", help="fail if default or vulkan+host auto > 1.10x best"
    )
    args = parser.parse_args()

    adapters = ag.adapters()
    print(f"amari_gpu {ag.__version__}; Cl(3,0) geometric product, N = {args.items:,}")
    print("Devices (every figure below was measured in this run on these):")
    for info in adapters:
        print(f"  {info.describe()}")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.items, 8), dtype=np.float32)
    b = rng.standard_normal((args.items, 8), dtype=np.float32)

    configs: list[tuple[str, ag.MultiGpuContext, str | None]] = []
    for info in adapters:
        configs.append(
            (
                f"[{info.index}] {info.backend} alone",
                ag.MultiGpuContext(adapters=[info.index]),
                None,
            )
        )
    singles = len(configs)
    default = ag.MultiGpuContext()
    # The default context is not compared with a single device it is made of alone: on a
    # machine without a GPU it is the host device alone, and that would time it against itself.
    default_adapters = {d.adapter.index for d in default.devices}
    other_singles = [
        f"[{info.index}] {info.backend} alone"
        for info in adapters
        if {info.index} != default_adapters
    ]
    configs.append(("default context, auto", default, "auto"))
    backends = {info.backend for info in adapters}
    if "vulkan" in backends:
        mixed = ag.MultiGpuContext(backends=["vulkan", "host"])
        for strategy in ag.STRATEGIES:
            configs.append((f"vulkan + host, {strategy}", mixed, strategy))
    every = ag.MultiGpuContext(adapters=[info.index for info in adapters])
    configs.append(("every device, auto", every, "auto"))

    chosen: dict[str, str] = {}
    samples: dict[str, list[float]] = {name: [] for name, _, _ in configs}
    for _name, ctx, strategy in configs:  # warm-up: calibration, pipelines, buffer pools
        timed(ctx, a, b, strategy)
    for _ in range(args.rounds):
        for name, ctx, strategy in configs:
            samples[name].append(timed(ctx, a, b, strategy))
            plan = ctx.last_plan
            if plan is not None:
                used = ", ".join(
                    f"{w.device_id} ({ctx.devices[w.device_id].adapter.backend})" for w in plan
                )
                chosen[name] = f"{plan.strategy} on {used}"

    medians = {name: statistics.median(s) for name, s in samples.items()}
    best_name = min((name for name, _, _ in configs[:singles]), key=lambda n: medians[n])
    best_single = medians[best_name]
    print(
        f"\n{'configuration':<28} {'median ms':>10} {'min-max ms':>17} {'vs best single':>15}  plan"
    )
    for name, s in samples.items():
        spread = f"{min(s) * 1e3:.1f}-{max(s) * 1e3:.1f}"
        ratio = f"{medians[name] / best_single:>14.2f}x"
        if name == "default context, auto" and best_name not in other_singles:
            ratio = f"{'(itself)':>15}"  # the best single device is the default context itself
        print(f"{name:<28} {medians[name] * 1e3:>10.1f} {spread:>17} {ratio}  {chosen[name]}")
    failed = False
    for name, against, label in (
        ("default context, auto", other_singles, "best single device it is not"),
        ("vulkan + host, auto", [n for n, _, _ in configs[:singles]], "best single device"),
    ):
        if name not in medians:
            continue
        if not against:
            print(f"{name}: every single device is this context itself; no comparison")
            continue
        best = min(against, key=lambda n: medians[n])
        ratio = medians[name] / medians[best]
        verdict = "within" if ratio <= 1.10 else "NOT within"
        print(f"{name} / {label} ({best}) = {ratio:.3f} ({verdict} the 10% target)")
        failed |= ratio > 1.10
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
