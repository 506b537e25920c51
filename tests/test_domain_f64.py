"""float64 heat grids end to end (issue 28): a float64 grid is stepped in float64 and comes
back float64, on the host device and on lavapipe (``SHADER_F64``): bit for bit the same
bracketed sum and ``fma`` emulated in float64 (the fma rounded once, from rationals, on the
host alone; product and sum rounded apart on lavapipe and on the host beside it) on every
device count, halo, layout, rebalance and boundary, host and lavapipe bands together; llvmpipe
GL (no ``SHADER_F64``) is left out of float64 grids, or refuses them alone; the dtype rule of
:mod:`amari_gpu._dtypes` (integers in float64, float16 in float32, ``dtype=``) and the
overflow scaling at float64's edge (2^1019).
"""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _domain_helpers import heat_bits, heat_reference
from _resident_helpers import gl_device_ids
from hypothesis import given, settings
from hypothesis import strategies as st

BOUNDARIES = ["dirichlet", "periodic"]


def heat64_bits(
    grid: np.ndarray, steps: int, alpha: float, boundary: str, fused: bool
) -> np.ndarray:
    """The float64 heat steps as the kernels compute them (fused: one rounding of the
    exact ``fma``; else a float64 product then a float64 sum, as Mesa's lavapipe)."""
    return heat_bits(grid, steps, alpha, boundary, fused, np.float64)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and bool(np.array_equal(a.view(np.uint64), b.view(np.uint64)))


def _grid(h: int, w: int, seed: int) -> np.ndarray:
    # Values whose float32 rounding would show: uniform in (-1, 1) with all 53 bits used.
    return np.random.default_rng(seed).uniform(-1, 1, (h, w))


# Each context, and whether it rounds the update's fma once: the host device alone fuses it
# (as hardware GPUs do); lavapipe rounds product and sum apart in float64 as in float32, and
# the host device beside it follows it.
FUSED = {"host": True, "lavapipe x2": False, "lavapipe x3": False, "mixed": False}


@pytest.fixture(scope="module")
def contexts(
    host: ag.MultiGpuContext,
    ctx2: ag.MultiGpuContext,
    ctx3: ag.MultiGpuContext,
    mixed: ag.MultiGpuContext,
) -> dict[str, ag.MultiGpuContext]:
    """The host device alone, two and three lavapipe devices, two lavapipe and the host."""
    return {"host": host, "lavapipe x2": ctx2, "lavapipe x3": ctx3, "mixed": mixed}


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_float64_grids_give_their_modes_bits_on_every_device_set_halo_and_layout(
    contexts: dict[str, ag.MultiGpuContext], boundary: str
) -> None:
    # Odd widths (rows padded to whole vec4s of f64), bands thinner than a halo, a partial
    # last round.
    for h, w, steps in [(37, 29, 9), (7, 5, 6), (12, 64, 5)]:
        grid = _grid(h, w, h * w)
        before = grid.copy()
        want = {f: heat64_bits(grid, steps, 0.23, boundary, f) for f in (True, False)}
        # Both modes are float64 runs of the heat equation (the same as numpy's float64
        # formula to rounding), not float32 ones, which lose half the digits.
        ref = heat_reference(grid, steps, 0.23, boundary)
        f32 = heat_reference(grid.astype(np.float32), steps, 0.23, boundary)
        for bits in want.values():
            assert np.abs(bits - ref).max() < 1e-14
            assert np.abs(bits - f32).max() > 1e-9
        for name, ctx in contexts.items():
            n = len(ctx.devices)
            mode = want[FUSED[name]]
            for halo in (1, 2, 4):
                got = ctx.stencil(grid, steps, 0.23, boundary, halo)
                assert got.dtype == np.float64 and got.shape == (h, w)
                assert same_bits(got, mode), f"{name} halo={halo} {h}x{w}"
            skewed = [h - (n - 1)] + [1] * (n - 1)
            got = ctx.stencil(grid, steps, 0.23, boundary, 2, split=skewed, rebalance=True)
            assert same_bits(got, mode), f"{name} skewed {h}x{w}"
            got = ctx.stencil(grid, steps, 0.23, boundary, 3, rebalance=False)
            assert same_bits(got, mode), f"{name} static {h}x{w}"
            assert ctx.last_run is not None and ctx.last_run.left_out == []
        np.testing.assert_array_equal(grid, before)


def test_the_host_and_lavapipe_both_take_rows_of_a_float64_grid(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    ctx = contexts["mixed"]
    grid = _grid(40, 33, 3)
    host = [d.id for d in ctx.devices if d.adapter.backend == "host"]
    split = [10, 10, 20] if host == [2] else [20, 10, 10]
    got = ctx.stencil(grid, 7, 0.2, "periodic", 2, split=split, rebalance=False)
    report = ctx.last_run
    assert report is not None
    assert sorted(d for d, rows in report.final_split if rows) == [0, 1, 2]
    assert same_bits(got, contexts["lavapipe x2"].stencil(grid, 7, 0.2, "periodic", 1))
    assert same_bits(got, heat64_bits(grid, 7, 0.2, "periodic", fused=False))


@settings(max_examples=25, deadline=None)
@given(
    h=st.integers(1, 9),
    w=st.integers(1, 11),
    steps=st.integers(0, 7),
    halo=st.integers(1, 4),
    alpha=st.floats(0.0, 0.25),
    periodic=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_small_float64_grids_give_the_bits_of_their_fma_mode(
    contexts: dict[str, ag.MultiGpuContext],
    h: int,
    w: int,
    steps: int,
    halo: int,
    alpha: float,
    periodic: bool,
    seed: int,
) -> None:
    boundary = "periodic" if periodic else "dirichlet"
    grid = _grid(h, w, seed)
    for name in ("host", "lavapipe x2", "mixed"):
        got = contexts[name].stencil(grid, steps, alpha, boundary, halo)
        assert same_bits(got, heat64_bits(grid, steps, alpha, boundary, FUSED[name])), name


def test_dtypes_follow_numpys_rule_and_dtype_overrides(
    contexts: dict[str, ag.MultiGpuContext],
) -> None:
    ctx = contexts["mixed"]
    grid = _grid(9, 7, 5)
    f32 = grid.astype(np.float32)
    # float32 unchanged: the float32 steps of the same grid, float32 out.
    got32 = ctx.stencil(f32, 5, 0.2)
    assert got32.dtype == np.float32
    assert np.array_equal(ctx.stencil(grid, 5, 0.2, dtype=np.float32), got32)
    # Integers and bools as numpy's true division: float64.
    ints = np.arange(63).reshape(9, 7) - 30
    got = ctx.stencil(ints, 4, 0.25, "periodic")
    assert got.dtype == np.float64
    assert same_bits(got, ctx.stencil(ints.astype(np.float64), 4, 0.25, "periodic"))
    assert ctx.stencil(ints > 0, 1).dtype == np.float64
    # float16 computes in float32 (no float16 steps), as the other families without them.
    half = grid.astype(np.float16)
    got16 = ctx.stencil(half, 3, 0.1)
    assert got16.dtype == np.float32
    assert np.array_equal(got16, ctx.stencil(half.astype(np.float32), 3, 0.1))
    # dtype= lifts a float32 grid to float64.
    assert ctx.stencil(f32, 2, dtype="float64").dtype == np.float64
    with pytest.raises(ag.InvalidArgumentError, match=r"^dtype: this operation computes in"):
        ctx.stencil(grid, 1, dtype=np.float16)
    with pytest.raises(TypeError, match=r"^dtype: expected float16, float32, float64 or None"):
        ctx.stencil(grid, 1, dtype=np.int32)
    # out= of the result's dtype only; nothing written into one of another.
    out = np.full((9, 7), 7.0, np.float32)
    with pytest.raises(TypeError, match="out"):
        ctx.stencil(grid, 1, out=out)
    assert np.all(out == 7.0)
    out64 = np.empty((9, 7))
    assert ctx.stencil(grid, 3, 0.2, out=out64) is out64
    assert same_bits(out64, ctx.stencil(grid, 3, 0.2))


def test_a_mixed_context_leaves_gl_out_of_float64_grids_and_says_why() -> None:
    ctx = ag.MultiGpuContext(backends=["vulkan", "gl", "host"])
    try:
        gl = gl_device_ids(ctx)
        grid = _grid(30, 17, 8)
        got = ctx.stencil(grid, 6, 0.2, "periodic", 2)
        report = ctx.last_run
        assert report is not None
        assert {d for d, _ in report.left_out} == gl
        for d, why in report.left_out:
            assert why.startswith(f"float64 needs SHADER_F64: device {d} '"), why
        for layout in report.layouts:
            assert all(rows == 0 for d, rows in layout["split"] if d in gl)
        # The host device beside lavapipe rounds as lavapipe does.
        assert same_bits(got, heat64_bits(grid, 6, 0.2, "periodic", fused=False))
        # A split giving GL rows is refused, naming the device and what it lacks.
        (g,) = sorted(gl)[:1]
        split = [0] * len(ctx.devices)
        split[g] = 30
        with pytest.raises(
            ag.InvalidArgumentError,
            match=rf"^split: rows given to a device that cannot step this grid: float64 needs "
            rf"SHADER_F64: device {g} ",
        ):
            ctx.stencil(grid, 1, split=split)
        # float32 grids still run on GL too.
        ctx.stencil(grid.astype(np.float32), 2, split=split)
        assert ctx.last_run is not None and ctx.last_run.left_out == []
    finally:
        ctx.close()


def test_a_gl_only_context_refuses_float64_grids_naming_its_devices() -> None:
    ctx = ag.MultiGpuContext(backends=["gl"])
    try:
        out = np.full((6, 6), 7.0)
        with pytest.raises(ag.InvalidArgumentError) as raised:
            ctx.stencil(np.ones((6, 6)), 2, out=out)
        message = str(raised.value)
        assert message.startswith("dtype: no device of this context computes in float64"), message
        for device in ctx.devices:
            assert f"float64 needs SHADER_F64: device {device.id} '" in message, message
        assert np.all(out == 7.0), "nothing written"
        assert ctx.stencil(np.ones((6, 6)), 2, dtype=np.float32).dtype == np.float32
    finally:
        ctx.close()


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_float64_grids_are_scaled_only_above_2_to_the_1019(
    contexts: dict[str, ag.MultiGpuContext], boundary: str
) -> None:
    """At 2^1019 a grid runs as given (8 max|u| = 2^1022, finite), bit for bit as the same
    grid scaled down and back by hand; above it, scaled by a power of two, with the same
    bits on every context; near float64's largest finite, no inf."""
    edge = 2.0**1019
    rng = np.random.default_rng(11)
    unit = rng.uniform(-1, 1, (13, 10))
    unit[0, 0] = 1.0
    for top, shift in [(edge, 0), (np.nextafter(edge, np.inf), 1), (np.finfo(np.float64).max, 5)]:
        grid = unit * top
        assert ag._native.check_stencil(grid, 0.2, boundary, 3) == shift
        got = {}
        for name in ("host", "lavapipe x3", "mixed"):
            ctx = contexts[name]
            got[name] = ctx.stencil(grid, 3, 0.2, boundary, 2)
            assert np.isfinite(got[name]).all()
            # The steps are linear: exact powers of two commute with them (normal values).
            scaled = ctx.stencil(grid / 2.0**shift, 3, 0.2, boundary, 1) * 2.0**shift
            if boundary == "dirichlet":
                scaled[[0, -1], :] = grid[[0, -1], :]
                scaled[:, [0, -1]] = grid[:, [0, -1]]
            assert same_bits(got[name], scaled), (name, top)
        assert same_bits(got["lavapipe x3"], got["mixed"]), top
    # float32's limit is no limit in float64: 1e38 runs unscaled.
    assert ag._native.check_stencil(unit * 1e38, 0.2, boundary, 3) == 0


def test_a_ray_context_steps_float64_grids_in_float64_with_one_contexts_bits() -> None:
    """A RayContext's grid goes through the core's float64 check (its own limit) and every
    node steps its band in float64: the bits of one local context, scaled grids included;
    a cluster whose nodes have no float64 device refuses as every cluster call does, naming
    each node's devices, nothing written; with the host device beside GL the nodes step
    float64 bands on the host device, the bits of the same local context."""
    import _cluster_helpers as helpers

    grid = _grid(40, 23, 12)
    with (
        helpers.local_cluster([dict(helpers.RESOURCE)] * 2),
        ag.MultiGpuContext(backends=["vulkan"]) as local,
    ):
        with ag.RayContext(backends=["vulkan"]) as rc:
            for cells in (grid, grid * 2.0**1020):
                got = rc.stencil(cells, 7, 0.2, "periodic", 2)
                assert same_bits(got, local.stencil(cells, 7, 0.2, "periodic", 2))
        with ag.RayContext(backends=["gl"]) as gl:
            out = np.full(grid.shape, 7.0)
            with pytest.raises(
                ag.InvalidArgumentError,
                match=r"^dtype: no node of this RayContext has a device that computes in "
                r"float64 \(node 0: llvmpipe .*\(gl: float32\); node 1: ",
            ):
                gl.stencil(grid, 3, 0.2, out=out)
            assert np.all(out == 7.0), "nothing written"
        with (
            ag.RayContext(backends=["gl", "host"]) as mixed,
            ag.MultiGpuContext(backends=["gl", "host"]) as both,
        ):
            got = mixed.stencil(grid, 7, 0.2, "periodic", 2)
            assert same_bits(got, both.stencil(grid, 7, 0.2, "periodic", 2))
            assert mixed.last_run is not None and mixed.last_run.left_out == []
