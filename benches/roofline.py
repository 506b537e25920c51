"""The roofline: every kernel on every device beside that device's measured limits.

For each device of a context (the host device, each wgpu adapter; one device per adapter,
each measured alone): its streaming bandwidth and FMA, add and max-plus issue rates,
measured on the device (WGSL loops on wgpu devices, SIMD loops on every host thread); then
for every kernel its achieved GB/s and Gop/s from the engine's own kernel times, and the
fraction of each limit. Printed with the device name, backend and driver, the CPU, its SIMD
level and threads. The same rows as ``amari-gpu bench --roofline``; docs/roofline.md says
what each kernel moves and computes as written.

    python benches/roofline.py [--quick] [--rounds R] [--backends host,vulkan,gl] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

from amari_gpu.tools import bench_roofline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds, not minutes)")
    parser.add_argument("--rounds", type=int, default=5, help="profiled calls per median")
    parser.add_argument("--backends", help="comma list of backends (default: every one)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    backends = args.backends.split(",") if args.backends else None
    result = bench_roofline.run(max(args.rounds, 1), args.quick, backends)
    print(json.dumps(result, indent=1) if args.json else "\n".join(bench_roofline.lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
