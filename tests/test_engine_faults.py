"""Failure handling of the distribution engine: injected faults, health, and sync timeouts.

``inject_fault(d, after_chunks=k)`` makes device ``d`` fail when it starts a chunk after
completing ``k`` more. With four logical devices and 4096-item chunks (49 chunks for 200 000
items), a fault in one device, in three, or in all four is injected under every strategy, and
the tests check the result (bit-identical to a fault-free run), ``health()``, ``stats()``, that
later calls avoid a failed device, that ``reset_health`` brings devices back, and that inputs
are never modified. Each scenario opens its own context, so no history or pending fault leaks
from one test to another; the plan a call will follow is read beforehand with
``distribute_workload`` (the call's ``last_plan`` must equal it), to aim the fault at a device
that has work.

Under the adaptive strategy devices pull chunks from a shared queue, so how many a device gets
is decided at run time. On two cores a device whose worker starts late (its pipeline is compiled
on first use) can pull as few as one of 49 chunks, and a fault due after three chunks would then
never come due. The adaptive scenarios therefore run 1 000 000 items (245 chunks), which gives
every device dozens of chunks. (Warming the devices up first would not do: the history of that
call can make the next adaptive plan leave a device out.)

A device a plan leaves out must still take over the chunks of a failed one. To get such plans
whatever the machine measures, a private calibration cache is edited so that the GL adapter
seems to take a second per launch; every planner then leaves its device out.

``sync_timeout_ms``: with 2**18-item chunks, each chunk keeps lavapipe busy for well over a
millisecond after it is submitted, so a 1 ms limit makes the last chunk every device waits on
time out: every device fails and the call raises ``DeviceLostError``. (With the default grid for
2 000 000 items the last chunk is a few hundred items, and whether it beats 1 ms is a matter of
luck, so that configuration is not used.)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from amari_gpu import (
    STRATEGIES,
    DeviceLostError,
    InvalidArgumentError,
    MultiGpuContext,
    Plan,
    Workload,
)
from cl3 import REL_TOL, random_batch, reference_product, relative_error

N = 200_000
ADAPTIVE_N = 1_000_000
CHUNK = 4096
DEVICES = 4


@dataclass(frozen=True)
class Batch:
    a: np.ndarray
    b: np.ndarray
    want: np.ndarray
    """The fault-free result, from a separate one-device context."""

    @property
    def n(self) -> int:
        return self.a.shape[0]

    @property
    def workload(self) -> Workload:
        # The generated Cl(3,0) product: 64 fused multiply-adds per item.
        return Workload("geometric_product", self.n, 64, 32, 128)


@pytest.fixture(scope="module")
def batches() -> dict[int, Batch]:
    """Writable inputs (the tests check that no call modifies them) and their products."""
    single = MultiGpuContext(adapters=[0])
    found = {}
    for n, seed in ((N, 7_001), (ADAPTIVE_N, 7_002)):
        a, b = random_batch(n, seed=seed)
        want = single.geometric_product(a, b)
        assert relative_error(want, reference_product(a, b)) < REL_TOL
        want.setflags(write=False)
        found[n] = Batch(a, b, want)
    return found


def _context() -> MultiGpuContext:
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=DEVICES, chunk_items=CHUNK)
    assert len(ctx.devices) == DEVICES
    assert all(h == {"healthy": True, "reason": None} for h in ctx.health().values())
    return ctx


def _scenario(strategy: str, batches: dict[int, Batch]) -> tuple[MultiGpuContext, Batch]:
    """A fresh context and the batch to run under ``strategy`` (see the module docstring)."""
    return _context(), batches[ADAPTIVE_N if strategy == "adaptive" else N]


def _predict(ctx: MultiGpuContext, batch: Batch, strategy: str | None = None) -> Plan:
    plan = ctx.distribute_workload(batch.workload, strategy)
    assert plan.n_chunks == -(-batch.n // CHUNK)
    return plan


def _run(ctx: MultiGpuContext, batch: Batch, strategy: str | None = None) -> np.ndarray:
    """One call, checking that the inputs come back untouched."""
    a_before, b_before = batch.a.copy(), batch.b.copy()
    try:
        return ctx.geometric_product(batch.a, batch.b, strategy=strategy)
    finally:
        assert np.array_equal(batch.a, a_before) and np.array_equal(batch.b, b_before)


def _assert_correct(got: np.ndarray, batch: Batch) -> None:
    """Bit-identical to the fault-free result."""
    assert got.dtype == np.float32 and got.shape == batch.want.shape
    assert np.array_equal(got, batch.want)
    assert got.tobytes() == batch.want.tobytes()


def _assert_injected(ctx: MultiGpuContext, failed: set[int]) -> None:
    health = ctx.health()
    assert sorted(health) == list(range(DEVICES))
    for device, state in health.items():
        if device in failed:
            assert state["healthy"] is False
            assert isinstance(state["reason"], str) and "injected" in state["reason"], state
        else:
            assert state == {"healthy": True, "reason": None}
    for s in ctx.stats():
        assert s["healthy"] is (s["device_id"] not in failed)
        assert s["reason"] == health[s["device_id"]]["reason"]


def _counter(ctx: MultiGpuContext, name: str) -> list[int]:
    return [s[name] for s in ctx.stats()]


def _since(ctx: MultiGpuContext, name: str, before: list[int]) -> list[int]:
    return [now - then for now, then in zip(_counter(ctx, name), before)]


# --- one failing device ----------------------------------------------------------------------


@pytest.mark.parametrize("after_chunks", [0, 1, 3])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_failing_device_is_recovered_from_and_avoided(batches, strategy, after_chunks):
    ctx, batch = _scenario(strategy, batches)
    predicted = _predict(ctx, batch, strategy)
    # Aim at the device with the most planned chunks (the lowest id among equals).
    victim = max(predicted, key=lambda p: (p.chunks, -p.device_id)).device_id
    assert max(p.chunks for p in predicted) > after_chunks + 1
    items, chunks = _counter(ctx, "items_done"), _counter(ctx, "chunks_done")
    failed = _counter(ctx, "failed_chunks")
    ctx.inject_fault(victim, after_chunks=after_chunks)

    _assert_correct(_run(ctx, batch, strategy), batch)
    assert ctx.last_plan == predicted
    _assert_injected(ctx, {victim})
    done = _since(ctx, "items_done", items)
    lost = _since(ctx, "failed_chunks", failed)
    assert done[victim] == after_chunks * CHUNK
    assert _since(ctx, "chunks_done", chunks)[victim] == after_chunks
    assert lost[victim] >= 1
    assert sum(done) == batch.n
    assert sum(lost) == lost[victim]

    # The next call leaves the failed device out and still gets the same bits.
    items = _counter(ctx, "items_done")
    _assert_correct(_run(ctx, batch, strategy), batch)
    assert victim not in {p.device_id for p in ctx.last_plan}
    done = _since(ctx, "items_done", items)
    assert done[victim] == 0
    assert sum(done) == batch.n
    _assert_injected(ctx, {victim})
    assert victim not in {p.device_id for p in ctx.distribute_workload(batch.workload)}


def test_a_fault_fires_only_when_the_device_starts_a_chunk(batches):
    ctx, full = _context(), batches[N]
    # Two chunks, split evenly from the lowest id: devices 2 and 3 get nothing to do.
    a, b, want = full.a[: 2 * CHUNK], full.b[: 2 * CHUNK], full.want[: 2 * CHUNK]
    small = Batch(a.copy(), b.copy(), want)
    assert [(p.device_id, p.chunks) for p in _predict(ctx, small, "balanced")] == [(0, 1), (1, 1)]
    ctx.inject_fault(3, after_chunks=0)

    _assert_correct(_run(ctx, small, "balanced"), small)
    _assert_injected(ctx, set())  # device 3 never started a chunk
    assert _counter(ctx, "items_done") == [CHUNK, CHUNK, 0, 0]
    assert _counter(ctx, "failed_chunks") == [0, 0, 0, 0]

    # The fault is still pending: the next call that gives the device work sets it off.
    _assert_correct(_run(ctx, full, "balanced"), full)
    assert 3 in {p.device_id for p in ctx.last_plan}
    _assert_injected(ctx, {3})
    assert ctx.stats()[3]["items_done"] == 0
    assert ctx.stats()[3]["failed_chunks"] >= 1


def test_reset_health_drops_a_pending_fault(batches):
    ctx, batch = _context(), batches[N]
    ctx.inject_fault(1, after_chunks=0)
    ctx.reset_health(1)
    _assert_correct(_run(ctx, batch, "balanced"), batch)
    _assert_injected(ctx, set())
    assert all(s["failed_chunks"] == 0 and s["items_done"] > 0 for s in ctx.stats())


# --- several failing devices -----------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["balanced", "capability", "memory", "adaptive"])
def test_three_failing_devices_leave_the_work_to_the_fourth(batches, strategy):
    ctx, batch = _scenario(strategy, batches)
    predicted = _predict(ctx, batch, strategy)
    assert [p.device_id for p in predicted] == [0, 1, 2, 3]
    items, failed = _counter(ctx, "items_done"), _counter(ctx, "failed_chunks")
    for device, after_chunks in ((1, 0), (2, 1), (3, 3)):
        ctx.inject_fault(device, after_chunks=after_chunks)

    _assert_correct(_run(ctx, batch, strategy), batch)
    _assert_injected(ctx, {1, 2, 3})
    assert _since(ctx, "items_done", items) == [batch.n - 4 * CHUNK, 0, CHUNK, 3 * CHUNK]
    lost = _since(ctx, "failed_chunks", failed)
    assert lost[0] == 0 and min(lost[1:]) >= 1

    items = _counter(ctx, "items_done")
    _assert_correct(_run(ctx, batch, strategy), batch)
    assert [p.device_id for p in ctx.last_plan] == [0]
    assert _since(ctx, "items_done", items) == [batch.n, 0, 0, 0]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_all_devices_failing_raise_device_lost_then_reset_health_recovers(batches, strategy):
    ctx, batch = _context(), batches[N]
    for device, after_chunks in enumerate((0, 1, 3, 0)):
        ctx.inject_fault(device, after_chunks=after_chunks)
    with pytest.raises(DeviceLostError, match="no healthy device"):
        _run(ctx, batch, strategy)
    assert ctx.last_plan is None
    _assert_injected(ctx, set(range(DEVICES)))
    assert sum(_counter(ctx, "items_done")) < batch.n

    # Nothing is left to plan on, nor to run on.
    with pytest.raises(DeviceLostError, match="no healthy device"):
        ctx.distribute_workload(batch.workload, strategy)
    with pytest.raises(DeviceLostError, match="no healthy device"):
        _run(ctx, batch, strategy)

    # One device back: it does everything.
    ctx.reset_health(2)
    _assert_injected(ctx, {0, 1, 3})
    items = _counter(ctx, "items_done")
    _assert_correct(_run(ctx, batch, strategy), batch)
    assert [p.device_id for p in ctx.last_plan] == [2]
    assert _since(ctx, "items_done", items) == [0, 0, batch.n, 0]

    # All devices back, and the balanced split uses them all again.
    ctx.reset_health()
    _assert_injected(ctx, set())
    _assert_correct(_run(ctx, batch, "balanced"), batch)
    assert [p.device_id for p in ctx.last_plan] == [0, 1, 2, 3]


# --- argument checks -------------------------------------------------------------------------


@pytest.mark.parametrize("device_id", [DEVICES, -1, 1.0, "0", True])
def test_inject_fault_and_reset_health_reject_a_bad_device_id(device_id):
    ctx = _context()
    with pytest.raises(InvalidArgumentError, match=r"^device_id: expected an integer in range"):
        ctx.inject_fault(device_id)
    with pytest.raises(InvalidArgumentError, match=r"^device_id: expected an integer in range"):
        ctx.reset_health(device_id)
    assert all(h["healthy"] for h in ctx.health().values())


def test_inject_fault_needs_a_device_id():
    # reset_health(None) means every device; inject_fault has no such meaning for None.
    ctx = _context()
    with pytest.raises(InvalidArgumentError, match=r"^device_id: .*got None"):
        ctx.inject_fault(None)
    ctx.reset_health(None)
    assert all(h["healthy"] for h in ctx.health().values())


@pytest.mark.parametrize("after_chunks", [-1, -(2**40), 0.5, "1", None, False])
def test_inject_fault_rejects_a_bad_chunk_count(after_chunks):
    ctx = _context()
    with pytest.raises(InvalidArgumentError, match=r"^after_chunks: expected an integer >= 0"):
        ctx.inject_fault(0, after_chunks=after_chunks)


def test_a_rejected_injection_leaves_the_device_alone(batches):
    ctx, batch = _context(), batches[N]
    with pytest.raises(InvalidArgumentError, match="after_chunks"):
        ctx.inject_fault(0, after_chunks=-1)
    _assert_correct(_run(ctx, batch, "balanced"), batch)
    _assert_injected(ctx, set())


# --- sync timeouts ---------------------------------------------------------------------------

TIMEOUT_N = 2**19
TIMEOUT_CHUNK = 2**18


@pytest.fixture(scope="module")
def timeout_batch() -> Batch:
    a, b = random_batch(TIMEOUT_N, seed=9_001)
    want = MultiGpuContext(adapters=[0]).geometric_product(a, b)
    assert relative_error(want, reference_product(a, b)) < REL_TOL
    return Batch(a, b, want)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_chunks_slower_than_sync_timeout_fail_every_device(timeout_batch, strategy):
    ctx = MultiGpuContext(
        backends=["vulkan"], devices_per_adapter=2, sync_timeout_ms=1, chunk_items=TIMEOUT_CHUNK
    )
    # Devices that never answer, whatever their speed: the timeout is certain to pass.
    # Calibration first, whose own waits a hold would stop too.
    ctx.calibrate()
    for device in range(len(ctx.devices)):
        ctx.inject_fault(device, fault="hang")
    with pytest.raises(DeviceLostError, match=r"no healthy device.*sync_timeout_ms=1"):
        _run(ctx, timeout_batch, strategy)
    assert ctx.last_plan is None
    for device, state in ctx.health().items():
        assert state["healthy"] is False
        assert "sync_timeout_ms=1" in state["reason"], (device, state)
    stats = ctx.stats()
    assert all(s["failed_chunks"] >= 1 for s in stats)
    assert sum(s["items_done"] for s in stats) < TIMEOUT_N


def test_a_generous_sync_timeout_changes_nothing(timeout_batch):
    ctx = MultiGpuContext(
        backends=["vulkan"],
        devices_per_adapter=2,
        sync_timeout_ms=60_000,
        chunk_items=TIMEOUT_CHUNK,
    )
    _assert_correct(_run(ctx, timeout_batch, "balanced"), timeout_batch)
    assert all(h == {"healthy": True, "reason": None} for h in ctx.health().values())
    assert sum(s["items_done"] for s in ctx.stats()) == TIMEOUT_N


# --- devices left out of the plan, and known bugs ---------------------------------------------


@pytest.fixture(scope="module")
def slow_gl_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private calibration cache in which the GL adapter (index 1) is measured as taking a
    second to launch a chunk, so every planner leaves its devices out (they are fast in
    reality)."""
    directory = tmp_path_factory.mktemp("slow-gl-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AMARI_GPU_CACHE_DIR", str(directory))
        MultiGpuContext(adapters=[0, 1]).calibrate()
    path = directory / "calibration-v2.json"
    data = json.loads(path.read_text())
    gl = MultiGpuContext(adapters=[1]).devices[0].adapter
    assert gl.backend == "gl"
    edited = 0
    for key, entry in data["entries"].items():
        if isinstance(entry, dict) and gl.driver_info in key:
            entry["launch_latency_s"] = 1.0
            edited += 1
    assert edited == 1
    path.write_text(json.dumps(data))
    return directory


@pytest.fixture
def slow_gl_launches(monkeypatch: pytest.MonkeyPatch, slow_gl_cache: Path) -> None:
    """Contexts calibrated in the test load the figures of ``slow_gl_cache``."""
    monkeypatch.setenv("AMARI_GPU_CACHE_DIR", str(slow_gl_cache))


def _slow_gl_context(strategy: str, batch: Batch) -> MultiGpuContext:
    ctx = MultiGpuContext(adapters=[0, 1], chunk_items=CHUNK)
    caps = ctx.calibrate()
    assert [(c.backend, c.from_cache) for c in caps] == [("vulkan", True), ("gl", True)]
    assert caps[1].launch_latency_s == 1.0
    plan = ctx.distribute_workload(batch.workload, strategy)
    assert (plan.strategy, [(p.device_id, p.chunks) for p in plan]) == (strategy, [(0, 49)])
    return ctx


@pytest.mark.parametrize("strategy", ["capability", "memory", "latency"])
def test_a_device_left_out_of_the_plan_takes_over(batches, slow_gl_launches, strategy):
    batch = batches[N]
    ctx = _slow_gl_context(strategy, batch)
    ctx.inject_fault(0, after_chunks=2)
    _assert_correct(_run(ctx, batch, strategy), batch)
    assert [h["healthy"] for h in ctx.health().values()] == [False, True]
    assert _counter(ctx, "items_done") == [2 * CHUNK, N - 2 * CHUNK]


def test_a_device_left_out_of_an_adaptive_plan_takes_over(batches, slow_gl_launches):
    batch = batches[N]
    ctx = _slow_gl_context("adaptive", batch)
    ctx.inject_fault(0, after_chunks=2)
    _assert_correct(_run(ctx, batch, "adaptive"), batch)
    assert [h["healthy"] for h in ctx.health().values()] == [False, True]
    assert _counter(ctx, "items_done") == [2 * CHUNK, N - 2 * CHUNK]


def test_no_healthy_device_error_names_only_real_devices(batches):
    ctx = _context()
    for device in range(DEVICES):
        ctx.inject_fault(device, after_chunks=0)
    with pytest.raises(DeviceLostError, match="no healthy device") as info:
        _run(ctx, batches[N], "balanced")
    named = [int(d) for d in re.findall(r"device (\d+)", str(info.value))]
    if sorted(set(named) & set(range(DEVICES))) != list(range(DEVICES)):
        pytest.fail(f"precondition: the message should list every device: {info.value}")
    assert max(named) < DEVICES, str(info.value)


def test_a_held_device_times_out_however_little_it_has_to_do():
    # inject_fault(fault="hang"): the device stops answering, so a call on it passes any
    # sync_timeout_ms, however fast the device; reset_health releases it.
    ctx = MultiGpuContext(backends=["vulkan"], sync_timeout_ms=5000)
    a, b = random_batch(64, seed=9_002)
    want = ctx.geometric_product(a, b)  # calibrated and compiled before the hold
    ctx.inject_fault(0, fault="hang")
    with pytest.raises(DeviceLostError, match="sync_timeout_ms=5000"):
        ctx.geometric_product(a, b)
    assert "sync_timeout_ms=5000" in ctx.health()[0]["reason"]
    ctx.reset_health()
    assert np.array_equal(ctx.geometric_product(a, b), want)
