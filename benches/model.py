"""What the cost model costs and how well it predicts, measured in this run on every
adapter: calibration time per device (fresh cache, medians of a few forced runs), and the
plan's estimated makespan of a Cl(3,0) product against the busy time the calls took, before
and after the history has learned from a few calls. These are measurements, not pass/fail
tests: a busy machine moves them.

    python benches/model.py [--items N] [--calls C] [--repeats R]
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
os.environ["AMARI_GPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="amari-gpu-bench-cache-")

import amari_gpu as ag


def _workload(items: int) -> ag.Workload:
    return ag.Workload("geometric_product", items, 64.0, 32.0, 120.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=400_000)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"amari_gpu {ag.__version__}; host CPUs: {os.cpu_count()}")
    a = np.random.default_rng(21).standard_normal((args.items, 8), dtype=np.float32)
    print(f"{'adapter':<62} {'calibrate s':>12} {'est/obs before':>15} {'est/obs after':>14}")
    for info in ag.adapters():
        ctx = ag.MultiGpuContext(adapters=[info.index], chunk_items=16_384)
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            ctx.calibrate(force=True)
            seconds.append(time.perf_counter() - start)
        before = ctx.distribute_workload(_workload(args.items)).estimated_makespan_s
        busy = []
        for _ in range(args.calls):
            start_busy = ctx.stats()[0]["busy_s"]
            ctx.geometric_product(a, a)
            busy.append(ctx.stats()[0]["busy_s"] - start_busy)
        after = ctx.distribute_workload(_workload(args.items)).estimated_makespan_s
        observed = statistics.median(busy[1:])  # the first call warms buffers up
        print(
            f"[{info.index}]{'':<5} {statistics.median(seconds):>12.2f} "
            f"{before / observed:>15.2f} {after / observed:>14.2f}  {info.describe()}"
        )
    print(
        "calibrate s: median of forced calibrations of one device; est/obs: the plan's "
        f"estimate over the median busy time of calls 2..{args.calls} (1.00 = exact)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
