"""A real Ray cluster on this machine for the cluster tests: a head and two more nodes,
each with one CPU and the ``amari_gpu`` resource, every address on the loopback interface,
Ray's temporary files and logs in a private directory (never the repository)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Before Ray starts: loopback only, temp files outside the repository (short path: Ray's
# sockets live there).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

LOOPBACK = "127.0.0.1"
RESOURCE = {"amari_gpu": 1}


def segments() -> int:
    """File descriptors of this process open on the shared memory of RayContexts' nodes on
    this machine (``amari_gpu.cluster.shared``): none left once the contexts closed and
    their results are gone."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += "amari-gpu-ray" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
    return count


@contextmanager
def local_cluster(
    resources: list[dict[str, float]] | None = None, num_gpus: list[int] | None = None
) -> Iterator[Any]:
    """A head and more nodes, one CPU each, with ``resources`` (one mapping per node, the
    head's first; default: three nodes with the resource) and ``num_gpus`` GPUs declared
    to Ray (one count per node; default none: the machine has none, Ray only counts them),
    the driver connected; everything shut down and removed afterwards."""
    import ray
    from ray.cluster_utils import Cluster

    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    previous = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp
    per_node = resources or [dict(RESOURCE)] * 3
    gpus = num_gpus or [0] * len(per_node)
    node: dict[str, Any] = {"num_cpus": 1, "node_ip_address": LOOPBACK}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            **node,
            "resources": per_node[0],
            "num_gpus": gpus[0],
            "include_dashboard": False,
        },
    )
    try:
        for extra, n_gpus in zip(per_node[1:], gpus[1:]):
            cluster.add_node(**node, resources=extra, num_gpus=n_gpus)
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        if previous is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = previous
        shutil.rmtree(tmp, ignore_errors=True)
