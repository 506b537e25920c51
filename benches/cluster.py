"""RayContext against MultiGpuContext on the same devices: per-call overhead for a small and
a large geometric-algebra call, the transfer rate through Ray's object store, and what the
efficiency model predicts for N real nodes from those measured figures.

Starts a one-node Ray cluster on this machine (loopback only, temporary files in a private
directory) whose node offers the ``amari_gpu`` resource, so the RayContext's only node runs
on the very devices the MultiGpuContext uses. On one machine the node and the driver share
the CPU: no speedup is possible here, only the cost of going through Ray is measured.
Calls alternate between the two contexts round by round (drift hits both alike); medians
with min-max are printed. Target: for 2^21 items, RayContext / MultiGpuContext <= 1.3.

    python benches/cluster.py [--large-log2 21] [--small 1024] [--repeats 5] [--backends vulkan]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import amari_gpu as ag


def _seconds(f: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def _text(values: list[float]) -> str:
    return (
        f"{statistics.median(values) * 1e3:9.2f} ms "
        f"({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})"
    )


def _compare(
    label: str, rc: ag.RayContext, ctx: ag.MultiGpuContext, items: int, repeats: int
) -> tuple[float, float]:
    rng = np.random.default_rng(items)
    a = rng.standard_normal((items, 8), dtype=np.float32)
    b = rng.standard_normal((items, 8), dtype=np.float32)
    want = ctx.geometric_product(a, b)
    got = rc.geometric_product(a, b)  # warm both (pipelines, buffer pools)
    assert np.array_equal(got, want), "RayContext and MultiGpuContext disagree"
    ray_s: list[float] = []
    local_s: list[float] = []
    for _ in range(repeats):
        local_s.append(_seconds(lambda: ctx.geometric_product(a, b)))
        ray_s.append(_seconds(lambda: rc.geometric_product(a, b)))
    r, m = statistics.median(ray_s), statistics.median(local_s)
    before = _moved(rc)
    rc.geometric_product(a, b)
    moved = _moved(rc) - before
    print(f"{label:>22}  MultiGpuContext {_text(local_s)}   RayContext {_text(ray_s)}")
    print(
        f"{'':>22}  ratio {r / m:.2f}, Ray's cost per call {(r - m) * 1e3:+.2f} ms, "
        f"{moved / 2**20:.1f} MiB through the object store per call "
        f"(operands {(a.nbytes + b.nbytes) / 2**20:.1f} MiB, result {want.nbytes / 2**20:.1f} MiB)"
    )
    return r, m


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _moved(rc: ag.RayContext) -> int:
    """Bytes the driver sent to and received from the nodes so far."""
    return sum(s["bytes_sent"] + s["bytes_received"] for s in rc.stats())


def _where(rc: ag.RayContext, items: int, repeats: int) -> None:
    """Where a large call's time goes on the way through Ray, each step timed alone: the
    driver putting the operands in the store, the node reading them and sending a result of
    the same size back (its actor call's round trip), and the driver's copy of the result
    out of the store."""
    import ray

    rng = np.random.default_rng(1)
    a = rng.standard_normal((items, 8), dtype=np.float32)
    node = rc._native.healthy()[0].actor
    put_s, back_s, copy_s = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        refs = [ray.put(a), ray.put(a)]
        put_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        result = ray.get(node.send.remote(a.nbytes))
        back_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.array(result)
        copy_s.append(time.perf_counter() - t0)
        del refs, result
    print(f"  where the time goes on the way (2^{items.bit_length() - 1} rows, medians):")
    print(f"    ray.put of both operands          {_text(put_s)}")
    print(f"    node returns a result-sized array {_text(back_s)}")
    print(f"    driver copies it out of the store {_text(copy_s)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--large-log2", type=int, default=21, help="large call: 2^N items")
    parser.add_argument("--small", type=int, default=1024, help="small call: items")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="vulkan", help="comma list, as MultiGpuContext")
    args = parser.parse_args()
    backends = [s for s in args.backends.split(",") if s]

    import ray

    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    os.environ["RAY_TMPDIR"] = tmp
    large = 1 << args.large_log2
    try:
        ray.init(
            num_cpus=1,
            resources={"amari_gpu": 1},
            _node_ip_address="127.0.0.1",
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=max(512 << 20, 8 * 32 * large),
        )
        with ag.MultiGpuContext(backends=backends) as ctx, ag.RayContext(backends=backends) as rc:
            node = rc.nodes[0]
            names = ", ".join(
                f"{d.adapter.name} ({d.adapter.backend}, driver {d.adapter.driver} "
                f"{d.adapter.driver_info})"
                for d in ctx.devices
            )
            py = platform.python_version()
            print(f"amari_gpu {ag.__version__}, Ray {ray.__version__}, Python {py}")
            print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} threads")
            print(f"Load average (1, 5, 15 min) at the start: {_load()}")
            print(f"Devices of both contexts (measured in this run): {names}")
            print(f"Node: {node.address}, devices {[d['name'] for d in node.devices]}")
            print(
                f"Object store (measured with 8 MiB each way): "
                f"{node.upload_bytes_per_s / 1e6:.0f} MB/s driver->node, "
                f"{node.download_bytes_per_s / 1e6:.0f} MB/s node->driver, "
                f"empty call round trip {node.latency_s * 1e3:.2f} ms"
            )
            print("geometric_product, Cl(3,0), float32; medians over rounds (min-max):")
            small_r, small_m = _compare(f"{args.small} items", rc, ctx, args.small, args.repeats)
            big_r, big_m = _compare(f"2^{args.large_log2} items", rc, ctx, large, args.repeats)
            verdict = "met" if big_r / big_m <= 1.3 else "NOT met"
            print(f"Target RayContext <= 1.3 x MultiGpuContext at 2^{args.large_log2}: {verdict}")
            _where(rc, large, args.repeats)
            _model(node, big_m, big_r, small_r - small_m, large)
            # Other processes on the machine sway every figure: say how busy it was.
            print(f"Load average (1, 5, 15 min) at the end: {_load()}")
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _model(
    node: ag.cluster.NodeInfo, compute_s: float, one_node_s: float, call_s: float, items: int
) -> None:
    """Efficiency for N real nodes, from the figures measured above (a MODEL, not a
    measurement): the compute (MultiGpuContext's time) divides over N nodes, while every
    byte passes the driver's link to the object store once (in at the measured upload
    rate, out at the download rate), overlapped with the compute; each node pays Ray's
    per-call cost measured on the small call once per call (its run is one message)."""
    moved_in, moved_out = items * 64.0, items * 32.0
    link_s = moved_in / node.upload_bytes_per_s + moved_out / node.download_bytes_per_s
    print("Model (NOT measured: predicted from the figures above for N nodes like this one):")
    print(f"{'nodes':>7} {'predicted s':>12} {'speedup':>8} {'efficiency':>10}")
    t1 = max(compute_s, link_s) + max(call_s, 0.0)
    for n in (1, 2, 4, 8, 16):
        t = max(compute_s / n, link_s) + max(call_s, 0.0)
        print(f"{n:>7} {t:>12.3f} {t1 / t:>8.2f} {t1 / (n * t):>10.2f}")
    print(f"(measured one-node RayContext: {one_node_s:.3f} s)")


if __name__ == "__main__":
    raise SystemExit(main())
