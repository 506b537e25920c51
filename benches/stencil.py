"""Domain decomposition: time per step and the share of it spent exchanging halos.

Runs heat-equation steps (and Game of Life) on one adapter with devices_per_adapter 1, 2
and 4 and halo widths 1 and 4, interleaving the configurations round by round so that drift
on a noisy machine hits them alike. Prints medians (with min-max) of the seconds per step
over the rounds of each run, the exchange share (ghost upload, border readback and host
assembly over the rounds' wall time, all measured on the host clock) and the ratio to one
device, every figure measured in this run on the adapter named at the top.

    python benches/stencil.py [--size N] [--steps S] [--repeats R] [--adapter I]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

import amari_gpu as ag


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=2048, help="grid is size x size")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--adapter", type=int, default=0)
    args = parser.parse_args()

    info = ag.adapters()[args.adapter]
    print(f"amari_gpu {ag.__version__}; grid {args.size} x {args.size}, {args.steps} steps")
    print(f"Adapter (every figure below was measured in this run on it): {info.describe()}")
    rng = np.random.default_rng(0)
    heat = rng.random((args.size, args.size), dtype=np.float32)
    cells = (rng.random((args.size, args.size)) < 0.3).astype(np.uint8)
    contexts = {
        n: ag.MultiGpuContext(adapters=[args.adapter], devices_per_adapter=n) for n in (1, 2, 4)
    }
    configs = [(rule, n, h) for rule in ("heat", "life") for n in (1, 2, 4) for h in (1, 4)]
    step_s: dict[tuple[str, int, int], list[float]] = {c: [] for c in configs}
    share: dict[tuple[str, int, int], list[float]] = {c: [] for c in configs}
    compute: dict[tuple[str, int, int], list[float]] = {c: [] for c in configs}
    results: dict[str, bytes] = {}
    for _ in range(args.repeats):
        for rule, n, h in configs:
            ctx = contexts[n]
            if rule == "heat":
                out = ctx.stencil(heat, args.steps, 0.2, "periodic", halo=h)
            else:
                out = ctx.life(cells, args.steps, halo=h)
            report = ctx.last_run
            assert report is not None
            step_s[rule, n, h].append(report.step_s)
            share[rule, n, h].append(report.exchange_share)
            compute[rule, n, h].append(report.compute_s / report.rounds_s)
            # Same bits whatever the devices and halo: checked on every run.
            if results.setdefault(rule, out.tobytes()) != out.tobytes():
                raise SystemExit(f"{rule}: devices={n} halo={h} differs from the first run")
    print()
    print(
        f"{'rule':5} {'devices':>7} {'halo':>4} {'ms/step':>9} {'(min-max)':>17} "
        f"{'compute':>8} {'exchange':>9} {'vs 1 device':>11}"
    )
    for rule, n, h in configs:
        times = step_s[rule, n, h]
        base = statistics.median(step_s[rule, 1, h])
        med = statistics.median(times)
        print(
            f"{rule:5} {n:>7} {h:>4} {med * 1e3:>9.2f} "
            f"({min(times) * 1e3:7.2f}-{max(times) * 1e3:7.2f}) "
            f"{statistics.median(compute[rule, n, h]):>8.1%} "
            f"{statistics.median(share[rule, n, h]):>8.1%} {base / med:>10.2f}x"
        )
    print("\ncompute = the slowest device's submit-to-done time, over the rounds' time;")
    print("exchange = ghost upload + border readback + host assembly, over the rounds' time;")
    print("the rest is synchronisation (threads, waits).")
    print("devices_per_adapter > 1 are logical devices sharing one adapter's hardware.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
