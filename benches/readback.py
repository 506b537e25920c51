"""The spread of one call from call to call: the Cl(3,0) geometric product of 2^20 pairs on
one adapter, repeated, with a new result array each call and with one ``out=`` array
reused; min / median / p90 / max over the calls, and where a call's time went (the
profiler's upload, kernel, wait and readback events, summed per call), measured in this run
on the adapter printed. Minor page faults per call (getrusage) are printed too: they count
first touches of fresh memory (new result arrays, new staging buffers) and, unlike times,
do not depend on what else the machine is running.

    python benches/readback.py [--items N] [--calls C] [--adapter I]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

import amari_gpu as ag


def _spread(label: str, seconds: list[float]) -> str:
    ms = sorted(s * 1e3 for s in seconds)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return (
        f"{label:<22} min {ms[0]:7.1f}  median {statistics.median(ms):7.1f}  "
        f"p90 {p90:7.1f}  max {ms[-1]:7.1f}  ms  ({len(ms)} calls)"
    )


def _phases(ctx: ag.MultiGpuContext, call: object, calls: int) -> str:
    """Median seconds per call of each profiler event kind, over ``calls`` profiled calls."""
    per_kind: dict[str, list[float]] = defaultdict(list)
    for _ in range(calls):
        with ctx.profile() as prof:
            call()  # type: ignore[operator]
        sums: dict[str, float] = defaultdict(float)
        for event in prof.events:
            sums[str(event["kind"])] += float(event["duration_s"])
        for kind, total in sums.items():
            per_kind[kind].append(total)
    return ", ".join(
        f"{kind} {statistics.median(v) * 1e3:.1f}" for kind, v in sorted(per_kind.items())
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1 << 20)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--adapter", type=int, default=0)
    args = parser.parse_args()
    if args.calls < 30:
        parser.error("--calls: at least 30, for a p90 that means something")

    ctx = ag.MultiGpuContext(adapters=[args.adapter])
    device = ctx.devices[0]
    print(f"amari_gpu {ag.__version__}; Cl(3,0) geometric product, N = {args.items:,}")
    print(f"on {device.adapter.describe()}")
    print(f"host: {os.cpu_count()} logical CPUs; other work on the machine shows in the max")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.items, 8), dtype=np.float32)
    b = rng.standard_normal((args.items, 8), dtype=np.float32)
    out = np.empty((args.items, 8), np.float32)
    ctx.geometric_product(a, b)  # calibration, pipelines, buffer pool
    try:
        ctx.geometric_product(a, b, out=out)
        has_out = True
    except TypeError:  # a build from before out= (for before/after figures)
        has_out = False
        print("this build has no out=: new result arrays only")

    fresh: list[float] = []
    reused: list[float] = []
    faults: dict[str, list[int]] = {"new result": [], "out=": []}

    def timed(call: object, times: list[float], label: str) -> None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        call()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
        faults[label].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

    # Interleaved, so that load from elsewhere falls on both alike.
    for _ in range(args.calls):
        timed(lambda: ctx.geometric_product(a, b), fresh, "new result")
        if has_out:
            timed(lambda: ctx.geometric_product(a, b, out=out), reused, "out=")
    print(_spread("new result each call", fresh))
    if has_out:
        print(_spread("out= reused", reused))
    for label, counts in faults.items():
        if counts:
            print(
                f"minor page faults per call ({label}): median {statistics.median(counts):.0f} "
                f"(min {min(counts)}, max {max(counts)}; 4 KiB pages: the result is "
                f"{args.items * 32 // 4096})"
            )
    print(
        "median ms per call by profiler event (new result):",
        _phases(ctx, lambda: ctx.geometric_product(a, b), 10),
    )
    if has_out:
        print(
            "median ms per call by profiler event (out=):      ",
            _phases(ctx, lambda: ctx.geometric_product(a, b, out=out), 10),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
