"""``map_rows`` and grids that rebalance on a RayContext over a real Ray cluster of this
machine (a head and two more nodes with the ``amari_gpu`` resource; lavapipe on every
node): the local ``map_rows`` cases run here with ``default_ctx`` a RayContext (imported
from ``test_map_rows``, so both contexts run one set of cases), the same bits as one
MultiGpuContext for numpy and cluster-array operands, and ``stencil``/``life`` bands
moving between nodes by the balancer's rule with the bits unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import _cluster_helpers as helpers
import amari_gpu as ag
import numpy as np
import pytest
from _rows_helpers import AFFINE, THREE
from amari_gpu.cluster import ClusterArray
from test_dtypes_rows import OPS

# The local cases, run here on the RayContext below (the fixture of this module wins).
from test_map_rows import (  # noqa: F401
    ONE,
    data,
    test_a_wgsl_error_names_line_and_column,
    test_bad_arguments,
    test_four_inputs_with_broadcasts,
    test_one_input,
    test_only_broadcast_rows_give_one_row,
    test_out_is_written_and_reused,
    test_random_linear_row_functions_match_float64,
    test_signature_mismatches_say_which_part,
    test_three_inputs_helper_function_and_params,
    test_two_inputs_one_broadcast_with_params,
    test_zero_rows,
)
from test_map_rows_guards import GOOD, PER_ROW

BACKENDS = ["vulkan"]
RATE = 1e5
"""Cells/s injected for the grid balancer: its decisions then follow these rates, not round
times on a machine whose load sways them (slow enough that moving rows always pays)."""


@pytest.fixture(scope="module")
def default_ctx() -> Iterator[ag.RayContext]:
    """The local cases' context here: a RayContext over three loopback nodes, with chunks
    small enough that the cases' sizes give every node several."""
    with helpers.local_cluster(), ag.RayContext(backends=BACKENDS, chunk_items=512) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def local() -> ag.MultiGpuContext:
    """One context of the same devices (the reference bits)."""
    return ag.MultiGpuContext(backends=BACKENDS)


@pytest.mark.parametrize("strategy", ["balanced", "capability", "adaptive"])
def test_map_rows_bits_are_one_contexts(
    default_ctx: ag.RayContext,
    local: ag.MultiGpuContext,
    data: dict[str, np.ndarray],  # noqa: F811 - the fixture imported above
    strategy: str,
) -> None:
    arrays = (data["a2"], data["b4"], data["w1"])
    want = local.map_rows(THREE, *arrays, out_cols=1, params={"limit": 1.5})
    got = default_ctx.map_rows(THREE, *arrays, out_cols=1, params={"limit": 1.5}, strategy=strategy)
    assert got.tobytes() == want.tobytes()
    plan = default_ctx.last_plan
    assert plan is not None and sum(1 for w in plan.assignments if w.items) >= 2


def test_map_rows_on_cluster_arrays(
    default_ctx: ag.RayContext,
    local: ag.MultiGpuContext,
    data: dict[str, np.ndarray],  # noqa: F811 - the fixture imported above
) -> None:
    rc = default_ctx
    p3 = rc.asarray(data["p3"])
    want = local.map_rows(AFFINE, data["p3"], data["off"], out_cols=3, params={"scale": 0.5})
    got = rc.map_rows(AFFINE, p3, data["off"], out_cols=3, params={"scale": 0.5})
    assert isinstance(got, ClusterArray) and got.sharding == p3.sharding
    assert got.numpy().tobytes() == want.tobytes()
    # A chain: the result feeds the next call where it lives.
    again = rc.map_rows(ONE, got, out_cols=2)
    assert again.numpy().tobytes() == local.map_rows(ONE, want, out_cols=2).tobytes()
    out = rc.asarray(np.zeros((len(data["p3"]), 2), np.float32))
    assert rc.map_rows(ONE, p3, out_cols=2, out=out) is out
    assert out.numpy().tobytes() == local.map_rows(ONE, data["p3"], out_cols=2).tobytes()
    # The local errors: a kernel that does not compile, rows that differ, a freed array.
    with pytest.raises(ag.KernelCompileError, match="returns nothing"):
        rc.map_rows("fn row(a: array<f32, 3>) { }", p3, out_cols=2)
    with pytest.raises(ag.ShapeError, match=r"arrays\[1\]: expected shape \(5003, 4\)"):
        rc.map_rows(THREE, rc.asarray(data["a2"]), rc.asarray(data["b4"][:10]), out_cols=1)
    p3.free()
    with pytest.raises(ag.InvalidArgumentError, match=r"arrays\[0\]: expected a live"):
        rc.map_rows(ONE, p3, out_cols=2)


def test_a_skewed_split_is_rebalanced_across_nodes(
    default_ctx: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    rc = default_ctx
    for node in range(3):
        rc.inject_grid_rate(node, RATE)
    try:
        height = 300
        skewed = [200, 50, 50]
        grid = np.random.default_rng(2).random((height, 256), dtype=np.float32)
        got = rc.stencil(grid, 12, 0.2, "periodic", halo=1, split=skewed)
        layouts = rc.last_run.layouts
        assert [(layout["at_step"], layout["split"]) for layout in layouts] == [
            (0, [(0, 200), (1, 50), (2, 50)]),
            (1, [(0, 100), (1, 100), (2, 100)]),
        ]
        assert layouts[1]["seconds"] > 0
        static = rc.stencil(grid, 12, 0.2, "periodic", halo=1, split=skewed, rebalance=False)
        assert len(rc.last_run.layouts) == 1
        assert got.tobytes() == static.tobytes()
        assert got.tobytes() == local.stencil(grid, 12, 0.2, "periodic").tobytes()
        # Life's bands move the same way, its bits too.
        cells = (np.random.default_rng(3).random((300, 90)) < 0.3).astype(np.uint8)
        got = rc.life(cells, 9, 2, split=skewed)
        assert len(rc.last_run.layouts) >= 2
        assert rc.last_run.final_split == [(0, 100), (1, 100), (2, 100)]
        assert got.tobytes() == local.life(cells, 9).tobytes()
    finally:
        for node in range(3):
            rc.inject_grid_rate(node, None)


def test_rows_follow_the_nodes_rates(default_ctx: ag.RayContext, local: ag.MultiGpuContext) -> None:
    rc = default_ctx
    rc.inject_grid_rate(0, 2 * RATE)
    rc.inject_grid_rate(1, RATE)
    rc.inject_grid_rate(2, RATE)
    try:
        grid = np.random.default_rng(6).random((400, 128), dtype=np.float32)
        got = rc.stencil(grid, 8, 0.2, "dirichlet", halo=2, split=[134, 133, 133])
        (n0, rows0), (n1, rows1), (n2, rows2) = rc.last_run.final_split
        assert (n0, n1, n2) == (0, 1, 2) and rows0 + rows1 + rows2 == 400
        # Twice the rate, about twice the rows (ghost rows count as work).
        assert abs(rows0 - 200) <= 4 and abs(rows1 - rows2) <= 2, rc.last_run.layouts
        assert got.tobytes() == local.stencil(grid, 8, 0.2, "dirichlet").tobytes()
    finally:
        for node in range(3):
            rc.inject_grid_rate(node, None)


def test_grid_checks_are_the_cores(default_ctx: ag.RayContext, local: ag.MultiGpuContext) -> None:
    rc = default_ctx
    grid = np.zeros((30, 20), np.float32)
    grid[4, 5] = np.inf
    with pytest.raises(ag.InvalidArgumentError) as e:
        rc.stencil(grid, 2, 0.2, "periodic")
    with pytest.raises(ag.InvalidArgumentError) as e_local:
        local.stencil(grid, 2, 0.2, "periodic")
    assert str(e.value) == str(e_local.value)
    with pytest.raises(ag.InvalidArgumentError, match="cells_per_s"):
        rc.inject_grid_rate(0, float("nan"))
    with pytest.raises(ag.InvalidArgumentError, match="device_id"):
        rc.inject_grid_rate(7, RATE)


def test_a_loop_past_lavapipes_cap_is_the_callers_error_not_a_nodes(
    default_ctx: ag.RayContext,
) -> None:
    # Row i loops a[i] times: one row of 100,000 (past the 65,535 iterations lavapipe runs)
    # among rows of 10, in the last node's rows, for numpy rows and a cluster array alike.
    rc = default_ctx
    counts = np.full((3000, 1), 10, np.float32)
    assert np.array_equal(rc.map_rows(PER_ROW, counts, out_cols=1), counts)
    counts[2900] = 100_000
    for operand in (counts, rc.asarray(counts)):
        with pytest.raises(ag.KernelCompileError, match=r"65,535 iterations"):
            rc.map_rows(PER_ROW, operand, out_cols=1)
    assert all(h["healthy"] for h in rc.health().values()), rc.health()
    ones = rc.asarray(np.ones((3000, 1), np.float32))
    assert np.array_equal(rc.map_rows(GOOD, ones, out_cols=1).numpy(), np.full((3000, 1), 2.0))


def test_float64_rows_run_in_float64_after_the_shape_checks(
    default_ctx: ag.RayContext, local: ag.MultiGpuContext
) -> None:
    """float64 rows compute in float64 as one context's (on one node with a float64 wgpu
    device); a kernel written for float32 rows and a shape error are reported as locally,
    and float32 runs on request."""
    rows = np.random.default_rng(64).standard_normal((800, 2))
    got = default_ctx.map_rows(OPS, rows, out_cols=3)
    want = local.map_rows(OPS, rows, out_cols=3)
    assert got.dtype == want.dtype == np.float64
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    for bad in (np.ones((8, 3)), np.ones((2, 2, 3))):
        with pytest.raises(ag.AmariGpuError) as e:
            default_ctx.map_rows(ONE, bad, out_cols=2)
        with pytest.raises(type(e.value)) as e_local:
            local.map_rows(ONE, bad, out_cols=2)
        assert str(e.value) == str(e_local.value)
    ours = default_ctx.map_rows(ONE, rows[:, :1].repeat(3, 1), out_cols=2, dtype=np.float32)
    assert ours.dtype == np.float32 and ours.shape == (800, 2)


def _stencil(ctx: object, grid: np.ndarray, split: list[int]) -> object:
    return ctx.stencil(grid, 2, 0.2, "dirichlet", split=split)  # type: ignore[attr-defined]


def _life(ctx: object, grid: np.ndarray, split: list[int]) -> object:
    return ctx.life((grid != 0).astype(np.uint8), 2, split=split)  # type: ignore[attr-defined]


@pytest.mark.parametrize("split", [[10, 10, 11], [31, 0, 0], [10, 10], [0, 30, 2**64 - 1]])
@pytest.mark.parametrize("scaled", [False, True])
def test_a_bad_split_gets_one_contexts_error(
    default_ctx: ag.RayContext, split: list[int], scaled: bool
) -> None:
    # The core checks the split for both (an entry per device, adding up to the grid's
    # rows), before anything runs: also for a grid the core scales, which the cluster runs
    # whole on one node.
    grid = np.zeros((30, 20), np.float32)
    grid[3, 4] = 3e38 if scaled else 1.0
    before = grid.copy()
    with ag.MultiGpuContext(backends=BACKENDS, devices_per_adapter=3) as three:
        for run in (_stencil, _life):
            with pytest.raises(ag.InvalidArgumentError) as e_local:
                run(three, grid, split)
            with pytest.raises(ag.InvalidArgumentError) as e:
                run(default_ctx, grid, split)
            assert str(e.value) == str(e_local.value)
            assert str(e.value).startswith("split: expected ")
    assert np.array_equal(grid, before)
