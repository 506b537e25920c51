"""``AMARI_GPU_HOST_PIN=1`` keeps a host pool with one thread per CPU one thread to a CPU,
``0`` lets the threads run anywhere, and by default they are one to a CPU while the rest of
the machine is quiet and anywhere while it is busy (which of the two a run sees depends on the
machine, so the default is only held to being one of them). Every way, the same bits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = r"""
import json, os, time
import numpy as np
import amari_gpu
rng = np.random.default_rng(3)
a = rng.standard_normal((64, 48)).astype(np.float32)
b = rng.standard_normal((48, 40)).astype(np.float32)
with amari_gpu.MultiGpuContext(backends=["host"]) as ctx:
    ctx.tropical_matmul(a, b)  # the pool's threads have started
    time.sleep(0.05)  # and bound or freed themselves, if the call decided so
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            name = f.read().strip()
        if name.startswith("amari-host-"):
            threads[name] = sorted(os.sched_getaffinity(int(tid)))
    product = ctx.tropical_matmul(a, b)
print(json.dumps({"threads": threads, "allowed": sorted(os.sched_getaffinity(0)),
                  "product": product.tobytes().hex()}))
"""


def _run(pin: str | None) -> dict[str, object]:
    env = dict(os.environ)
    env.pop("AMARI_GPU_HOST_PIN", None)
    if pin is not None:
        env["AMARI_GPU_HOST_PIN"] = pin
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _one_to_a_cpu(threads: dict[str, list[int]], allowed: list[int]) -> bool:
    return sorted(threads.values()) == [[cpu] for cpu in allowed]


def test_pinned_pools_keep_a_thread_on_each_cpu_and_the_same_bits() -> None:
    free, pinned, default = _run("0"), _run("1"), _run(None)
    allowed = free["allowed"]
    assert isinstance(allowed, list) and allowed
    free_threads = free["threads"]
    pinned_threads = pinned["threads"]
    default_threads = default["threads"]
    assert isinstance(free_threads, dict) and isinstance(pinned_threads, dict)
    assert isinstance(default_threads, dict)
    assert len(free_threads) == len(allowed) == len(pinned_threads) == len(default_threads)
    assert all(cpus == allowed for cpus in free_threads.values())
    if len(allowed) > 1:
        assert _one_to_a_cpu(pinned_threads, allowed)
        assert default_threads == free_threads or _one_to_a_cpu(default_threads, allowed)
    else:  # one CPU: nothing to spread
        assert pinned_threads == free_threads == default_threads
    assert pinned["product"] == free["product"] == default["product"]
