"""What the benchmarks of resident operands against the numpy path share (resident_fisher.py,
resident_tropical.py): one measured call (seconds and bytes moved), the printed table of
paths, and the command line that opens the devices and runs each case."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import amari_gpu as ag

T = TypeVar("T")


def moved(ctx: ag.MultiGpuContext) -> int:
    """Bytes uploaded and read back by every device of ``ctx`` so far."""
    return sum(s["bytes_up"] + s["bytes_down"] for s in ctx.stats())


def measured(ctx: ag.MultiGpuContext, call: Callable[[], T]) -> tuple[T, float, int]:
    """``call()``'s result, the seconds it took and the bytes the devices moved for it."""
    before = moved(ctx)
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    return result, seconds, moved(ctx) - before


def print_paths(paths: list[tuple[str, list[float], int]], width: int) -> None:
    """One line per (name, seconds of each round, bytes moved): median, minimum, MiB."""
    for name, times, nbytes in paths:
        print(
            f"  {name:{width}} {statistics.median(times) * 1e3:9.1f} ms "
            f"(min {min(times) * 1e3:8.1f})  moved {nbytes / 2**20:7.2f} MiB"
        )


def main(
    doc: str | None, operation: str, run_cases: Callable[[ag.MultiGpuContext, int], None]
) -> int:
    """Parses ``--repeats``, ``--devices`` and ``--backend`` (the benchmark's ``doc`` gives
    the description), opens the context, names the devices, and calls
    ``run_cases(ctx, repeats)``."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--devices", type=int, default=1, help="devices_per_adapter")
    parser.add_argument("--backend", default="vulkan")
    args = parser.parse_args()

    ctx = ag.MultiGpuContext(backends=[args.backend], devices_per_adapter=args.devices)
    print(f"amari_gpu {ag.__version__}; resident vs numpy-path {operation}")
    for d in ctx.devices:
        print(f"device {d.id}: {d.adapter.describe()}")
    run_cases(ctx, args.repeats)
    print("\n(other builds may have been running on this machine: compare paths of one run)")
    ctx.close()
    return 0
