"""The host device alone against the CPU libraries a user would otherwise reach for.

One run, interleaved repetitions, medians with their spread: Cl(3,0) geometric product
against kingdon (and against the memory bandwidth the host calibration measures), max-plus
against a parallel numba kernel with a row accumulator, shortest paths against scipy's
floyd_warshall, the empirical Fisher matrix against numpy/BLAS, heat steps against a numba
prange stencil, and the default context against the best single device that is a different
choice. Prints the CPU, its SIMD level, the thread count, every peer's version and the BLAS
numpy runs (library and kernel); peers come from requirements-bench.txt and are optional.

OpenBLAS reads OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE when numpy loads: set, they can pin a
slower kernel than the CPU's. For the Fisher row's peer, run with both unset (`make bench`
does) and check the BLAS line:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
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
