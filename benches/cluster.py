"""RayContext against MultiGpuContext on the same devices: per-call overhead for a small and
a large geometric-algebra call through each transport (the driver's shared memory, which a
node on its machine uses, and Ray's object store, forced on the same node), where a large
call's time goes by stage on each, a chain's call (the last result as an operand), the same
large call on arrays held by the devices (cluster arrays against local DeviceArrays), the
transfer rate through Ray's object store, and what the efficiency model predicts for N real
nodes from those measured figures.

Starts a one-node Ray cluster on this machine (loopback only, temporary files in a private
directory) whose node offers the ``amari_gpu`` resource, so the RayContext's only node runs
on the very devices the MultiGpuContext uses. On one machine the node and the driver share
the CPU: no speedup is possible here, only the cost of going through Ray is measured.
Calls alternate between the two contexts round by round (drift hits both alike); medians
with min-max are printed, and the CPU time each call took (getrusage: the driver's process
for both contexts, plus the node's process for the RayContext), which other processes on
the machine sway far less than wall time. Target: for 2^21 items, RayContext /
MultiGpuContext <= 1.3.

    python benches/cluster.py [--large-log2 21] [--small 1024] [--repeats 5] [--backends vulkan]
        [--piece-mib 256]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="amari-gpu-xdg-"))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Ray starts its workers at nice 15 (its default worker_niceness): the node actor would get
# the CPU only when the driver and everything else on the machine leave it some, while
# the MultiGpuContext it is compared with runs at the driver's priority. Same priority for
# both (RAY_worker_niceness=15 in the environment measures Ray's default).
os.environ.setdefault("RAY_worker_niceness", "0")
# The store's memory faulted in when Ray starts, not by the first calls that reach each
# page (Ray's preallocate_plasma_memory; a MultiGpuContext's pool is warm after one call).
os.environ.setdefault("RAY_preallocate_plasma_memory", "1")

import amari_gpu as ag

WARM_CALLS = 3
"""Calls of each context before the timed rounds (the object store holds 512 MiB here: a
2^21-row call's 192 MiB reach all of it in three)."""


def _seconds(f: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def _cpu_s() -> float:
    """This process's CPU seconds so far, all its threads (a local context's devices' and
    Ray's driver threads included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(f: Callable[[], object], node: Any) -> tuple[float, float, float]:
    """Wall seconds of ``f()`` and the CPU seconds it took in this process and, with
    ``node`` (a node's actor), in the node's process: on a machine other processes keep
    busy, wall time is what the scheduler left the call, CPU time what the call cost."""
    import ray

    on_node = ray.get(node.cpu_s.remote()) if node is not None else 0.0
    cpu = _cpu_s()
    wall = _seconds(f)
    cpu = _cpu_s() - cpu
    if node is not None:
        on_node = ray.get(node.cpu_s.remote()) - on_node
    return wall, cpu, on_node


def _text(values: list[float]) -> str:
    return (
        f"{statistics.median(values) * 1e3:9.2f} ms "
        f"({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})"
    )


def _use(rc: ag.RayContext, transport: str) -> None:
    """Makes ``rc``'s nodes take ``transport`` (``shared_memory`` only for the nodes that
    passed the probe when it opened): both paths measured on one node in one run."""
    for node in rc._native.nodes:
        if transport == "object_store":
            node.info.setdefault("probed", node.info["shared_memory"])
            node.info["shared_memory"] = False
        else:
            node.info["shared_memory"] = node.info.get("probed", node.info["shared_memory"])


def _compare(
    label: str,
    rc: ag.RayContext,
    ctx: ag.MultiGpuContext,
    items: int,
    repeats: int,
    transports: list[str],
) -> dict[str, float]:
    """Rounds alternating the local call and the RayContext's call through each of
    ``transports``; the median wall seconds per call of each (``local``: the local one)."""
    rng = np.random.default_rng(items)
    a = rng.standard_normal((items, 8), dtype=np.float32)
    b = rng.standard_normal((items, 8), dtype=np.float32)
    want = ctx.geometric_product(a, b)
    for transport in transports:
        _use(rc, transport)
        got = rc.geometric_product(a, b)
        assert np.array_equal(got, want), f"RayContext ({transport}) and MultiGpuContext disagree"
        del got
    # Warm both (pipelines, buffer pools, and every page of the object store mapped into
    # the driver and the node: a call's objects take store memory the last ones did not;
    # the shared memory's segments made and mapped on both sides).
    for _ in range(WARM_CALLS):
        ctx.geometric_product(a, b)
        for transport in transports:
            _use(rc, transport)
            rc.geometric_product(a, b)
    node = rc._native.healthy()[0].actor
    local_s: list[float] = []
    # CPU seconds per call: the local context's (this process), and the RayContext's in
    # this process (puts or copies into shared memory, the copy into place, Ray's driver)
    # and on the node.
    local_cpu: list[float] = []
    ray_s: dict[str, list[float]] = {t: [] for t in transports}
    ray_cpu: dict[str, list[tuple[float, float]]] = {t: [] for t in transports}
    for _ in range(repeats):
        wall, cpu, _ = _timed(lambda: ctx.geometric_product(a, b), None)
        local_s.append(wall)
        local_cpu.append(cpu)
        for transport in transports:
            _use(rc, transport)
            wall, cpu, on_node = _timed(lambda: rc.geometric_product(a, b), node)
            ray_s[transport].append(wall)
            ray_cpu[transport].append((cpu, on_node))
    m = statistics.median(local_s)
    local = statistics.median(local_cpu)
    print(f"{label:>22}  MultiGpuContext {_text(local_s)}")
    print(f"{'':>22}    CPU per call {local * 1e3:.1f} ms")
    medians = {"local": m}
    for transport in transports:
        _use(rc, transport)
        r = medians[transport] = statistics.median(ray_s[transport])
        before, shared, sent = _moved(rc), _shared(rc), _messages(rc)
        rc.geometric_product(a, b)
        moved, messages = _moved(rc) - before, _messages(rc) - sent
        through_shared = _shared(rc) - shared
        print(f"{'':>22}  RayContext ({transport}) {_text(ray_s[transport])}")
        print(
            f"{'':>22}    ratio {r / m:.2f}, Ray's cost per call {(r - m) * 1e3:+.2f} ms, "
            f"{(moved - through_shared) / 2**20:.1f} MiB through the object store and "
            f"{through_shared / 2**20:.1f} MiB through shared memory per call "
            f"(operands {(a.nbytes + b.nbytes) / 2**20:.1f} MiB, "
            f"result {want.nbytes / 2**20:.1f} MiB), {messages} actor calls"
        )
        driver = statistics.median(c for c, _ in ray_cpu[transport])
        # The node's figure is read in the kernel's clock ticks: its mean is the steadier.
        on_node = statistics.mean(n for _, n in ray_cpu[transport])
        print(
            f"{'':>22}    CPU per call {(driver + on_node) * 1e3:.1f} ms (driver "
            f"{driver * 1e3:.1f} + node {on_node * 1e3:.1f}; Ray's store process not "
            f"counted), ratio {(driver + on_node) / local:.2f}"
        )
    _use(rc, transports[0])
    return medians


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def _messages(rc: ag.RayContext) -> int:
    """Actor calls that carried chunks so far (a node's run goes as one or as pieces)."""
    return sum(s["messages"] for s in rc.stats())


def _moved(rc: ag.RayContext) -> int:
    """Bytes the driver sent to and received from the nodes so far."""
    return sum(s["bytes_sent"] + s["bytes_received"] for s in rc.stats())


def _shared(rc: ag.RayContext) -> int:
    """The part of :func:`_moved` that went through the driver's shared memory."""
    return sum(s["bytes_shared"] for s in rc.stats())


STAGES = (
    ("ray.put of both operands", "put"),
    ("actor call submitted", "submit"),
    ("Ray reads them for the node", "read"),
    ("node computes", "compute"),
    ("result back in the store", "back"),
    ("driver's ray.get", "get"),
    ("driver copies it into place", "copy"),
)


def _stages(rc: ag.RayContext, items: int, repeats: int) -> None:
    """Where one large call's time goes, its run sent by hand as one message the way the
    dispatcher sends a run, each stage timed (driver and node clocks, the node's aligned by
    its measured offset): the driver's ``ray.put`` of the operands (at once), the actor call's
    submission, Ray reading the operands for the node (submission to the node's start; the
    node says whether they came as read-only views of the store, i.e. without a copy), the
    node's compute, its result's way back into the store (the node's end to the result
    being ready), the driver's ``ray.get`` (a view of the store) and its copy into the
    output."""
    import ray
    from amari_gpu import _native
    from amari_gpu.cluster.node import ArraySlot
    from amari_gpu.cluster.store import place, put_all

    node = rc._native.healthy()[0]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((items, 8), dtype=np.float32)
    b = rng.standard_normal((items, 8), dtype=np.float32)
    template = ("geometric_product", (3, 0, 0), [ArraySlot(0), ArraySlot(1)], 0)
    times: dict[str, list[float]] = {key: [] for _, key in STAGES}
    borrowed = True
    for _ in range(repeats):
        t0 = time.time()
        refs = put_all([a, b])
        t1 = time.time()
        ref = node.actor.run.remote("ga_apply", None, template, *refs, chunks=1)
        t2 = time.time()
        ray.wait([ref])
        t3 = time.time()
        result = ray.get(ref)[0]
        t4 = time.time()
        out = _native.pooled_output(result.shape)
        place(out, result)
        t5 = time.time()
        start, end, views = ray.get(node.actor.last_run.remote())
        start, end = start - node.clock_offset_s, end - node.clock_offset_s
        borrowed = borrowed and views
        for key, seconds in zip(
            ("put", "submit", "read", "compute", "back", "get", "copy"),
            (t1 - t0, t2 - t1, start - t2, end - start, t3 - end, t4 - t3, t5 - t4),
        ):
            times[key].append(seconds)
        del refs, ref, result, out
    total = [sum(v[i] for v in times.values()) for i in range(repeats)]
    print(f"  one call sent as one message, by stage (2^{items.bit_length() - 1} rows, medians):")
    for label, key in STAGES:
        print(f"    {label:<34} {_text(times[key])}")
    print(f"    {'all stages':<34} {_text(total)}")
    print(f"    the node read its operands without a copy: {'yes' if borrowed else 'NO'}")


SHARED_STAGES = (
    ("operands copied into shared memory", "copy"),
    ("actor call submitted", "submit"),
    ("call reaches the node", "read"),
    ("node computes into the result", "compute"),
    ("reply back to the driver", "back"),
    ("driver's ray.get of the reply", "get"),
)


def _shared_stages(rc: ag.RayContext, items: int, repeats: int) -> None:
    """The same call's stages through the driver's shared memory, sent by hand the way the
    dispatcher sends a run: the operands copied into a pooled segment (the core's row copy
    on the machine's threads), the actor call, the node's compute writing its result into
    the segment lent as the caller's array, the reply (no array in it)."""
    import ray
    from amari_gpu.cluster import shared
    from amari_gpu.cluster.node import ArraySlot

    node = rc._native.healthy()[0]
    pool = rc._native.shared_pool(node)
    if pool is None:
        print("  (the node cannot open the driver's shared memory: no shared-memory stages)")
        return
    rng = np.random.default_rng(1)
    a = rng.standard_normal((items, 8), dtype=np.float32)
    b = rng.standard_normal((items, 8), dtype=np.float32)
    template = ("geometric_product", (3, 0, 0), [ArraySlot(0), ArraySlot(1)], 0)
    times: dict[str, list[float]] = {key: [] for _, key in SHARED_STAGES}
    for _ in range(WARM_CALLS + repeats):
        t0 = time.time()
        segment = pool.take(2 * shared.aligned(a.nbytes))
        shared.copy_into(segment, 0, a)
        shared.copy_into(segment, shared.aligned(a.nbytes), b)
        operands = [
            segment.rows(0, a.shape, a.dtype),
            segment.rows(shared.aligned(a.nbytes), b.shape, b.dtype),
        ]
        result = pool.take(a.nbytes)
        out = pool.lend(result, a.shape, a.dtype)
        t1 = time.time()
        ref = node.actor.run.remote(
            "ga_apply", None, template, *operands, chunks=1, out=result.rows(0, a.shape, a.dtype)
        )
        t2 = time.time()
        ray.wait([ref])
        t3 = time.time()
        ray.get(ref)
        t4 = time.time()
        start, end, _ = ray.get(node.actor.last_run.remote())
        start, end = start - node.clock_offset_s, end - node.clock_offset_s
        pool.give(segment)
        for key, seconds in zip(
            ("copy", "submit", "read", "compute", "back", "get"),
            (t1 - t0, t2 - t1, start - t2, end - start, t3 - end, t4 - t3),
        ):
            times[key].append(seconds)
        del out
    for key in times:
        times[key] = times[key][WARM_CALLS:]
    total = [sum(v[i] for v in times.values()) for i in range(repeats)]
    print(f"  the same call through shared memory, by stage (2^{items.bit_length() - 1} rows):")
    for label, key in SHARED_STAGES:
        print(f"    {label:<34} {_text(times[key])}")
    print(f"    {'all stages':<34} {_text(total)}")


def _chain(rc: ag.RayContext, ctx: ag.MultiGpuContext, items: int, repeats: int) -> None:
    """A chain: each context's last result as the next call's first operand (through shared
    memory the nodes read it where it is, so only the other operand is copied); rounds
    alternate as in :func:`_compare`."""
    rng = np.random.default_rng(items + 2)
    a = rng.standard_normal((items, 8), dtype=np.float32)
    b = rng.standard_normal((items, 8), dtype=np.float32)
    mine, theirs = ctx.geometric_product(a, b), rc.geometric_product(a, b)
    node = rc._native.healthy()[0].actor
    local_s: list[float] = []
    ray_s: list[float] = []
    local_cpu: list[float] = []
    ray_cpu: list[float] = []
    for i in range(WARM_CALLS + repeats):
        wall, cpu, _ = _timed(lambda: ctx.geometric_product(mine, b), None)
        if i >= WARM_CALLS:
            local_s.append(wall)
            local_cpu.append(cpu)
        wall, cpu, on_node = _timed(lambda: rc.geometric_product(theirs, b), node)
        if i >= WARM_CALLS:
            ray_s.append(wall)
            ray_cpu.append(cpu + on_node)
    print("  a chain, the last result as the next call's operand (through shared memory):")
    print(f"    MultiGpuContext {_text(local_s)}   RayContext {_text(ray_s)}")
    wall = statistics.median(ray_s) / statistics.median(local_s)
    cpu = statistics.median(ray_cpu) / statistics.median(local_cpu)
    print(f"    ratio {wall:.2f}, CPU per call ratio {cpu:.2f}")


def _resident(rc: ag.RayContext, ctx: ag.MultiGpuContext, items: int, repeats: int) -> None:
    """The same product with operands and result held on the devices (``asarray``): a
    cluster array's shards on the node against a local DeviceArray's, nothing but the call
    crossing the object store; rounds alternate as in :func:`_compare`."""
    rng = np.random.default_rng(items + 1)
    a = rng.standard_normal((items, 8), dtype=np.float32)
    b = rng.standard_normal((items, 8), dtype=np.float32)
    ra, rb, la, lb = rc.asarray(a), rc.asarray(b), ctx.asarray(a), ctx.asarray(b)
    got, want = rc.geometric_product(ra, rb), ctx.geometric_product(la, lb)
    assert got.numpy().tobytes() == want.numpy().tobytes(), "the contexts disagree"
    ray_s: list[float] = []
    local_s: list[float] = []
    for _ in range(WARM_CALLS + repeats):
        local_s.append(_seconds(lambda: ctx.geometric_product(la, lb).free()))
        ray_s.append(_seconds(lambda: rc.geometric_product(ra, rb).free()))
    ray_s, local_s = ray_s[WARM_CALLS:], local_s[WARM_CALLS:]
    print("  the same product on arrays held by the devices (asarray), result left there:")
    print(f"    MultiGpuContext {_text(local_s)}   RayContext {_text(ray_s)}")
    ratio = statistics.median(ray_s) / statistics.median(local_s)
    print(f"    ratio {ratio:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--large-log2", type=int, default=21, help="large call: 2^N items")
    parser.add_argument("--small", type=int, default=1024, help="small call: items")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backends", default="vulkan", help="comma list, as MultiGpuContext")
    parser.add_argument(
        "--piece-mib",
        type=float,
        default=None,
        help="bytes of a piece of a node's run, MiB (default: the dispatcher's PIECE_BYTES)",
    )
    args = parser.parse_args()
    from amari_gpu.cluster import dispatch

    if args.piece_mib is not None:
        dispatch.PIECE_BYTES = int(args.piece_mib * 2**20)
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
            print(
                f"Ray worker niceness: {os.environ['RAY_worker_niceness']} (the driver's: 0), "
                f"store preallocated: {os.environ['RAY_preallocate_plasma_memory']}"
            )
            print(f"Devices of both contexts (measured in this run): {names}")
            print(f"Node: {node.address}, devices {[d['name'] for d in node.devices]}")
            print(
                f"Object store (measured with 8 MiB each way): "
                f"{node.upload_bytes_per_s / 1e6:.0f} MB/s driver->node, "
                f"{node.download_bytes_per_s / 1e6:.0f} MB/s node->driver, "
                f"empty call round trip {node.latency_s * 1e3:.2f} ms"
            )
            piece = dispatch.PIECE_BYTES / 2**20
            print(f"A node's run over {piece:g} MiB goes as pieces of that size")
            transports = ["shared_memory", "object_store"]
            if not node_shares(rc):
                print("The node cannot open the driver's shared memory: object store only")
                transports = ["object_store"]
            print("geometric_product, Cl(3,0), float32; medians over rounds (min-max):")
            small = _compare(f"{args.small} items", rc, ctx, args.small, args.repeats, transports)
            big = _compare(f"2^{args.large_log2} items", rc, ctx, large, args.repeats, transports)
            for transport in transports:
                ratio = big[transport] / big["local"]
                verdict = "met" if ratio <= 1.3 else "NOT met"
                print(
                    f"Target RayContext ({transport}) <= 1.3 x MultiGpuContext at "
                    f"2^{args.large_log2}: {verdict} ({ratio:.2f})"
                )
            _use(rc, "object_store")
            _stages(rc, large, args.repeats)
            _use(rc, transports[0])
            _shared_stages(rc, large, args.repeats)
            if node_shares(rc):
                _chain(rc, ctx, large, args.repeats)
            _resident(rc, ctx, large, args.repeats)
            big_r = big["object_store"]
            _model(node, big["local"], big_r, small["object_store"] - small["local"], large)
            # Other processes on the machine sway every figure: say how busy it was.
            print(f"Load average (1, 5, 15 min) at the end: {_load()}")
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def node_shares(rc: ag.RayContext) -> bool:
    """Whether the RayContext's node passed the shared-memory probe when it opened."""
    return bool(rc._native.healthy()[0].info["shared_memory"])


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
