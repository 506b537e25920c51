"""Grid bands on the host device: ``stencil`` and ``life`` on the host alone and beside
lavapipe and llvmpipe bands, exchanging halos through the host board.

Bits are checked against float32 emulations written here with numpy, one per way of rounding
WGSL's ``fma`` in the heat update ``fma(alpha, s - 4u, u)``: Mesa's CPU adapters round the
product and the sum apart, the host device follows them when it runs beside them and fuses
(one rounding, as hardware GPUs do) when it is alone. Every context must give its mode's bits
exactly, on odd sizes, bands thinner than a halo, step counts that end in a partial round,
measured and explicit splits, rebalancing, and after a fault on the host device mid-run.
Life is exact everywhere, and every heat result is also held to a float64 reference.
"""

from __future__ import annotations

from typing import Any

import amari_gpu as ag
import numpy as np
import pytest
from _domain_helpers import heat_bits, heat_reference, life_reference
from amari_gpu import MultiGpuContext

# (H, W, halo, steps): odd sizes; seven rows over three devices with halo 3, and five rows
# with halo 4 (bands thinner than a halo; periodic ghosts wrap past the whole grid); a single
# row; steps that end in a partial round.
CASES = [(37, 53, 2, 7), (7, 9, 3, 8), (5, 11, 4, 9), (1, 5, 2, 3), (64, 67, 4, 9)]
BOUNDARIES = ["dirichlet", "periodic"]
ALPHA = np.float32(0.24)


def _heat_grid(h: int, w: int) -> np.ndarray:
    return np.random.default_rng(h * 1000 + w).uniform(-1, 1, (h, w)).astype(np.float32)


def _life_grid(h: int, w: int) -> np.ndarray:
    return (np.random.default_rng(h + 7 * w).random((h, w)) < 0.4).astype(np.uint8)


def _host(ctx: MultiGpuContext) -> int:
    (host,) = [d.id for d in ctx.devices if d.adapter.backend == "host"]
    return host


def _split_with_host(ctx: MultiGpuContext, h: int) -> list[int]:
    """Rows per device: half (rounded up) on the host, the rest on device 0."""
    split = [0] * len(ctx.devices)
    split[_host(ctx)] = (h + 1) // 2
    split[0] = h - split[_host(ctx)]
    return split


def _host_rows(ctx: MultiGpuContext) -> int:
    report = ctx.last_run
    assert report is not None
    host = _host(ctx)
    return sum(d["rows"] for d in report.rounds[-1]["devices"] if d["device"] == host)


@pytest.fixture(scope="session")
def host_alone() -> MultiGpuContext:
    ctx = MultiGpuContext(backends=["host"])
    assert [d.adapter.backend for d in ctx.devices] == ["host"]
    return ctx


@pytest.fixture(scope="session")
def lavapipe() -> MultiGpuContext:
    return MultiGpuContext(backends=["vulkan"])


@pytest.fixture(scope="session")
def llvmpipe() -> MultiGpuContext:
    return MultiGpuContext(backends=["gl"])


@pytest.fixture(scope="session")
def lavapipe_host() -> MultiGpuContext:
    """Two lavapipe devices and the host."""
    ctx = MultiGpuContext(backends=["vulkan", "host"], devices_per_adapter=2)
    assert [d.adapter.backend for d in ctx.devices] == ["vulkan", "vulkan", "host"]
    return ctx


@pytest.fixture(scope="session")
def llvmpipe_host() -> MultiGpuContext:
    return MultiGpuContext(backends=["gl", "host"])


def _mixed(request: pytest.FixtureRequest) -> list[MultiGpuContext]:
    return [request.getfixturevalue(n) for n in ("lavapipe_host", "llvmpipe_host")]


def _runs(ctx: MultiGpuContext, h: int, **kwargs: Any) -> list[dict[str, Any]]:
    """The layouts a mixed context is run with: the host given rows explicitly (a measured
    split may leave it none on a thin grid), and measured with rebalancing."""
    return [{"split": _split_with_host(ctx, h), "rebalance": False, **kwargs}, kwargs]


@pytest.mark.parametrize(("h", "w", "halo", "steps"), CASES)
def test_life_is_the_same_on_every_context(
    request, host_alone, lavapipe, llvmpipe, h, w, halo, steps
):
    cells = _life_grid(h, w)
    want = life_reference(cells, steps)
    for ctx in (host_alone, lavapipe, llvmpipe):
        assert np.array_equal(ctx.life(cells, steps, halo=halo), want)
    for ctx in _mixed(request):
        for run in _runs(ctx, h):
            assert np.array_equal(ctx.life(cells, steps, halo=halo, **run), want), run
            if "split" in run:
                assert _host_rows(ctx) == (h + 1) // 2


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize(("h", "w", "halo", "steps"), CASES)
def test_heat_beside_mesa_adapters_gives_their_bits(
    request, lavapipe, llvmpipe, h, w, halo, steps, boundary
):
    grid = _heat_grid(h, w)
    want = heat_bits(grid, steps, ALPHA, boundary, fused=False)
    np.testing.assert_allclose(want, heat_reference(grid, steps, float(ALPHA), boundary), atol=1e-5)
    for ctx in (lavapipe, llvmpipe):
        assert np.array_equal(ctx.stencil(grid, steps, ALPHA, boundary, halo), want)
    for ctx in _mixed(request):
        for run in _runs(ctx, h):
            got = ctx.stencil(grid, steps, ALPHA, boundary, halo, **run)
            assert np.array_equal(got, want), (ctx.devices, run)
            if "split" in run:
                assert _host_rows(ctx) == (h + 1) // 2


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize(("h", "w", "halo", "steps"), CASES)
def test_heat_on_the_host_alone_gives_fused_bits_for_any_halo(
    host_alone, h, w, halo, steps, boundary
):
    grid = _heat_grid(h, w)
    want = heat_bits(grid, steps, ALPHA, boundary, fused=True)
    np.testing.assert_allclose(want, heat_reference(grid, steps, float(ALPHA), boundary), atol=1e-5)
    for halo_ in (1, halo, steps + 2):
        got = host_alone.stencil(grid, steps, ALPHA, boundary, halo_)
        assert np.array_equal(got, want), halo_
    assert _host_rows(host_alone) == h


# (H, W, halo, steps) deep enough for the host's blocked passes (up to 16 steps over a tile of
# rows, cut into a chunk per thread): 16-step rounds (even passes, in place) on 300 rows; 7-step
# rounds (odd passes) ending in a 2-step round; a one-cell-wide grid; a single row; a single
# cell; wide rows (250, 700, 1029 cells: several vector blocks and a tail) with a 5-step pass
# after a 16-step one, 2-step passes (in place) and 3-step ones.
BLOCKED = [
    (300, 67, 16, 16),
    (261, 130, 7, 23),
    (97, 1, 16, 16),
    (1, 9, 16, 17),
    (1, 1, 16, 16),
    (300, 250, 16, 16),
    (70, 97, 16, 21),
    (40, 1029, 2, 6),
    (33, 700, 3, 9),
]


@pytest.mark.parametrize(("h", "w", "halo", "steps"), BLOCKED)
def test_blocked_host_rounds_give_the_bits_of_lavapipe_and_of_the_fused_steps(
    lavapipe, lavapipe_host, host_alone, h, w, halo, steps
):
    grid = _heat_grid(h, w)
    for b in BOUNDARIES:
        fused = heat_bits(grid, steps, ALPHA, b, fused=True)
        assert np.array_equal(host_alone.stencil(grid, steps, ALPHA, b, halo), fused), b
        separate = heat_bits(grid, steps, ALPHA, b, fused=False)
        assert np.array_equal(lavapipe.stencil(grid, steps, ALPHA, b, halo), separate), b
        for run in _runs(lavapipe_host, h):
            got = lavapipe_host.stencil(grid, steps, ALPHA, b, halo, **run)
            assert np.array_equal(got, separate), (b, run)
            if "split" in run:
                assert _host_rows(lavapipe_host) == (h + 1) // 2
    cells = _life_grid(h, w)
    want = life_reference(cells, steps)
    assert np.array_equal(host_alone.life(cells, steps, halo=halo), want)
    assert np.array_equal(
        lavapipe_host.life(cells, steps, halo=halo, **_runs(lavapipe_host, h)[0]), want
    )


def test_grid_calls_of_changing_sizes_reuse_buffers_without_stale_cells(host_alone, lavapipe):
    """Boards and host bands land in buffers earlier calls handed back (zeroed when taken):
    a large grid, then smaller and wider ones, heat and Life interleaved, each gives its own
    bits, on the host alone and on lavapipe."""
    shapes = [(300, 67, 16, 16), (5, 3, 4, 9), (64, 130, 7, 23), (1, 9, 16, 17), (300, 67, 3, 5)]
    for h, w, halo, steps in shapes:
        grid = _heat_grid(h, w)
        for b in BOUNDARIES:
            got = host_alone.stencil(grid, steps, ALPHA, b, halo)
            assert np.array_equal(got, heat_bits(grid, steps, ALPHA, b, fused=True)), (h, w, b)
            got = lavapipe.stencil(grid, steps, ALPHA, b, halo)
            assert np.array_equal(got, heat_bits(grid, steps, ALPHA, b, fused=False)), (h, w, b)
        cells = _life_grid(h, w)
        want = life_reference(cells, steps)
        assert np.array_equal(host_alone.life(cells, steps, halo=halo), want), (h, w)


def test_a_restart_after_a_host_fault_rebuilds_a_scaled_board(lavapipe):
    """A grid near the float32 limit runs scaled; a restart without the failed host device
    builds its board again from the caller's grid, scaled the same: lavapipe's bits."""
    ctx = MultiGpuContext(backends=["vulkan", "host"])
    host = _host(ctx)
    grid = _heat_grid(40, 33) * np.float32(3e38)
    ctx.inject_fault(host, after_chunks=2)
    got = ctx.stencil(grid, 9, ALPHA, "periodic", halo=2, split=[20, 20])
    assert ctx.last_run is not None and [d for d, _ in ctx.last_run.failures] == [host]
    assert np.array_equal(got, lavapipe.stencil(grid, 9, ALPHA, "periodic", halo=2))
    assert np.array_equal(grid, _heat_grid(40, 33) * np.float32(3e38)), "input untouched"


def test_rebalancing_moves_rows_to_and_from_the_host(lavapipe, lavapipe_host):
    h, w, steps = 256, 256, 40
    grid = _heat_grid(h, w)
    want = lavapipe.stencil(grid, steps, ALPHA, "periodic")
    got = lavapipe_host.stencil(grid, steps, ALPHA, "periodic", split=[h - 2, 0, 2])
    report = lavapipe_host.last_run
    assert report is not None
    assert np.array_equal(got, want)
    # Two rows on the host against 254 on lavapipe: the measured rates call for a new split
    # (which rows move is the measurements' choice; the bits are not).
    assert len(report.layouts) >= 2, report.layouts
    assert all(layout["seconds"] > 0 for layout in report.layouts[1:])
    cells = _life_grid(h, w)
    got = lavapipe_host.life(cells, steps, split=[h - 2, 0, 2])
    assert np.array_equal(got, life_reference(cells, steps))


def test_a_fault_on_the_host_mid_run_moves_its_band(lavapipe):
    ctx = MultiGpuContext(backends=["vulkan", "host"])
    host = _host(ctx)
    h, w = 90, 70
    cells = _life_grid(h, w)
    ctx.inject_fault(host, after_chunks=3)  # fails when it starts its fourth round
    got = ctx.life(cells, 20, halo=2, split=[40, 50])
    assert np.array_equal(got, life_reference(cells, 20))
    report = ctx.last_run
    assert report is not None
    assert [device for device, _ in report.failures] == [host]
    assert "injected fault" in report.failures[0][1]
    assert not ctx.health()[host]["healthy"]
    assert report.final_split == [(0, h)]
    # Heat, with the host failing mid-run too: lavapipe's bits.
    ctx.reset_health()
    ctx.inject_fault(host, after_chunks=2)
    grid = _heat_grid(h, w)
    got = ctx.stencil(grid, 11, ALPHA, "periodic", halo=2, split=[30, 60])
    assert np.array_equal(got, lavapipe.stencil(grid, 11, ALPHA, "periodic"))
    assert ctx.last_run is not None and [d for d, _ in ctx.last_run.failures] == [host]


def test_the_host_alone_failing_leaves_no_device():
    ctx = MultiGpuContext(backends=["host"])
    ctx.inject_fault(0, 1)
    with pytest.raises(ag.DeviceLostError, match="no healthy device left"):
        ctx.stencil(np.ones((8, 8), np.float32), 6)


def test_host_rounds_are_on_its_track_in_the_profile(lavapipe_host):
    ctx = lavapipe_host
    host = _host(ctx)
    grid = _heat_grid(48, 40)
    with ctx.profile() as prof:
        ctx.stencil(grid, 8, 0.1, "dirichlet", halo=2, rebalance=False, split=[20, 10, 18])
    report = ctx.last_run
    assert report is not None and len(report.rounds) == 4
    events = [e for e in prof.events if e["device"] == host]
    kernels = [e for e in events if e["kind"] == "kernel"]
    assert [e["chunk"] for e in kernels] == [0, 1, 2, 3]
    assert all(e["clock"] == "host" and e["duration_s"] > 0 for e in kernels)
    for r, round_report in enumerate(report.rounds):
        (dev,) = [d for d in round_report["devices"] if d["device"] == host]
        assert dev["rows"] == 18 and kernels[r]["items"] == dev["work"] > 0
    # Its ghost rows come from the board and its border rows go back: both are on its track.
    assert {e["kind"] for e in events} >= {"kernel", "upload", "readback"}


def test_progress_and_a_raising_callback_on_the_host_alone(host_alone):
    grid = _heat_grid(40, 30)
    seen: list[tuple[int, int]] = []
    out = host_alone.stencil(grid, 50, progress=lambda done, total: seen.append((done, total)))
    assert np.array_equal(out, host_alone.stencil(grid, 50))
    assert seen and seen[-1] == (50, 50)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)

    def stop(done: int, total: int) -> None:
        raise RuntimeError(f"stop at {done} of {total}")

    cells = _life_grid(64, 64)
    with pytest.raises(RuntimeError, match="stop at"):
        host_alone.life(cells, 100000, progress=stop)
    assert all(h["healthy"] for h in host_alone.health().values())


def test_bad_input_is_refused_on_the_host_alone(host_alone):
    grid = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"alpha: expected 0 <= alpha <= 0.25"):
        host_alone.stencil(grid, 1, alpha=0.3)
    with pytest.raises(ValueError, match=r"split: expected rows for each of the 1 devices"):
        host_alone.stencil(grid, 1, split=[2, 2])
    with pytest.raises(ValueError, match=r"grid: expected cells 0 or 1, found 2 at \(0, 0\)"):
        host_alone.life(np.full((3, 3), 2, np.uint8), 1)
