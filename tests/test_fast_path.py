"""The fast path of small calls (issue 25): a call too small for a split to pay, by the cost
model, runs on one device from a cached decision and says so in its plan (``fast_path``);
its results are the split path's bit for bit, on the host device and on lavapipe; a large
call is planned and split as before; failover, profiling and the plan record still work.
Whether the fast path ran is read from the engine's records, never from timing."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import amari_gpu as ag
import numpy as np
import pytest

RNG = np.random.default_rng(25)
A = RNG.standard_normal((5, 8), dtype=np.float32)
B = RNG.standard_normal((5, 8), dtype=np.float32)
M = RNG.standard_normal((4, 4), dtype=np.float32)
G = RNG.standard_normal((10, 4), dtype=np.float32)
P = RNG.dirichlet(np.ones(4), size=6).astype(np.float32)

# One tiny call of every family (geometric algebra, tropical, information geometry).
CALLS: dict[str, Callable[..., Any]] = {
    "geometric_product": lambda ctx, **kw: ctx.geometric_product(A, B, **kw),
    "sandwich": lambda ctx, **kw: ctx.sandwich(A[0], B, **kw),
    "tropical_matmul": lambda ctx, **kw: ctx.tropical_matmul(M, M, **kw),
    "tropical_matvec": lambda ctx, **kw: ctx.tropical_matvec(M, M[0], **kw),
    "fisher_information": lambda ctx, **kw: ctx.fisher_information(G, **kw),
    "fisher_categorical": lambda ctx, **kw: ctx.fisher_categorical(P, **kw),
}


def _context(backends: list[str], **options: Any) -> ag.MultiGpuContext:
    """A context with its figures measured: the fast path is the cost model's decision, and
    a wgpu device's launch latency is what a split of its calls would cost."""
    ctx = ag.MultiGpuContext(backends=backends, **options)
    ctx.calibrate()
    return ctx


@pytest.fixture(scope="module", params=["host", "vulkan"])
def single(request: pytest.FixtureRequest) -> Iterator[ag.MultiGpuContext]:
    ctx = _context([request.param])
    yield ctx
    ctx.close()


def _bits(x: Any) -> bytes:
    return np.ascontiguousarray(x).tobytes()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_tiny_call_takes_the_fast_path_with_the_split_paths_bits(
    single: ag.MultiGpuContext, name: str
) -> None:
    call = CALLS[name]
    fast = call(single)
    plan = single.last_plan
    assert plan is not None and plan.fast_path, plan
    assert len(plan.assignments) == 1
    assert plan.assignments[0].items == plan.items
    again = call(single)
    assert single.last_plan is not None and single.last_plan.fast_path
    assert _bits(again) == _bits(fast)
    # A strategy other than auto is the caller's choice of plan: planned, on the device's
    # pool (the host) or worker loop, never the fast path.
    reference = call(single, strategy="balanced")
    split_plan = single.last_plan
    assert split_plan is not None and not split_plan.fast_path, split_plan
    assert _bits(reference) == _bits(fast)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_split_over_two_lavapipe_devices_has_the_fast_paths_bits(name: str) -> None:
    fast_ctx = _context(["vulkan"])
    split_ctx = _context(["vulkan"], devices_per_adapter=2, strategy="balanced")
    try:
        fast = CALLS[name](fast_ctx)
        assert fast_ctx.last_plan is not None and fast_ctx.last_plan.fast_path
        split = CALLS[name](split_ctx)
        assert split_ctx.last_plan is not None and not split_ctx.last_plan.fast_path
        assert _bits(split) == _bits(fast)
    finally:
        fast_ctx.close()
        split_ctx.close()


def test_a_large_call_is_planned_and_split(single: ag.MultiGpuContext) -> None:
    n = 1 << 21
    a = np.ones((n, 8), dtype=np.float32)
    single.geometric_product(a, a)
    plan = single.last_plan
    assert plan is not None and not plan.fast_path, plan


def test_a_large_batch_has_the_fast_paths_bits_row_by_row(single: ag.MultiGpuContext) -> None:
    # The same rows inside a batch too large for the fast path: every row as computed alone.
    big = 1 << 21
    a = np.resize(A, (big, 8))
    b = np.resize(B, (big, 8))
    whole = single.geometric_product(a, b)
    assert single.last_plan is not None and not single.last_plan.fast_path
    small = single.geometric_product(A, B)
    assert single.last_plan is not None and single.last_plan.fast_path
    assert _bits(whole[: len(A)]) == _bits(small)


def test_a_fast_call_whose_device_fails_completes_on_the_others() -> None:
    ctx = _context(["vulkan"], devices_per_adapter=2)
    try:
        expected = ctx.geometric_product(A, B)
        plan = ctx.last_plan
        assert plan is not None and plan.fast_path
        chosen = plan.assignments[0].device_id
        ctx.inject_fault(chosen, 0)
        got = ctx.geometric_product(A, B)
        assert _bits(got) == _bits(expected)
        after = ctx.last_plan
        assert after is not None and not after.fast_path
        assert {a.device_id for a in after.assignments} == {1 - chosen}
        health = {d: h["healthy"] for d, h in ctx.health().items()}
        assert health == {chosen: False, 1 - chosen: True}
        # With the failed device out of the key, the next call is fast on the other one.
        ctx.geometric_product(A, B)
        again = ctx.last_plan
        assert again is not None and again.fast_path
        assert again.assignments[0].device_id == 1 - chosen
    finally:
        ctx.close()


def test_a_fast_call_is_profiled(single: ag.MultiGpuContext) -> None:
    single.geometric_product(A, B)
    with single.profile() as prof:
        single.geometric_product(A, B)
    assert single.last_plan is not None and single.last_plan.fast_path
    kinds = [e["kind"] for e in prof.events]
    assert "plan" in kinds and "kernel" in kinds
    kernel = [e for e in prof.events if e["kind"] == "kernel"]
    assert sum(e["items"] for e in kernel) == len(A)
    assert len(prof.calls) == 1


def test_a_repeated_tiny_call_runs_on_the_calling_thread(
    single: ag.MultiGpuContext, caplog: pytest.LogCaptureFixture
) -> None:
    # The core logs each completed chunk from the thread that ran it: a worker thread of its
    # own on the split path; the caller's own thread once the call is known to be short.
    single.geometric_product(A, B)
    with caplog.at_level(logging.DEBUG, logger="amari_gpu"):
        ag.reset_log_levels()
        single.geometric_product(A, B)
    ag.reset_log_levels()
    done = [r for r in caplog.records if "chunk 0" in r.getMessage() and "done" in r.getMessage()]
    assert done, [r.getMessage() for r in caplog.records]
    assert {r.threadName for r in done} == {"MainThread"}


def test_the_latency_bench_reports_every_family_with_the_engines_breakdown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``amari-gpu bench --family latency``: a row per family on the host device, each with
    its median, the engine's recorded steps and its fast-path record; the machine named; and
    the planner's cost alone for 8 and 16 made-up devices, on their own adapters or one."""
    import json

    from amari_gpu.tools.bench_latency import STEPS, calls
    from amari_gpu.tools.cli import main

    assert (
        main(["bench", "--family", "latency", "--backends", "host", "--rounds", "3", "--json"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["cpu"] and result["blas"]
    assert [d["label"] for d in result["devices"]] == ["host"]
    rows = result["rows"]
    assert [r["work"] for r in rows] == [c.work for c in calls()]
    for row in rows:
        assert row["median_us"] > 0 and row["native_us"] > 0
        assert set(row["steps_us"]) == set(STEPS)
        assert row["steps_us"]["kernel"] > 0
        assert row["fast_path"] is True
        thread = row["thread"]
        assert thread["wall_us"] > 0 and 0 <= thread["cpu_us"]
        assert thread["voluntary"] >= 0 and thread["involuntary"] >= 0
    planning = result["planning"]
    assert [(p["devices"], p["adapters"], p["strategy"]) for p in planning] == [
        (n, adapters, strategy)
        for n in (8, 16)
        for adapters in (n, 1)
        for strategy in ("latency", "auto")
    ]
    for p in planning:
        assert p["median_us"] > 0 and 1 <= p["busy"] <= p["devices"]
