"""The host device alone against the CPU libraries a user would otherwise reach for.

One run, interleaved repetitions, medians with their spread: Cl(3,0) geometric product
against kingdon (and against the memory bandwidth the host calibration measures), max-plus
against a numba parallel triple loop, shortest paths against scipy's floyd_warshall, the
empirical Fisher matrix against numpy/BLAS, heat steps against numpy np.roll steps, and the
default context against the best single device. Prints the CPU, its SIMD level, the thread
count and every peer's version; peers come from requirements-bench.txt and are optional.

    python benches/host.py [--quick] [--repeats R] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

from amari_gpu.tools import bench_host


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repetitions")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    sizes = bench_host.QUICK if args.quick else bench_host.FULL
    result = bench_host.run(sizes, args.repeats)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("\n".join(bench_host.lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
