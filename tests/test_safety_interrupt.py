"""Ctrl-C stops long calls promptly and leaves the context usable; long grid runs report
progress, and a progress callback that raises stops the run."""

from __future__ import annotations

import re
import textwrap

import amari_gpu
import numpy as np
import pytest
from _process import python

_SCRIPT = """
import os, signal, threading, time
import numpy as np
import amari_gpu

ctx = amari_gpu.MultiGpuContext(backends=[{backend!r}])
ctx.calibrate()
sent = []
def interrupt():
    sent.append(time.perf_counter())
    os.kill(os.getpid(), signal.SIGINT)
threading.Timer(1.0, interrupt).start()
started = time.perf_counter()
try:
    {call}
except KeyboardInterrupt:
    caught = time.perf_counter()
    print(f"latency_s={{caught - sent[0]:.4f}}")
else:
    print(f"finished after {{time.perf_counter() - started:.1f}} s")
health = ctx.health()
assert all(h["healthy"] for h in health.values()), health
grid = np.random.default_rng(1).random((64, 64), dtype=np.float32)
assert np.array_equal(ctx.stencil(grid, 10), ctx.stencil(grid, 10, halo=3))
print("still usable")
"""

# name: (backend, call). On the host device, rounds of 20,000 steps of a 1024 x 1024 grid
# take over ten seconds each on two cores, so a prompt stop is one taken between the steps
# of a round.
CASES = {
    "stencil": ("vulkan", "ctx.stencil(np.ones((512, 512), np.float32), 60000)"),
    "shortest_paths": (
        "vulkan",
        "ctx.shortest_paths(np.random.default_rng(2).random((2048, 2048), dtype=np.float32))",
    ),
    "host_round": (
        "host",
        "ctx.stencil(np.ones((1024, 1024), np.float32), 60000, halo=20000)",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_ctrl_c_raises_keyboard_interrupt_promptly_and_the_context_still_works(
    name: str,
) -> None:
    backend, call = CASES[name]
    script = textwrap.dedent(_SCRIPT).format(backend=backend, call=call)
    done = python("-c", script, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"latency_s=([0-9.]+)", done.stdout)
    assert found, done.stdout
    latency = float(found.group(1))
    print(f"{name}: KeyboardInterrupt {latency * 1000:.0f} ms after SIGINT")
    # Generous: the 200 ms figure is measured by scripts, not asserted on a busy machine.
    assert latency < 2.0
    assert "still usable" in done.stdout


def test_progress_is_reported_between_rounds(default_ctx: amari_gpu.MultiGpuContext) -> None:
    grid = np.random.default_rng(3).random((128, 128), dtype=np.float32)
    seen: list[tuple[int, int]] = []
    out = default_ctx.stencil(grid, 400, progress=lambda done, total: seen.append((done, total)))
    assert np.array_equal(out, default_ctx.stencil(grid, 400))
    assert seen, "progress was never called"
    assert seen[-1] == (400, 400)
    assert all(total == 400 for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_progress_callback_that_raises_stops_the_run(
    default_ctx: amari_gpu.MultiGpuContext,
) -> None:
    grid = np.random.default_rng(4).integers(0, 2, (256, 256), dtype=np.uint8)
    before = grid.copy()

    def stop(done: int, total: int) -> None:
        raise RuntimeError(f"stop at {done} of {total}")

    with pytest.raises(RuntimeError, match="stop at"):
        default_ctx.life(grid, 100000, progress=stop)
    assert np.array_equal(grid, before)
    assert all(h["healthy"] for h in default_ctx.health().values())
    assert np.array_equal(default_ctx.life(grid, 3), default_ctx.life(grid, 3))


def test_progress_must_be_callable(default_ctx: amari_gpu.MultiGpuContext) -> None:
    with pytest.raises(amari_gpu.InvalidArgumentError, match="progress"):
        default_ctx.stencil(np.ones((8, 8), np.float32), 1, progress=5)  # type: ignore[arg-type]
