"""What profiling costs: the Cl(3,0) geometric product of 1,000,000 multivectors on one
adapter, with profiling off and on, interleaved round by round; medians and their ratio,
measured in this run on the adapter printed.

    python benches/profiler.py [--items N] [--rounds R] [--adapter I] [--png PATH]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--adapter", type=int, default=0)
    parser.add_argument("--png", help="also save the Gantt chart of one profiled call here")
    args = parser.parse_args()

    ctx = ag.MultiGpuContext(adapters=[args.adapter], strategy="balanced")
    device = ctx.devices[0]
    print(f"amari_gpu {ag.__version__}; Cl(3,0) geometric product, N = {args.items:,}")
    print(f"on {device.adapter.describe()}; GPU timestamps: {device.gpu_timestamps}")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.items, 8), dtype=np.float32)
    b = rng.standard_normal((args.items, 8), dtype=np.float32)
    ctx.geometric_product(a, b)  # calibration, pipelines, buffer pool

    off: list[float] = []
    on: list[float] = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        ctx.geometric_product(a, b)
        off.append(time.perf_counter() - start)
        with ctx.profile() as prof:
            start = time.perf_counter()
            ctx.geometric_product(a, b)
            on.append(time.perf_counter() - start)
    ratio = statistics.median(on) / statistics.median(off)
    print(
        f"profiling off: median {statistics.median(off) * 1e3:.1f} ms "
        f"(min {min(off) * 1e3:.1f}, max {max(off) * 1e3:.1f})"
    )
    print(
        f"profiling on:  median {statistics.median(on) * 1e3:.1f} ms "
        f"(min {min(on) * 1e3:.1f}, max {max(on) * 1e3:.1f}), {len(prof.events)} events a call"
    )
    print(f"on / off = {ratio:.3f} ({(ratio - 1) * 100:+.1f}%)")
    clocks = sorted({e["clock"] for e in prof.events if e["kind"] == "kernel"})
    cost = device.capabilities.timestamp_cost_s
    print(
        f"kernels timed on the {'/'.join(clocks)} clock; a GPU timestamp costs "
        f"{(cost or 0) * 1e6:.0f} us per chunk on this device (measured at calibration)"
    )
    print(prof)
    if args.png:
        prof.plot(args.png)
        print(f"Gantt chart of the last profiled call: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
