"""Small-call latency per kernel family and device kind, beside kingdon and numpy.

The median time of a tiny call from Python on the host device and on each wgpu adapter
present, its breakdown from the engine's own records (Python checks and conversion, the
native call, and the profiled steps: plan, upload, kernel, wait, readback), whether it took
the fast path (its plan says), the calling thread's CPU time and context switches per call
(the rest of its wall time is off the CPU: blocked on, or preempted by, the driver's threads),
on a wgpu adapter the same call with every thread on one core, and the peer on the same
inputs in the same run (kingdon for the Cl(3,0) product, numpy ``g.T @ g / n`` and
broadcast max-plus). Then what one thread waking another costs on one core and across two,
no driver involved. Prints the CPU, each
adapter's name, backend and driver, and which BLAS kernel numpy ran. Time numpy with
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` unset (``env -u ... python ...``). Last, the
planner's cost alone: ``plan_models`` for a 10^7-item workload on 8 and 16 made-up devices,
all different, on their own adapters or all on one.

    python benches/latency.py [--repeats R] [--device host|vulkan|gl ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

from amari_gpu.tools import bench_latency


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=300, help="calls per median")
    parser.add_argument(
        "--device", action="append", help="device kinds to measure (default: every one)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    result = bench_latency.run(args.repeats, args.device)
    print(json.dumps(result, indent=1) if args.json else "\n".join(bench_latency.lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
