"""``Workload``, ``MultiGpuContext.distribute_workload`` and ``Plan``: how work is split.

Property-based checks (hypothesis) of every plan on a context of four devices in two backends:
the assignments cover ``[0, items)`` exactly once, contiguously, in item order and in whole
chunks of a grid that depends only on the workload (compared with contexts of one, two and four
devices); the efficiency is the lower bound over the makespan; ``auto`` says what it chose. Also
argument validation, the context's default strategy, ``Plan``'s sequence behaviour, and that the
plan a kernel call follows (``ctx.last_plan``) is the one ``distribute_workload`` predicts.
"""

from __future__ import annotations

import dataclasses
import math

import amari_gpu
import numpy as np
import pytest
from amari_gpu import (
    STRATEGIES,
    AmariGpuError,
    DeviceWorkload,
    InvalidArgumentError,
    MultiGpuContext,
    Plan,
    Workload,
)
from hypothesis import given, settings
from hypothesis import strategies as st

GP_BYTES_IN = 64  # two (N, 8) float32 inputs per item
GP_BYTES_OUT = 32  # one (N, 8) float32 output per item
GP_FLOPS = 128  # the generated Cl(3,0) product: 64 fused multiply-adds per item


def _gp_workload(items: int) -> Workload:
    return Workload("geometric_product", items, GP_BYTES_IN, GP_BYTES_OUT, GP_FLOPS)


@pytest.fixture(scope="module")
def sized_contexts(all_adapters) -> dict[int, MultiGpuContext]:
    """Contexts of 1, 2 and 4 logical devices on the first adapter, default chunking."""
    contexts = {k: MultiGpuContext(backends=["vulkan"], devices_per_adapter=k) for k in (1, 2, 4)}
    for k, ctx in contexts.items():
        assert len(ctx.devices) == k
    return contexts


def check_plan(plan: Plan, workload: Workload, requested: str, ctx: MultiGpuContext) -> None:
    """Every documented invariant of a plan."""
    assert isinstance(plan, Plan)
    assert plan.requested_strategy == requested
    assert plan.strategy in STRATEGIES and plan.strategy != "auto"
    if requested != "auto":
        assert plan.strategy == requested
    assert plan.items == workload.items
    assert isinstance(plan.chunk_items, int) and plan.chunk_items >= 1
    assert plan.n_chunks == -(-workload.items // plan.chunk_items)
    assert isinstance(plan.assignments, tuple)
    assert len(plan) == len(plan.assignments)
    assert list(plan) == list(plan.assignments)

    healthy = {d for d, h in ctx.health().items() if h["healthy"]}
    next_item = next_chunk = 0
    for index, part in enumerate(plan):
        assert isinstance(part, DeviceWorkload)
        assert plan[index] is part
        assert part.device_id in healthy
        # Contiguous, in item order, made of whole chunks of the grid.
        assert part.start == next_item
        assert part.first_chunk == next_chunk
        assert part.chunks >= 1
        assert part.start == part.first_chunk * plan.chunk_items
        expected_stop = min((part.first_chunk + part.chunks) * plan.chunk_items, plan.items)
        assert part.stop == expected_stop
        assert part.items == part.stop - part.start > 0
        assert math.isfinite(part.estimated_seconds) and part.estimated_seconds > 0
        next_item, next_chunk = part.stop, part.first_chunk + part.chunks
    assert next_item == plan.items  # [0, items) exactly once
    assert next_chunk == plan.n_chunks
    assert len({part.device_id for part in plan}) == len(plan)

    if plan.items == 0:
        assert plan.assignments == ()
        assert plan.n_chunks == 0
        assert plan.estimated_makespan_s == 0.0
        assert plan.efficiency == 1.0
    else:
        assert len(plan) >= 1
        assert plan.estimated_makespan_s == max(p.estimated_seconds for p in plan)
        assert math.isfinite(plan.lower_bound_s) and plan.lower_bound_s > 0
        assert plan.lower_bound_s <= plan.estimated_makespan_s * (1 + 1e-9)
        assert 0 < plan.efficiency <= 1
        assert math.isclose(
            plan.efficiency, plan.lower_bound_s / plan.estimated_makespan_s, rel_tol=1e-9
        )


# --- strategies -----------------------------------------------------------------------------


def test_strategies_are_the_documented_ones():
    expected = ("balanced", "capability", "memory", "latency", "adaptive", "auto")
    assert amari_gpu.STRATEGIES == expected


@pytest.mark.parametrize("strategy", ["fastest", "Balanced", "", None, 1])
def test_context_rejects_an_unknown_strategy(strategy):
    with pytest.raises(InvalidArgumentError, match=r"^strategy: expected one of") as info:
        MultiGpuContext(backends=["vulkan"], strategy=strategy)
    assert isinstance(info.value, ValueError)


def test_distribute_workload_rejects_an_unknown_strategy(engine_ctx):
    with pytest.raises(InvalidArgumentError, match=r"^strategy: .*'greedy'"):
        engine_ctx.distribute_workload(_gp_workload(10), strategy="greedy")


def test_kernel_call_rejects_an_unknown_strategy(engine_ctx):
    a = np.ones((3, 8), dtype=np.float32)
    before = engine_ctx.last_plan
    with pytest.raises(InvalidArgumentError, match=r"^strategy: .*'greedy'"):
        engine_ctx.geometric_product(a, a, strategy="greedy")
    assert engine_ctx.last_plan is before


def test_the_context_strategy_is_the_default(all_adapters):
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=2, strategy="balanced")
    assert ctx.last_plan is None
    plan = ctx.distribute_workload(_gp_workload(100_000))
    assert (plan.requested_strategy, plan.strategy) == ("balanced", "balanced")
    a = np.ones((20_000, 8), dtype=np.float32)
    ctx.geometric_product(a, a)
    assert (ctx.last_plan.requested_strategy, ctx.last_plan.strategy) == ("balanced", "balanced")
    ctx.geometric_product(a, a, strategy="latency")
    assert (ctx.last_plan.requested_strategy, ctx.last_plan.strategy) == ("latency", "latency")


def test_auto_is_the_default_and_says_what_it_chose(all_adapters):
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=2)
    plan = ctx.distribute_workload(_gp_workload(1_000_000))
    assert plan.requested_strategy == "auto"
    assert plan.strategy in {"balanced", "capability", "memory", "latency", "adaptive"}


# --- workloads ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"items": -1}, r"^items: expected an integer >= 0, got -1"),
        ({"items": 2.0}, r"^items: expected an integer >= 0, got 2\.0"),
        ({"items": "3"}, r"^items: expected an integer >= 0, got '3'"),
        ({"items": True}, r"^items: expected an integer >= 0, got True"),
        ({"items": None}, r"^items: expected an integer >= 0, got None"),
        ({"bytes_in_per_item": float("nan")}, r"^bytes_in_per_item: .*got nan"),
        ({"bytes_in_per_item": -1.0}, r"^bytes_in_per_item: .*got -1\.0"),
        ({"bytes_in_per_item": "64"}, r"^bytes_in_per_item: .*got '64'"),
        ({"bytes_out_per_item": float("inf")}, r"^bytes_out_per_item: .*got inf"),
        ({"bytes_out_per_item": -0.5}, r"^bytes_out_per_item: .*got -0\.5"),
        ({"flops_per_item": float("-inf")}, r"^flops_per_item: .*got -inf"),
        ({"flops_per_item": float("nan")}, r"^flops_per_item: .*got nan"),
        ({"flops_per_item": False}, r"^flops_per_item: .*got False"),
        ({"kernel": ""}, r"^kernel: expected a kernel name"),
        ({"kernel": 7}, r"^kernel: expected a kernel name"),
    ],
)
def test_workload_rejects_bad_fields(kwargs, message):
    fields = {
        "kernel": "geometric_product",
        "items": 10,
        "bytes_in_per_item": 64.0,
        "bytes_out_per_item": 32.0,
        "flops_per_item": 120.0,
    }
    fields.update(kwargs)
    with pytest.raises(InvalidArgumentError, match=message) as info:
        Workload(**fields)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("items", [0, 1, 1000])
def test_a_workload_that_costs_nothing_is_refused_when_distributed(engine_ctx, items):
    workload = Workload("geometric_product", items, 0, 0, 0.0)  # valid field by field
    with pytest.raises(AmariGpuError, match=r"^workload: expected an item to cost something"):
        engine_ctx.distribute_workload(workload)
    with pytest.raises(ValueError, match=r"bytes_in_per_item, bytes_out_per_item and flops"):
        engine_ctx.distribute_workload(workload, strategy="balanced")


def test_distribute_workload_needs_a_workload(engine_ctx):
    with pytest.raises(InvalidArgumentError, match=r"^workload: expected an amari_gpu\.Workload"):
        engine_ctx.distribute_workload({"kernel": "geometric_product", "items": 10})


def test_workload_and_plan_are_frozen(engine_ctx):
    workload = _gp_workload(100_000)
    with pytest.raises(dataclasses.FrozenInstanceError, match="items"):
        workload.items = 3  # type: ignore[misc]
    plan = engine_ctx.distribute_workload(workload, "balanced")
    with pytest.raises(dataclasses.FrozenInstanceError, match="strategy"):
        plan.strategy = "latency"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="start"):
        plan[0].start = 1  # type: ignore[misc]


# --- plans ----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kernel", ["geometric_product", "geometric_algebra", "not_a_kernel"])
def test_plans_of_known_and_unknown_kernels(engine_ctx, strategy, kernel):
    workload = Workload(kernel, 1_000_003, 64, 32, 120)
    check_plan(engine_ctx.distribute_workload(workload, strategy), workload, strategy, engine_ctx)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_empty_workload_has_an_empty_plan(engine_ctx, strategy):
    workload = _gp_workload(0)
    plan = engine_ctx.distribute_workload(workload, strategy)
    check_plan(plan, workload, strategy, engine_ctx)
    assert len(plan) == 0 and list(plan) == []


def test_balanced_gives_every_device_as_many_chunks_within_one(engine_ctx):
    workload = _gp_workload(10_000_019)
    plan = engine_ctx.distribute_workload(workload, "balanced")
    check_plan(plan, workload, "balanced", engine_ctx)
    assert [p.device_id for p in plan] == [0, 1, 2, 3]
    chunks = [p.chunks for p in plan]
    assert max(chunks) - min(chunks) <= 1
    # The extra chunks go to the lowest ids.
    assert chunks == sorted(chunks, reverse=True)


def test_plan_is_a_sequence_of_device_workloads(engine_ctx):
    plan = engine_ctx.distribute_workload(_gp_workload(3_000_000), "balanced")
    assert len(plan) == 4
    assert plan[-1] is plan.assignments[-1]
    assert plan[1:3] == plan.assignments[1:3]
    assert tuple(iter(plan)) == plan.assignments
    with pytest.raises(IndexError, match="index out of range"):
        plan[len(plan)]


@settings(max_examples=60, deadline=None)
@given(
    items=st.one_of(
        st.integers(min_value=0, max_value=10**10),
        st.integers(min_value=0, max_value=100_000),
        st.sampled_from([0, 1, 2, 10**10]),
    ),
    bytes_in=st.floats(min_value=1, max_value=1024),
    bytes_out=st.floats(min_value=1, max_value=1024),
    flops=st.floats(min_value=0, max_value=1e5),
    strategy=st.sampled_from(STRATEGIES),
)
def test_every_plan_keeps_its_invariants(
    engine_ctx, sized_contexts, items, bytes_in, bytes_out, flops, strategy
):
    workload = Workload("geometric_product", items, bytes_in, bytes_out, flops)
    plan = engine_ctx.distribute_workload(workload, strategy)
    check_plan(plan, workload, strategy, engine_ctx)
    # The grid depends only on the workload: not on the device set, nor on the strategy.
    for ctx in sized_contexts.values():
        for other_strategy in STRATEGIES:
            other = ctx.distribute_workload(workload, other_strategy)
            assert (other.chunk_items, other.n_chunks) == (plan.chunk_items, plan.n_chunks)


@pytest.mark.parametrize("n", [1, 8_192, 100_003])
def test_kernel_calls_follow_the_predicted_plan_on_a_device_independent_grid(
    sized_contexts, engine_ctx, reference_batch, n
):
    a, b, _ = reference_batch(n)
    grids = set()
    for ctx in [*sized_contexts.values(), engine_ctx]:
        for strategy in ("balanced", "latency", "capability", "memory"):
            predicted = ctx.distribute_workload(_gp_workload(n), strategy)
            ctx.geometric_product(a, b, strategy=strategy)
            assert ctx.last_plan == predicted
            check_plan(ctx.last_plan, _gp_workload(n), strategy, ctx)
            grids.add((ctx.last_plan.chunk_items, ctx.last_plan.n_chunks))
    assert len(grids) == 1, grids


def test_chunk_items_override_sets_the_grid(all_adapters):
    ctx = MultiGpuContext(backends=["vulkan"], devices_per_adapter=3, chunk_items=4096)
    workload = _gp_workload(100_003)
    for strategy in STRATEGIES:
        plan = ctx.distribute_workload(workload, strategy)
        check_plan(plan, workload, strategy, ctx)
        assert (plan.chunk_items, plan.n_chunks) == (4096, 25)


def test_planning_writes_nothing_to_stderr(engine_ctx, capfd):
    capfd.readouterr()
    for strategy in STRATEGIES:
        engine_ctx.distribute_workload(_gp_workload(5_000_011), strategy)
    captured = capfd.readouterr()
    assert (captured.out, captured.err) == ("", "")


def test_the_largest_item_count_is_planned(engine_ctx):
    workload = _gp_workload(2**64 - 1)
    plan = engine_ctx.distribute_workload(workload, "balanced")
    check_plan(plan, workload, "balanced", engine_ctx)


def test_an_item_count_beyond_u64_is_an_invalid_argument():
    pattern = r"^items: .*2\*\*64 - 1.*got 18446744073709551616"
    with pytest.raises(InvalidArgumentError, match=pattern):
        _gp_workload(2**64)


def test_numpy_integer_item_counts_are_accepted(engine_ctx):
    workload = _gp_workload(np.int64(1000))
    assert type(workload.items) is int
    assert engine_ctx.distribute_workload(workload).items == 1000


@pytest.mark.parametrize("adapter", [0, 1])
def test_after_a_few_calls_the_plan_learns_from_what_calls_took(adapter):
    # The history learns one observed/predicted ratio per device and call (the ratio of the
    # summed chunk times), and the next plans use it. How close the learned estimate lands
    # is a measurement (benches/model.py prints it per adapter), not a test: on a busy
    # machine any bound on a timing ratio fails.
    n = 400_000
    a = np.random.default_rng(21).standard_normal((n, 8), dtype=np.float32)
    ctx = MultiGpuContext(adapters=[adapter], chunk_items=16_384)
    untrained = ctx.distribute_workload(_gp_workload(n)).estimated_makespan_s
    for _ in range(4):
        ctx.geometric_product(a, a)
    trained = ctx.distribute_workload(_gp_workload(n)).estimated_makespan_s
    assert math.isfinite(trained) and trained > 0
    assert trained != untrained, "the plan's estimate ignores what the calls took"


def test_assigning_the_strategy_changes_the_default_of_later_calls(engine_ctx):
    workload = _gp_workload(1_000_000)
    assert engine_ctx.strategy == "auto"
    try:
        engine_ctx.strategy = "balanced"
        assert engine_ctx.strategy == "balanced"
        plan = engine_ctx.distribute_workload(workload)
        assert plan.requested_strategy == "balanced" and plan.strategy == "balanced"
        a = np.ones((300, 8), dtype=np.float32)
        engine_ctx.geometric_product(a, a)
        assert engine_ctx.last_plan is not None
        assert engine_ctx.last_plan.requested_strategy == "balanced"
        # A call's own strategy still wins over the default.
        assert engine_ctx.distribute_workload(workload, "memory").requested_strategy == "memory"
        with pytest.raises(InvalidArgumentError, match=r"^strategy: expected one of .*got 'fast'"):
            engine_ctx.strategy = "fast"
        assert engine_ctx.strategy == "balanced"
    finally:
        engine_ctx.strategy = "auto"
    assert engine_ctx.distribute_workload(workload).requested_strategy == "auto"


def test_name_lists_come_from_the_core():
    from amari_gpu import _native, domain, tropical
    from amari_gpu._adapters import BACKENDS, DEVICE_TYPES

    assert amari_gpu.STRATEGIES == _native.STRATEGIES
    assert tropical.SEMIRINGS == _native.SEMIRINGS == ("max_plus", "min_plus")
    assert domain.BOUNDARIES == _native.BOUNDARIES == ("dirichlet", "periodic")
    assert BACKENDS == ("vulkan", "metal", "dx12", "gl", "host")
    assert "cpu" in DEVICE_TYPES


def test_a_memory_plan_of_more_than_the_budgets_hold_splits_by_the_budgets(engine_ctx):
    """The memory strategy reads each device's budget (half the host's available memory for
    the four CPU adapters' devices here) where it plans, and nowhere else: a problem far
    larger than their budgets together streams through them in about equal rounds, so each
    of the four equal budgets gets about a quarter of the chunks; the capability plan of the
    same problem follows the devices' speeds instead."""
    budgets = [d.capabilities.memory_budget_bytes for d in engine_ctx.devices]
    assert all(isinstance(b, int) and b > 0 for b in budgets), budgets
    # 10^12 items of 100 bytes: 100 TB, far past any machine's memory; planned, never run.
    workload = Workload("geometric_product", 10**12, 64, 36, GP_FLOPS)
    per_device = {}
    for strategy in ("memory", "capability"):
        plan = engine_ctx.distribute_workload(workload, strategy)
        assert plan.strategy == strategy
        shares = [0] * len(engine_ctx.devices)
        for part in plan.assignments:
            shares[part.device_id] += part.chunks
        assert sum(shares) == plan.n_chunks
        per_device[strategy] = shares
    memory = per_device["memory"]
    assert max(memory) <= 1.05 * min(memory), per_device
    assert memory != per_device["capability"], per_device
