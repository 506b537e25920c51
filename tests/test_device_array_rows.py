"""``map_rows`` on DeviceArrays: users' WGSL run where the rows live, resident and mixed
numpy + resident operands, ``(C,)`` broadcasts and params (hypothesis: random linear row
functions on random shardings), the same bits as the numpy path
whatever the sharding (several lavapipe devices, and with the host device, whose rows are
computed on a wgpu device), a device failing mid-call, and bad operands named before any
work."""

from __future__ import annotations

import amari_gpu as ag
import numpy as np
import pytest
from _rows_helpers import AFFINE, FOUR, THREE
from hypothesis import given, settings
from hypothesis import strategies as st

ROWS = 1000


def _f32(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fixture", ["ctx2", "ctx3", "mixed"])
@pytest.mark.parametrize("strategy", ["balanced", "capability", "adaptive"])
def test_resident_and_mixed_operands_equal_the_numpy_path(
    fixture: str, strategy: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    a, b, w = _f32(1, ROWS, 2), _f32(2, ROWS, 4), _f32(3, ROWS, 1)
    want = ctx.map_rows(THREE, a, b, w, out_cols=1, params={"limit": 1.5})
    da, db = ctx.asarray(a, strategy=strategy), ctx.asarray(b, strategy="balanced")
    # Every array resident (db sharded differently from da), then mixed numpy + resident.
    for operands in ((da, db, ctx.asarray(w)), (da, b, w), (a, db, w)):
        got = ctx.map_rows(THREE, *operands, out_cols=1, params={"limit": 1.5})
        assert isinstance(got, ag.DeviceArray)
        assert got.shape == (ROWS, 1)
        reference = next(o for o in operands if isinstance(o, ag.DeviceArray))
        assert [s[1:] for s in got.sharding] == [s[1:] for s in reference.sharding]
        assert np.array_equal(got.numpy(), want)


@pytest.mark.parametrize("fixture", ["ctx3", "mixed"])
def test_broadcasts_and_params_one_to_four_inputs(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    ctx = request.getfixturevalue(fixture)
    p, off = _f32(4, ROWS, 3), _f32(5, 3)
    want = ctx.map_rows(AFFINE, p, off, out_cols=3, params={"scale": 0.5})
    got = ctx.map_rows(AFFINE, ctx.asarray(p), off, out_cols=3, params={"scale": 0.5})
    assert np.array_equal(got.numpy(), want)
    a, c = _f32(6, ROWS, 1), _f32(7, ROWS, 2)
    b, d = np.array([0.25], np.float32), np.array([2.0], np.float32)
    want = ctx.map_rows(FOUR, a, b, c, d, out_cols=4, params={"k": 3})
    got = ctx.map_rows(FOUR, ctx.asarray(a), b, ctx.asarray(c), d, out_cols=4, params={"k": 3})
    assert np.array_equal(got.numpy(), want)
    one = "fn row(a: array<f32, 3>) -> array<f32, 1> { return array<f32, 1>(a[0] * a[2]); }"
    got = ctx.map_rows(one, ctx.asarray(p), out_cols=1)
    assert np.array_equal(got.numpy(), ctx.map_rows(one, p, out_cols=1))


def test_rows_held_by_the_host_device_run_on_a_wgpu_device(
    mixed: ag.MultiGpuContext,
) -> None:
    kinds = {d.id: d.adapter.backend for d in mixed.devices}
    p = _f32(8, ROWS, 3)
    dp = mixed.asarray(p, strategy="balanced")
    assert "host" in {kinds[device] for device, _, _ in dp.sharding}
    got = mixed.map_rows(AFFINE, dp, _f32(9, 3), out_cols=3, params={"scale": -1.0})
    assert "host" not in {kinds[device] for device, _, _ in got.sharding}
    assert np.array_equal(
        got.numpy(), mixed.map_rows(AFFINE, p, _f32(9, 3), out_cols=3, params={"scale": -1.0})
    )


def test_chains_of_map_rows_and_ga_stay_resident(ctx3: ag.MultiGpuContext) -> None:
    x = _f32(10, ROWS, 8)
    scale = "fn row(a: array<f32, 8>) -> array<f32, 8> { var r = a; r[0] += params.s; return r; }"
    want = ctx3.reverse(ctx3.map_rows(scale, ctx3.reverse(x), out_cols=8, params={"s": 1}))
    with ctx3.profile() as prof:
        dx = ctx3.asarray(x)
        got = ctx3.reverse(ctx3.map_rows(scale, ctx3.reverse(dx), out_cols=8, params={"s": 1}))
        out = got.numpy()
    assert np.array_equal(out, want)
    kinds = [e["kind"] for e in prof.events]
    first, last = kinds.index("readback"), len(kinds) - 1 - kinds[::-1].index("upload")
    assert last < first, "no upload after the first readback, no readback before the last"


def test_a_device_failing_mid_call_changes_nothing(ctx3: ag.MultiGpuContext) -> None:
    a, b, w = _f32(11, ROWS, 2), _f32(12, ROWS, 4), _f32(13, ROWS, 1)
    want = ctx3.map_rows(THREE, a, b, w, out_cols=1, params={"limit": 1.5})
    try:
        for device in range(len(ctx3.devices)):
            for k in range(3):
                ctx3.reset_health()
                da, db = ctx3.asarray(a), ctx3.asarray(b)
                ctx3.inject_fault(device, after_chunks=k)
                got = ctx3.map_rows(THREE, da, db, w, out_cols=1, params={"limit": 1.5})
                assert np.array_equal(got.numpy(), want), (device, k)
                if k == 0:
                    assert not ctx3.health()[device]["healthy"], device
                    assert device not in {d for d, _, _ in got.sharding}
    finally:
        ctx3.reset_health()


def test_bad_operands_are_named_before_any_work(ctx3: ag.MultiGpuContext) -> None:
    p = ctx3.asarray(_f32(14, ROWS, 3))
    off = _f32(15, 3)
    with pytest.raises(
        ag.ShapeError, match=r"arrays\[1\]: expected shape \(1000, 3\) \(the rows of"
    ):
        ctx3.map_rows(AFFINE, p, _f32(16, 10, 3), out_cols=3, params={"scale": 1})
    with pytest.raises(
        ag.ShapeError, match=r"arrays\[0\]: expected shape \(N, C\) with C >= 1 for a DeviceArray"
    ):
        ctx3.map_rows(AFFINE, ctx3.asarray(np.arange(5.0)), off, out_cols=3, params={"scale": 1})
    with pytest.raises(ag.KernelCompileError, match=r"parameter 1 \(p\) must be array<f32, 4>"):
        ctx3.map_rows(AFFINE, ctx3.asarray(_f32(17, ROWS, 4)), off, out_cols=3, params={"scale": 1})
    with pytest.raises(ag.ShapeError, match=r"out: expected shape \(1000, 3\)"):
        ctx3.map_rows(
            AFFINE, p, off, out_cols=3, params={"scale": 1}, out=np.zeros((ROWS, 2), np.float32)
        )
    other = ag.MultiGpuContext(backends=["vulkan"])
    try:
        with pytest.raises(
            ag.InvalidArgumentError, match=r"arrays\[0\]: expected a DeviceArray of this context"
        ):
            ctx3.map_rows(
                AFFINE, other.asarray(_f32(18, ROWS, 3)), off, out_cols=3, params={"scale": 1}
            )
    finally:
        other.close()
    freed = ctx3.asarray(_f32(19, ROWS, 3))
    freed.free()
    with pytest.raises(ag.InvalidArgumentError, match=r"arrays\[0\]: expected a live DeviceArray"):
        ctx3.map_rows(AFFINE, freed, off, out_cols=3, params={"scale": 1})


@st.composite
def _resident_calls(draw: st.DrawFn) -> tuple[str, list[int], list[str], int]:
    """A random linear row function of 1-4 arrays (each resident, numpy rows, or a numpy
    broadcast row; at least one resident) and 1-4 outputs."""
    count = draw(st.integers(1, 4))
    widths = draw(st.lists(st.integers(1, 4), min_size=count, max_size=count))
    kinds = draw(
        st.lists(st.sampled_from(["resident", "rows", "row"]), min_size=count, max_size=count)
    )
    kinds[draw(st.integers(0, count - 1))] = "resident"
    k = draw(st.integers(1, 4))
    names = [f"x{i}" for i in range(count)]
    flat = [f"{n}[{c}]" for n, w in zip(names, widths, strict=True) for c in range(w)]
    coef = draw(
        st.lists(
            st.sampled_from([-1.5, -0.25, 0.5, 2.0]), min_size=len(flat) * k, max_size=len(flat) * k
        )
    )
    terms = [
        " + ".join(f"({coef[j * len(flat) + i]}) * {flat[i]}" for i in range(len(flat)))
        for j in range(k)
    ]
    signature = ", ".join(f"{n}: array<f32, {w}>" for n, w in zip(names, widths, strict=True))
    source = (
        f"fn row({signature}) -> array<f32, {k}> {{ return array<f32, {k}>({', '.join(terms)}); }}"
    )
    return source, widths, kinds, k


@settings(max_examples=15, deadline=None)
@given(
    call=_resident_calls(),
    strategy=st.sampled_from(["balanced", "capability", "adaptive"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_row_functions_on_random_shardings_equal_the_numpy_path(
    mixed: ag.MultiGpuContext,
    call: tuple[str, list[int], list[str], int],
    strategy: str,
    seed: int,
) -> None:
    source, widths, kinds, k = call
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    host = [
        rng.standard_normal(w if kind == "row" else (n, w)).astype(np.float32)
        for w, kind in zip(widths, kinds, strict=True)
    ]
    operands = [
        mixed.asarray(a, strategy=strategy) if kind == "resident" else a
        for a, kind in zip(host, kinds, strict=True)
    ]
    got = mixed.map_rows(source, *operands, out_cols=k)
    assert isinstance(got, ag.DeviceArray)
    assert np.array_equal(got.numpy(), mixed.map_rows(source, *host, out_cols=k))
