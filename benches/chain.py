"""A chain of five GA operations on resident arrays against the same chain on numpy arrays.

The chain on 2^21 Cl(3,0) multivectors: product, sandwich by one rotor, normalize,
reverse, product. The numpy path sends every operand up and every result down at each of
the five calls; the resident path uploads the two operands once (``ctx.asarray``), runs the
five kernels where the rows live and gathers once. Both are timed end to end (uploads and
gather included), interleaved round by round, on the adapter named at the top; the results
are checked to be bit-identical. Prints the medians, their ratio, the bytes each path moved
(from ``ctx.stats()``), the resident path's transfer and kernel figures measured in this run,
and the ratio DERIVED from them for a device whose transfers cross PCIe (a model, labelled
as such: this machine has no PCIe GPU).

    python benches/chain.py [--rows-log2 21] [--repeats 5] [--devices 1] [--backend vulkan]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))

import amari_gpu as ag

PCIE_BYTES_PER_S = 25e9
"""A PCIe 4.0 x16 link's practical bandwidth, for the derived figure only."""


def chain(ctx: ag.MultiGpuContext, a, b, r):
    x = ctx.geometric_product(a, b)
    x = ctx.sandwich(r, x)
    x = ctx.normalize(x)
    x = ctx.reverse(x)
    return ctx.geometric_product(x, b)


def moved(ctx: ag.MultiGpuContext) -> int:
    return sum(s["bytes_up"] + s["bytes_down"] for s in ctx.stats())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows-log2", type=int, default=21)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--devices", type=int, default=1, help="devices_per_adapter")
    parser.add_argument("--backend", default="vulkan")
    args = parser.parse_args()

    ctx = ag.MultiGpuContext(backends=[args.backend], devices_per_adapter=args.devices)
    n = 1 << args.rows_log2
    print(f"amari_gpu {ag.__version__}; {n} Cl(3,0) multivectors, chain of 5 operations")
    for d in ctx.devices:
        print(f"device {d.id}: {d.adapter.describe()}")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, 8), dtype=np.float32)
    b = rng.standard_normal((n, 8), dtype=np.float32)
    r = np.zeros(8, np.float32)
    r[0], r[3] = np.cos(0.4), np.sin(0.4)
    ctx.calibrate()
    chain(ctx, a[:1024], b[:1024], r)  # compile the pipelines outside the timings

    host_s, resident_s, upload_s, kernels_s, gather_s = [], [], [], [], []
    host_bytes = resident_bytes = 0
    for _ in range(args.repeats):
        before = moved(ctx)
        t0 = time.perf_counter()
        expected = chain(ctx, a, b, r)
        host_s.append(time.perf_counter() - t0)
        host_bytes = moved(ctx) - before

        before = moved(ctx)
        t0 = time.perf_counter()
        da, db = ctx.asarray(a), ctx.asarray(b)
        t1 = time.perf_counter()
        x = chain(ctx, da, db, r)
        t2 = time.perf_counter()
        got = x.numpy()
        t3 = time.perf_counter()
        resident_bytes = moved(ctx) - before
        resident_s.append(t3 - t0)
        upload_s.append(t1 - t0)
        kernels_s.append(t2 - t1)
        gather_s.append(t3 - t2)
        for arr in (da, db, x):
            arr.free()
        if not np.array_equal(got, expected):
            raise SystemExit("resident chain differs from the numpy path")

    # One profiled round of each path: where each one's time goes, step by step.
    steps = {}
    for path in ("numpy", "resident"):
        with ctx.profile() as prof:
            if path == "numpy":
                chain(ctx, a, b, r)
            else:
                da, db = ctx.asarray(a), ctx.asarray(b)
                chain(ctx, da, db, r).numpy()
                da.free()
                db.free()
        totals: dict[str, float] = {}
        for e in prof.events:
            totals[e["kind"]] = totals.get(e["kind"], 0.0) + e["duration_s"]
        steps[path] = totals

    med = statistics.median
    print(
        f"\nnumpy path:    {med(host_s) * 1e3:9.1f} ms  (min {min(host_s) * 1e3:.1f})  "
        f"moved {host_bytes / 2**20:8.1f} MiB"
    )
    print(
        f"resident path: {med(resident_s) * 1e3:9.1f} ms  (min {min(resident_s) * 1e3:.1f})  "
        f"moved {resident_bytes / 2**20:8.1f} MiB"
    )
    print(f"ratio (numpy / resident): {med(host_s) / med(resident_s):.2f}x   (target >= 2x)")
    print("bit-identical results: yes")
    up_bytes = 2 * a.nbytes
    down_bytes = a.nbytes
    print("\nresident path, measured in this run:")
    print(
        f"  upload  {med(upload_s) * 1e3:8.1f} ms for {up_bytes / 2**20:.0f} MiB "
        f"({up_bytes / med(upload_s) / 1e9:.2f} GB/s)"
    )
    print(f"  kernels {med(kernels_s) * 1e3:8.1f} ms for the 5 operations")
    print(
        f"  gather  {med(gather_s) * 1e3:8.1f} ms for {down_bytes / 2**20:.0f} MiB "
        f"({down_bytes / med(gather_s) / 1e9:.2f} GB/s)"
    )
    print(
        "\none profiled round of each path, seconds summed per step kind (device tracks overlap):"
    )
    for path, totals in steps.items():
        text = ", ".join(f"{kind} {sec * 1e3:.1f} ms" for kind, sec in sorted(totals.items()))
        print(f"  {path:8} {text}")
    # DERIVED, not measured: the same kernels, transfers at PCIe speed.
    kern = med(kernels_s)

    def derived(kernel_s: float, path_bytes: int) -> float:
        return kernel_s + path_bytes / PCIE_BYTES_PER_S

    ratio = derived(kern, host_bytes) / derived(kern, resident_bytes)
    fast = derived(kern / 100, host_bytes) / derived(kern / 100, resident_bytes)
    print(
        f"\nDERIVED (a model, not measured) for transfers over PCIe at "
        f"{PCIE_BYTES_PER_S / 1e9:.0f} GB/s: with this run's kernel time numpy "
        f"{derived(kern, host_bytes) * 1e3:.1f} ms, resident "
        f"{derived(kern, resident_bytes) * 1e3:.1f} ms, ratio {ratio:.2f}x; "
        f"with kernels 100x faster (a discrete GPU): ratio {fast:.2f}x"
    )
    print("(other builds may have been running on this machine: compare the two paths of one run)")
    ctx.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
