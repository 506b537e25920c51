"""A new output array per call against a reused ``out=`` array and kingdon, per run.

Cl(3,0) geometric product of 2^20 float32 pairs on the host device: each run times the call
without ``out=`` (a new 32 MiB result, in the bindings' pooled blocks), the same call into a
reused ``out=`` array and kingdon's product, interleaved (who goes first alternates), and
prints their medians, the ratios issue 27 sets targets for (new output <= 1.5x the ``out=``
call and <= 0.5x kingdon, in every run) and the page faults of one new-output call. Prints
the CPU, the host device's SIMD level and threads. The machine may be shared: compare the
ratios within a run.

    python benches/fresh_output.py [--runs 5] [--repeats 7] [--items N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

import numpy as np
from amari_gpu import MultiGpuContext
from amari_gpu.tools.bench_host import _kingdon_product, _version, cpu_model


def _faults(f: Callable[[], Any]) -> int:
    """Minor page faults of one call of ``f`` (its result freed before the count ends)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    f()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs, each with its own medians")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved calls per median")
    parser.add_argument("--items", type=int, default=1 << 20, help="pairs per call")
    args = parser.parse_args()
    rng = np.random.default_rng(15)
    a = rng.standard_normal((args.items, 8), dtype=np.float32)
    b = rng.standard_normal((args.items, 8), dtype=np.float32)
    kingdon = _kingdon_product(a, b)
    with MultiGpuContext(backends=["host"]) as ctx:
        dev = ctx.devices[0].adapter
        print(
            f"CPU: {cpu_model()}; SIMD {dev.features[0] if dev.features else 'unknown'}; "
            f"{dev.limits.get('threads')} threads; numpy {np.__version__}; "
            f"kingdon {_version('kingdon') or 'not installed'}"
        )
        reused = np.empty_like(a)
        calls: dict[str, Callable[[], Any]] = {
            "new output": lambda: ctx.geometric_product(a, b),
            "out=": lambda: ctx.geometric_product(a, b, out=reused),
        }
        if kingdon is not None:
            calls["kingdon"] = kingdon[0]
        for f in calls.values():
            f()  # warm-up: calibration, the pool's first block, kingdon's code generation
        met = True
        for run in range(args.runs):
            times: dict[str, list[float]] = {name: [] for name in calls}
            for i in range(args.repeats):
                order = list(calls.items())
                for name, f in order if i % 2 == 0 else order[::-1]:
                    start = time.perf_counter()
                    f()
                    times[name].append(time.perf_counter() - start)
            med = {name: statistics.median(t) for name, t in times.items()}
            fresh, into = med["new output"], med["out="]
            line = f"run {run + 1}: new output {fresh * 1e3:.2f} ms, out= {into * 1e3:.2f} ms"
            ok = fresh / into <= 1.5
            line += f", new/out= {fresh / into:.2f}x (<= 1.5)"
            if "kingdon" in med:
                line += f", kingdon {med['kingdon'] * 1e3:.2f} ms, new/kingdon "
                line += f"{fresh / med['kingdon']:.2f}x (<= 0.5)"
                ok = ok and fresh / med["kingdon"] <= 0.5
            line += f"; page faults of one new-output call: {_faults(calls['new output'])}"
            print(line, flush=True)
            met = met and ok
        print(f"targets met in every run: {'yes' if met else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
