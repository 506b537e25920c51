"""Domain decomposition as an engine: argument checks (inputs untouched), rebalancing from
measured round times, recovery from a failing device, the profiler's view of compute and
exchange, and a grid of 8192 x 8192."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _domain_helpers import heat_reference, life_reference


@pytest.fixture(scope="module")
def ctx() -> ag.MultiGpuContext:
    return ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)


@pytest.mark.parametrize("alpha", [0.2500001, 0.3, 1.0, -0.01, float("nan"), float("inf")])
def test_alpha_outside_the_stable_range_is_refused(ctx, alpha):
    with pytest.raises(ValueError, match=r"alpha: expected 0 <= alpha <= 0.25"):
        ctx.stencil(np.zeros((4, 4), np.float32), 1, alpha=alpha)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"grid": np.zeros(5, np.float32)}, r"grid: expected shape \(H, W\).*got \(5,\)"),
        ({"grid": np.zeros((0, 3), np.float32)}, r"grid: expected shape \(H, W\).*got \(0, 3\)"),
        ({"steps": -1}, r"steps: expected an integer >= 0, got -1"),
        ({"steps": 2.5}, r"steps: expected an integer >= 0, got 2.5"),
        ({"halo": 0}, r"halo: expected an integer >= 1, got 0"),
        ({"boundary": "neumann"}, r"boundary: expected one of \['dirichlet', 'periodic'\]"),
        ({"split": [1, 2, 3]}, r"split: expected rows for each of the 2 devices, got 3"),
        ({"split": [2, 1]}, r"split: expected rows adding up to the grid's 4 rows, got 3"),
        ({"split": [5, -1]}, r"split: expected integers >= 0 \(at most 2\*\*64 - 1\), got -1"),
    ],
)
def test_bad_stencil_arguments_name_what_was_expected(ctx, kwargs, match):
    args = {"grid": np.ones((4, 4), np.float32), "steps": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        ctx.stencil(**args)


def test_non_finite_and_complex_grids_are_refused(ctx):
    grid = np.ones((3, 4), np.float32)
    grid[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"grid: expected finite values, found nan at \(2, 1\)"):
        ctx.stencil(grid, 1)
    with pytest.raises(TypeError, match="grid: expected an array of real numbers"):
        ctx.stencil(np.ones((3, 3), np.complex64), 1)


@pytest.mark.parametrize("backend", ["host", "mixed", "lavapipe"])
def test_a_grid_that_is_not_finite_is_refused_whatever_it_is_written_into(
    backend, host, mixed, ctx
):
    """A new result array is written while the run checks the grid's cells (as it reads
    them: a refused grid's run shows in the profiler); ``out=`` and a run with
    ``progress=`` are checked before anything is written, run or reported. The error is the
    same in each, wherever the cell is: in the first or last rows (the host's pass scans
    each row after its first read, and leaves a band's last two rows for after the run), or
    among rows only lavapipe's bands hold. Without the host device every grid is checked
    before its run."""
    ctx = {"host": host, "mixed": mixed, "lavapipe": ctx}[backend]
    rng = np.random.default_rng(5)
    for row, col, bad, found in [
        (0, 3, np.nan, "nan"),
        (63, 60, -np.inf, "-inf"),
        (40, 0, np.inf, "inf"),
    ]:
        grid = rng.random((64, 64), dtype=np.float32)
        grid[row, col] = bad
        before = grid.copy()
        match = rf"grid: expected finite values, found {found} at \({row}, {col}\)"
        # Refused after its run (which the profiler shows), or before any (out=).
        with ctx.profile() as prof, pytest.raises(ValueError, match=match):
            ctx.stencil(grid, 8, 0.2, "periodic", halo=8)
        ran = any(e["kind"] == "kernel" for e in prof.events)
        assert ran == (backend != "lavapipe"), prof.events
        out = np.full_like(grid, 7.0)
        with ctx.profile() as prof, pytest.raises(ValueError, match=match):
            ctx.stencil(grid, 8, 0.2, "periodic", halo=8, out=out)
        assert prof.events == [], "refused before any work"
        assert (out == 7.0).all(), "out= is not written"
        calls: list[tuple[int, int]] = []
        with pytest.raises(ValueError, match=match):
            ctx.stencil(
                grid,
                8,
                0.2,
                "periodic",
                halo=2,
                progress=lambda d, t, seen=calls: seen.append((d, t)),
            )
        assert calls == [], "no progress is reported for a refused grid"
        np.testing.assert_array_equal(grid, before)


@pytest.mark.parametrize("backend", ["host", "mixed"])
def test_a_grid_near_the_float32_limit_gives_the_same_bits_into_any_output(backend, host, mixed):
    """A new result array finds a grid that must be scaled as its run reads it, and runs it
    again scaled: the bits of the run into ``out=`` (checked, and scaled, first)."""
    ctx = host if backend == "host" else mixed
    grid = np.random.default_rng(6).uniform(-1, 1, (32, 64)).astype(np.float32) * np.float32(3e38)
    out = np.empty_like(grid)
    into = ctx.stencil(grid, 6, 0.25, "periodic", halo=3, out=out)
    new = ctx.stencil(grid, 6, 0.25, "periodic", halo=3)
    assert np.isfinite(new).all()
    np.testing.assert_array_equal(new.view(np.uint32), into.view(np.uint32))
    reference = heat_reference(grid.astype(np.float64), 6, 0.25, "periodic")
    np.testing.assert_allclose(new, reference, rtol=1e-4, atol=3e38 * 1e-6)


def test_life_cells_must_be_zero_or_one(ctx):
    grid = np.zeros((3, 4), np.int64)
    grid[1, 3] = 2
    with pytest.raises(ValueError, match=r"grid: expected cells 0 or 1, found 2 at \(1, 3\)"):
        ctx.life(grid, 1)
    with pytest.raises(TypeError, match="grid: expected an array of 0/1 cells"):
        ctx.life(np.zeros((3, 3), np.complex64), 1)
    # 256 must not wrap to 0 on the way to uint8.
    grid[1, 3] = 256
    with pytest.raises(ValueError, match="found 256"):
        ctx.life(grid, 1)


def test_inputs_are_never_modified_and_other_dtypes_are_converted(ctx):
    grid = np.random.default_rng(0).random((9, 7))  # float64
    before = grid.copy()
    got = ctx.stencil(grid, 5, 0.2, "periodic", 2)
    np.testing.assert_array_equal(grid, before)
    np.testing.assert_allclose(
        got, heat_reference(grid.astype(np.float32), 5, 0.2, "periodic"), atol=1e-5
    )
    cells = np.random.default_rng(1).random((9, 7)) < 0.5  # bool
    before_cells = cells.copy()
    np.testing.assert_array_equal(ctx.life(cells, 5), life_reference(cells, 5))
    np.testing.assert_array_equal(cells, before_cells)


# Rates injected for the rebalancer (inject_grid_rate: test-only): its decisions then follow
# the given rates, not round times measured on a machine whose load sways them. Slow enough
# (seconds per round) that moving rows always pays; the rounds still run at their own speed.
RATE = 1e5


def test_a_skewed_split_is_rebalanced_and_gives_the_static_bits():
    # Two logical devices of one adapter judged equally fast: a 3:1 split of the rows is
    # relaid out 1:1 after the first round (the balancer measures one round before it
    # judges a layout), and then kept.
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)
    for device in (0, 1):
        ctx.inject_grid_rate(device, RATE)
    height = 2048
    skewed = [height * 3 // 4, height // 4]
    grid = np.random.default_rng(2).random((height, 512), dtype=np.float32)
    got = ctx.stencil(grid, 30, 0.2, "periodic", halo=1, split=skewed)
    layouts = ctx.last_run.layouts
    assert [(layout["at_step"], layout["split"]) for layout in layouts] == [
        (0, [(0, skewed[0]), (1, skewed[1])]),
        (1, [(0, height // 2), (1, height // 2)]),
    ]
    # The new layout was paid for in measured seconds.
    assert layouts[1]["seconds"] > 0
    static = ctx.stencil(grid, 30, 0.2, "periodic", halo=1, split=skewed, rebalance=False)
    assert len(ctx.last_run.layouts) == 1
    assert got.tobytes() == static.tobytes()
    np.testing.assert_allclose(got, heat_reference(grid, 30, 0.2, "periodic"), atol=1e-5)


def test_rows_follow_the_devices_rates():
    # Device 0 judged 3x as fast as device 1: an even split becomes 3:1 (ghost rows count as
    # work, so the balancer's figure is within a few rows of it), and the bits stay the
    # static split's.
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)
    ctx.inject_grid_rate(0, 3 * RATE)
    ctx.inject_grid_rate(1, RATE)
    height = 1024
    grid = np.random.default_rng(6).random((height, 256), dtype=np.float32)
    got = ctx.stencil(grid, 12, 0.2, "dirichlet", halo=2)
    layouts = ctx.last_run.layouts
    assert layouts[0]["split"] == [(0, height // 2), (1, height // 2)]
    assert len(layouts) >= 2 and layouts[1]["at_step"] == 2
    (d0, rows0), (d1, rows1) = layouts[-1]["split"]
    assert (d0, d1) == (0, 1) and rows0 + rows1 == height
    assert abs(rows0 - 3 * height // 4) <= 4, layouts
    static = ctx.stencil(grid, 12, 0.2, "dirichlet", halo=2, rebalance=False)
    assert got.tobytes() == static.tobytes()


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), float("inf"), "fast"])
def test_an_injected_rate_must_be_a_positive_number(ctx, rate):
    with pytest.raises(ag.InvalidArgumentError, match=r"cells_per_s: expected a finite number"):
        ctx.inject_grid_rate(0, rate)
    with pytest.raises(ag.InvalidArgumentError, match=r"device_id: expected an integer in"):
        ctx.inject_grid_rate(5, 1.0)


def test_a_device_failing_mid_run_is_left_out_and_the_result_is_still_right():
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=3)
    grid = (np.random.default_rng(4).random((90, 70)) < 0.35).astype(np.uint8)
    ctx.inject_fault(1, after_chunks=3)  # fails when it starts its fourth round
    got = ctx.life(grid, 20, halo=2)
    np.testing.assert_array_equal(got, life_reference(grid, 20))
    report = ctx.last_run
    assert [device for device, _ in report.failures] == [1]
    assert "injected fault" in report.failures[0][1]
    assert ctx.health()[1]["healthy"] is False
    assert {d for d, rows in report.final_split if rows} == {0, 2}
    # Later calls avoid it; reset_health brings it back.
    ctx.life(grid, 3)
    assert 1 not in {d for d, rows in ctx.last_run.final_split}
    ctx.reset_health()
    ctx.life(grid, 3)
    assert 1 in {d for d, rows in ctx.last_run.final_split if rows}


def test_every_device_failing_raises_device_lost():
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)
    ctx.inject_fault(0, 1)
    ctx.inject_fault(1, 1)
    with pytest.raises(ag.DeviceLostError, match="no healthy device left"):
        ctx.stencil(np.ones((8, 8), np.float32), 6)


def test_the_profiler_shows_compute_and_exchange_for_every_round(ctx):
    grid = np.random.default_rng(5).random((64, 48), dtype=np.float32)
    with ctx.profile() as prof:
        ctx.stencil(grid, 8, 0.1, "dirichlet", halo=2, rebalance=False)
    events = prof.events
    report = ctx.last_run
    rounds = len(report.rounds)
    assert rounds == 4
    kernels = [e for e in events if e["kind"] == "kernel"]
    exchanges = [e for e in events if e["kind"] == "exchange"]
    assert len(exchanges) == rounds and all(e["device"] is None for e in exchanges)
    assert {(e["device"], e["chunk"]) for e in kernels} == {
        (d, r) for d in (0, 1) for r in range(rounds)
    }
    # Kernel events count the cells each device computed, ghost-row work included.
    for r, round_report in enumerate(report.rounds):
        for dev in round_report["devices"]:
            (event,) = [e for e in kernels if e["device"] == dev["device"] and e["chunk"] == r]
            assert event["items"] == dev["work"] > 0
    assert any(e["kind"] == "readback" and e["device"] is None for e in events)
    summary = prof.summary()
    assert summary["makespan_s"] > 0
    assert prof.kernel_calls[0]["kernel"] == "domain/heat"


def test_grid_kernels_are_timed_with_gpu_timestamps_when_asked():
    ctx = ag.MultiGpuContext(adapters=[0, 1], gpu_timestamps=True)
    cells = (np.random.default_rng(12).random((96, 40)) < 0.4).astype(np.uint8)
    with ctx.profile() as prof:
        got = ctx.life(cells, 6, halo=2)
    np.testing.assert_array_equal(got, life_reference(cells, 6))
    kernels = [e for e in prof.events if e["kind"] == "kernel"]
    assert {e["device"] for e in kernels} == {0, 1}
    for e in kernels:
        want = "gpu" if ctx.devices[e["device"]].gpu_timestamps else "host"
        assert e["clock"] == want and e["duration_s"] > 0
    assert any(e["clock"] == "gpu" for e in kernels)


def test_report_figures_are_consistent(ctx):
    grid = np.random.default_rng(6).random((128, 128), dtype=np.float32)
    ctx.stencil(grid, 12, 0.1, "periodic", halo=4)
    r = ctx.last_run
    assert [x["steps"] for x in r.rounds] == [4, 4, 4]
    assert 0 < r.exchange_share < 1
    assert r.step_s == pytest.approx(r.rounds_s / 12)
    assert r.wall_s >= r.rounds_s
    for round_report in r.rounds:
        assert round_report["exchange_s"] <= round_report["wall_s"]
        assert round_report["compute_s"] <= round_report["wall_s"]


def test_a_grid_of_8192_by_8192():
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2)
    cells = (np.random.default_rng(7).random((8192, 8192)) < 0.3).astype(np.uint8)
    got = ctx.life(cells, 2, halo=2)
    np.testing.assert_array_equal(got, life_reference(cells, 2))
    del cells, got
    grid = np.random.default_rng(8).random((8192, 8192), dtype=np.float32)
    out = ctx.stencil(grid, 1, 0.25, "dirichlet")
    assert ctx.last_run.layouts[0]["bands"] >= 3  # 256 MiB of float32 over 128 MiB bindings
    want = heat_reference(grid, 1, 0.25, "dirichlet")
    assert np.abs(out - want).max() < 1e-5


def test_a_band_taller_than_one_dispatch_dimension(ctx):
    # 65,535 workgroups of 4 rows along y: taller bands are sliced along z.
    grid = np.random.default_rng(9).random((300_001, 5), dtype=np.float32)
    got = ctx.stencil(grid, 2, 0.25, "periodic", halo=2, split=[300_001, 0])
    np.testing.assert_allclose(got, heat_reference(grid, 2, 0.25, "periodic"), atol=1e-5, rtol=0)
    cells = (np.random.default_rng(10).random((300_001, 6)) < 0.4).astype(np.uint8)
    np.testing.assert_array_equal(ctx.life(cells, 2, halo=2), life_reference(cells, 2))


def test_rounds_slower_than_sync_timeout_fail_their_devices():
    # Devices that never answer (an injected hold), however fast: every round passes 1 ms.
    # Calibration first, whose own waits a hold would stop too.
    ctx = ag.MultiGpuContext(adapters=[0], devices_per_adapter=2, sync_timeout_ms=1)
    ctx.calibrate()
    for device in range(2):
        ctx.inject_fault(device, fault="hang")
    grid = np.random.default_rng(11).random((2048, 2048), dtype=np.float32)
    with pytest.raises(ag.DeviceLostError, match="sync_timeout_ms=1"):
        ctx.stencil(grid, 4, 0.1)
    assert [h["healthy"] for h in ctx.health().values()] == [False, False]
