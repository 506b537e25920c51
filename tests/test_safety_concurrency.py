"""Devices failing while other threads call: every call returns the right result or raises
an AmariGpuError, never a PanicException (a BaseException that ``except Exception`` misses)."""

from __future__ import annotations

import random
import threading
import time

import amari_gpu
import numpy as np
from amari_gpu import AmariGpuError


def test_faults_injected_during_concurrent_calls_never_panic(
    all_adapters: list[amari_gpu.AdapterInfo],
) -> None:
    with amari_gpu.MultiGpuContext(backends=["vulkan"], devices_per_adapter=4) as ctx:
        rng = np.random.default_rng(14)
        a = rng.standard_normal((20000, 8)).astype(np.float32)
        expected = ctx.geometric_product(a, a, strategy="balanced")
        stop = threading.Event()
        outcomes: list[str] = []
        unexpected: list[BaseException] = []
        lock = threading.Lock()

        def caller() -> None:
            while not stop.is_set():
                try:
                    got = ctx.geometric_product(a, a, strategy="balanced")
                    outcome = "ok" if np.array_equal(got, expected) else "wrong"
                except AmariGpuError:
                    outcome = "error"
                except BaseException as e:  # the PanicException this test looks for
                    with lock:
                        unexpected.append(e)
                    return
                with lock:
                    outcomes.append(outcome)

        threads = [threading.Thread(target=caller) for _ in range(4)]
        for t in threads:
            t.start()
        pick = random.Random(14)
        deadline = time.monotonic() + 4.0
        faults = 0
        while time.monotonic() < deadline:
            ctx.inject_fault(pick.randrange(len(ctx.devices)), 0)
            faults += 1
            time.sleep(0.05)
            ctx.reset_health()
        stop.set()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        assert unexpected == [], [repr(e) for e in unexpected]
        assert "wrong" not in outcomes
        assert outcomes.count("ok") > 0, outcomes
        print(
            f"{faults} faults, outcomes: ok {outcomes.count('ok')}, error {outcomes.count('error')}"
        )
        ctx.reset_health()
        assert np.array_equal(ctx.geometric_product(a, a, strategy="balanced"), expected)
