"""The threads that run a call's work while the calling thread watches for Ctrl-C: parked
between calls and reused, not spawned and joined per call; calls at once each get one. A call
whose last call of the same kind and size class ended within one poll of the watcher (20 ms)
runs on the calling thread instead; a grid run with ``progress=`` is always watched."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import amari_gpu
import numpy as np
import pytest
from amari_gpu import _native

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


def _watched_calls(call: Callable[[], Any]) -> tuple[int, float, Any]:
    """Calls that ran on a call thread while ``call()`` ran, its seconds and its result."""
    before = _native.call_thread_jobs()
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    return _native.call_thread_jobs() - before, seconds, result


def _no_progress(done: int, total: int) -> None:
    """A progress callback: a grid run given one is watched on a call thread."""


def test_calls_one_after_another_run_on_one_parked_thread() -> None:
    rng = np.random.default_rng(3)
    u = rng.random((256, 256), dtype=np.float32)
    with amari_gpu.MultiGpuContext(backends=["host"]) as ctx:
        expected = ctx.stencil(u, 8, 0.2, "periodic", progress=_no_progress)
        seen = [call_threads()]
        for _ in range(4):
            watched, _, got = _watched_calls(
                lambda: ctx.stencil(u, 8, 0.2, "periodic", progress=_no_progress)
            )
            assert watched == 1
            np.testing.assert_array_equal(got, expected)
            seen.append(call_threads())
    assert len(seen[0]) >= 1, "the first call left no parked call thread"
    # Each call took a parked thread and gave it back: no thread started after the first.
    assert all(s <= seen[0] for s in seen), seen


def test_calls_at_once_each_run_on_their_own_thread_and_few_stay_parked() -> None:
    rng = np.random.default_rng(4)
    u = rng.random((256, 256), dtype=np.float32)
    before = call_threads()
    with amari_gpu.MultiGpuContext(backends=["host"]) as ctx:
        expected = ctx.stencil(u, 8, 0.2, "periodic", progress=_no_progress)
        results: list[bool] = []
        lock = threading.Lock()

        def caller() -> None:
            for _ in range(5):
                got = ctx.stencil(u, 8, 0.2, "periodic", progress=_no_progress)
                ok = np.array_equal(got, expected)
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


def test_a_call_runs_on_the_calling_thread_while_the_last_of_its_class_was_short() -> None:
    rng = np.random.default_rng(5)
    # A planned, split call on two host threads (not the fast path), well within 20 ms.
    a = rng.standard_normal((1 << 15, 8)).astype(np.float32)
    u = rng.random((128, 128), dtype=np.float32)
    with amari_gpu.MultiGpuContext(backends=["host"]) as ctx:
        for call in (lambda: ctx.geometric_product(a, a), lambda: ctx.stencil(u, 4)):
            # The first call of its class in a context is watched: nothing says it is short.
            watched, seconds, expected = _watched_calls(call)
            assert watched == 1
            short_pairs = 0
            for _ in range(20):
                watched, next_seconds, got = _watched_calls(call)
                np.testing.assert_array_equal(got, expected)
                # The call's wall time bounds its work's: one that ended within 20 ms
                # makes the next of its class run here.
                if seconds <= 0.02:
                    assert watched == 0, seconds
                    short_pairs += 1
                seconds = next_seconds
            assert short_pairs > 0, "no call of the class ended within 20 ms"
        # A grid run given progress= is watched whatever its class took.
        for _ in range(3):
            watched, _, _ = _watched_calls(lambda: ctx.stencil(u, 4, progress=_no_progress))
            assert watched == 1


def test_a_call_after_a_long_one_of_its_class_is_watched_again() -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((256, 8)).astype(np.float32)
    with amari_gpu.MultiGpuContext(backends=["vulkan"], sync_timeout_ms=300) as ctx:
        # Calibrated first: a hung device holds calibration's waits too.
        ctx.calibrate()
        expected = ctx.geometric_product(a, a)
        seconds = 1.0
        for _ in range(20):
            if seconds <= 0.02:
                break
            _, seconds, _ = _watched_calls(lambda: ctx.geometric_product(a, a))
        assert seconds <= 0.02, "no call of the class ended within 20 ms"
        # Run here (the last was short), it waits 0.3 s for the hung device and fails.
        ctx.inject_fault(0, 0, fault="hang")
        before = _native.call_thread_jobs()
        start = time.perf_counter()
        with pytest.raises(amari_gpu.DeviceLostError, match="sync_timeout_ms=300"):
            ctx.geometric_product(a, a)
        assert time.perf_counter() - start >= 0.3
        assert _native.call_thread_jobs() == before
        ctx.reset_health()
        # That call took over 20 ms: the next of its class is watched, then runs here again.
        watched, seconds, got = _watched_calls(lambda: ctx.geometric_product(a, a))
        assert watched == 1
        np.testing.assert_array_equal(got, expected)
        if seconds <= 0.02:
            watched, _, got = _watched_calls(lambda: ctx.geometric_product(a, a))
            assert watched == 0
            np.testing.assert_array_equal(got, expected)
