"""The threads that run a call's work while the calling thread watches for Ctrl-C: parked
between calls and reused, not spawned and joined per call; calls at once each get one."""

from __future__ import annotations

import os
import sys
import threading
import time

import amari_gpu
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads thread names from /proc"
)

CALL_THREAD = "amari-gpu call"


def call_threads() -> set[int]:
    """Thread ids of this process's threads named as call threads: the call threads, and
    any thread a driver started from one without a name of its own (it inherits the name),
    such as a Vulkan driver's worker threads started during an earlier test's call."""
    found = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:  # a thread that ended while listed
            continue
        if name == CALL_THREAD:
            found.add(int(tid))
    return found


def test_calls_one_after_another_run_on_one_parked_thread() -> None:
    rng = np.random.default_rng(3)
    # Large enough for the planned (split) path, whose work runs on a call thread.
    a = rng.standard_normal((1 << 18, 8)).astype(np.float32)
    with amari_gpu.MultiGpuContext(backends=["host"]) as ctx:
        expected = ctx.geometric_product(a, a)
        seen = [call_threads()]
        for _ in range(4):
            np.testing.assert_array_equal(ctx.geometric_product(a, a), expected)
            seen.append(call_threads())
        u = rng.random((256, 256), dtype=np.float32)
        ctx.stencil(u, 8, 0.2, "periodic")
        seen.append(call_threads())
    assert len(seen[0]) >= 1, "the first call left no parked call thread"
    # Each call took a parked thread and gave it back: no thread started after the first.
    assert all(s <= seen[0] for s in seen), seen


def test_calls_at_once_each_run_on_their_own_thread_and_few_stay_parked() -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((1 << 18, 8)).astype(np.float32)
    before = call_threads()
    with amari_gpu.MultiGpuContext(backends=["host"]) as ctx:
        expected = ctx.geometric_product(a, a)
        results: list[bool] = []
        lock = threading.Lock()

        def caller() -> None:
            for _ in range(5):
                ok = np.array_equal(ctx.geometric_product(a, a), expected)
                with lock:
                    results.append(ok)

        threads = [threading.Thread(target=caller) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    assert results == [True] * 30
    # Up to six calls ran at once, each on a call thread; at most four wait for the next
    # ones (up to four of them may have been parked before).
    after = call_threads()
    assert after - before or after & before, (before, after)
    # A thread past the four ends right after its call: give it the moment to go.
    deadline = time.monotonic() + 5.0
    while len(after - before) > 4 and time.monotonic() < deadline:
        time.sleep(0.01)
        after = call_threads()
    assert len(after - before) <= 4, (before, after)
