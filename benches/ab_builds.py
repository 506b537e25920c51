"""Two builds of the package side by side: one call timed in each, alternating processes.

Each build is a directory holding an ``amari_gpu`` package (for instance a copy of
``python/amari_gpu`` made after ``make dev`` on each commit). For every round, each build
runs in a fresh process on the host device alone: two untimed calls, then ``--calls``
calls each after an untimed one, back to back (or ``--idle`` seconds asleep before the
untimed call); the process prints the median and the least. The builds alternate within
a round, so that both see the same machine. Prints the
CPU, the host device's SIMD level and threads. How the figures of benchmarks.md's "Parked
call threads" section were taken:

    python benches/ab_builds.py OLD_DIR NEW_DIR --op heat [--rounds 3] [--calls 40]

Ops: ``cl3`` (Cl(3,0) product of 2^20 float32 rows into ``out=``), ``cl3s`` (2^16 rows),
``cl3t`` (16 rows: a small call, the fast path),
``f16`` (2^20 float16 rows), ``f64s`` (2^16 float64 rows), ``heat`` (1024² periodic grid,
16 steps, halo 16), ``heato`` (the same into a reused ``out=`` array), ``fisher64`` and
``fisher256`` (the empirical Fisher matrix of 65,536 float32 score rows of 64 or 256).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ONE = r"""
import os, statistics, sys, tempfile, time
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))
sys.path.insert(0, sys.argv[1])
import numpy as np
from amari_gpu import MultiGpuContext
op, calls, idle = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
host = MultiGpuContext(backends=["host"])
rng = np.random.default_rng(0)
if op in ("heat", "heato"):
    u = rng.random((1024, 1024), dtype=np.float32)
    out = np.empty_like(u) if op == "heato" else None
    f = lambda: host.stencil(u, 16, 0.2, "periodic", halo=16, out=out)
elif op in ("fisher64", "fisher256"):
    g = rng.standard_normal((65536, int(op[6:])), dtype=np.float32)
    f = lambda: host.fisher_information(g)
else:
    n, dt = {"cl3": (1 << 20, np.float32), "cl3s": (1 << 16, np.float32), "cl3t": (16, np.float32),
             "f16": (1 << 20, np.float16), "f64s": (1 << 16, np.float64)}[op]
    x = rng.random((n, 8)).astype(dt)
    y = rng.random((n, 8)).astype(dt)
    o = np.empty_like(x)
    f = lambda: host.geometric_product(x, y, out=o)
f(); f()
walls = []
for _ in range(calls):
    # Outside the timed call: the machine left idle first, as benches/host.py settles it.
    time.sleep(idle)
    f()
    t0 = time.perf_counter(); f(); walls.append(time.perf_counter() - t0)
print(statistics.median(walls), min(walls))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs=2, help="directories holding an amari_gpu package")
    parser.add_argument(
        "--op",
        choices=["cl3", "cl3s", "cl3t", "f16", "f64s", "heat", "heato", "fisher64", "fisher256"],
        default="heat",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument(
        "--idle",
        type=float,
        default=0.0,
        help="seconds asleep before each untimed call (0.05: the regime of benches/host.py)",
    )
    args = parser.parse_args()
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))
    sys.path.insert(0, args.builds[1])
    from amari_gpu import adapters
    from amari_gpu.tools.bench_host import cpu_model

    host = next(a for a in adapters() if a.is_host)
    simd = host.features[0] if host.features else "unknown"
    print(f"{cpu_model()}; host device, SIMD {simd}, {host.limits.get('threads')} threads")
    medians: dict[str, list[float]] = {b: [] for b in args.builds}
    for r in range(args.rounds):
        for build in args.builds:
            out = subprocess.run(
                [sys.executable, "-c", ONE, build, args.op, str(args.calls), str(args.idle)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            med, least = float(out[0]), float(out[1])
            medians[build].append(med)
            print(f"round {r + 1} {build}: median {med * 1e3:.3f} ms, least {least * 1e3:.3f} ms")
    for build, ms in medians.items():
        print(
            f"{args.op} {build}: median of the rounds' medians {statistics.median(ms) * 1e3:.3f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
