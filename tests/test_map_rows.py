"""``ctx.map_rows``: users' WGSL row kernels, against float64 references, the same bits for
any device count and strategy, and every way a kernel or its arguments can be wrong.

The references evaluate each row function in float64; the kernels compute in float32, so
results agree to float32 rounding (relative 1e-5 on these well-conditioned functions).
Hypothesis draws random linear row functions (1-4 arrays, broadcasts, 1-4 outputs).
"""

from __future__ import annotations

import numpy as np
import pytest
from _rows_helpers import AFFINE, FOUR, THREE
from amari_gpu import (
    STRATEGIES,
    InvalidArgumentError,
    KernelCompileError,
    MultiGpuContext,
    ShapeError,
)
from hypothesis import given, settings
from hypothesis import strategies as st

RNG = np.random.default_rng(1616)
N = 5_003

ONE = """
fn row(a: array<f32, 3>) -> array<f32, 2> {
    let s = a[0] + a[1] + a[2];
    return array<f32, 2>(s, a[0] * a[1] - a[2]);
}
"""


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == np.float32
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def data() -> dict[str, np.ndarray]:
    return {
        "p3": _f32(N, 3),
        "off": _f32(3),
        "a2": _f32(N, 2),
        "b4": _f32(N, 4),
        "w1": _f32(N, 1),
        "c2": _f32(N, 2),
        "s1": _f32(N, 1),
    }


def test_one_input(default_ctx: MultiGpuContext, data: dict[str, np.ndarray]) -> None:
    a = data["p3"].astype(np.float64)
    want = np.stack([a.sum(axis=1), a[:, 0] * a[:, 1] - a[:, 2]], axis=1)
    _close(default_ctx.map_rows(ONE, data["p3"], out_cols=2), want)
    assert default_ctx.last_plan is not None
    assert default_ctx.last_plan.items == N


def test_two_inputs_one_broadcast_with_params(
    default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    got = default_ctx.map_rows(AFFINE, data["p3"], data["off"], out_cols=3, params={"scale": 0.5})
    want = 0.5 * data["p3"].astype(np.float64) + data["off"].astype(np.float64)
    _close(got, want)


def test_three_inputs_helper_function_and_params(
    default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    a, b, w = (data[k].astype(np.float64) for k in ("a2", "b4", "w1"))
    got = default_ctx.map_rows(
        THREE, data["a2"], data["b4"], data["w1"], out_cols=1, params={"limit": 1.5}
    )
    dot = a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1]
    want = np.clip(dot * w[:, 0] + b[:, 2] - b[:, 3], -1.5, 1.5)[:, None]
    _close(got, want)


def test_four_inputs_with_broadcasts(
    default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    b = np.array([0.25], np.float32)
    d = np.array([2.0], np.int16)  # numpy computes int16 with float32 as float32
    got = default_ctx.map_rows(FOUR, data["w1"], b, data["c2"], d, out_cols=4, params={"k": 3})
    a, c = data["w1"].astype(np.float64)[:, 0], data["c2"].astype(np.float64)
    want = np.stack([a + 0.25, c[:, 0] * c[:, 1], 2.0 - a, np.full(N, 3.0)], axis=1)
    _close(got, want)


def test_only_broadcast_rows_give_one_row(default_ctx: MultiGpuContext) -> None:
    got = default_ctx.map_rows(ONE, np.array([1.0, 2.0, 4.0], np.float32), out_cols=2)
    assert got.shape == (2,)
    assert got.tolist() == [7.0, -2.0]


def test_zero_rows(default_ctx: MultiGpuContext) -> None:
    got = default_ctx.map_rows(ONE, np.zeros((0, 3), np.float32), out_cols=2)
    assert got.shape == (0, 2)


def test_out_is_written_and_reused(
    default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    want = default_ctx.map_rows(ONE, data["p3"], out_cols=2)
    out = np.full((N, 2), -7.0, np.float32)
    for _ in range(2):
        assert default_ctx.map_rows(ONE, data["p3"], out_cols=2, out=out) is out
        assert np.array_equal(out, want)
    with pytest.raises(ShapeError, match="out: expected shape"):
        default_ctx.map_rows(ONE, data["p3"], out_cols=2, out=np.zeros((N, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match="overlaps arrays"):
        default_ctx.map_rows(ONE, data["p3"], out_cols=3, out=data["p3"])


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"adapters": [0], "devices_per_adapter": 2}, id="lavapipe-x2"),
        pytest.param({"adapters": [0], "devices_per_adapter": 3}, id="lavapipe-x3"),
        pytest.param({"adapters": [0, 1], "devices_per_adapter": 2}, id="vulkan+gl-x2"),
    ],
)
def test_same_bits_for_any_device_count_and_strategy(
    config: dict[str, object], default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    arrays = (data["a2"], data["b4"], data["w1"])
    want = default_ctx.map_rows(THREE, *arrays, out_cols=1, params={"limit": 1.5})
    ctx = MultiGpuContext(chunk_items=256, **config)  # type: ignore[arg-type]
    for strategy in STRATEGIES:
        got = ctx.map_rows(THREE, *arrays, out_cols=1, params={"limit": 1.5}, strategy=strategy)
        assert np.array_equal(got, want), strategy
        plan = ctx.last_plan
        assert plan is not None
        assert sum(w.items for w in plan.assignments) == N
        if strategy == "balanced":
            # The other strategies decide from measured timings (a loaded machine may rightly
            # keep 5,003 rows on one device); balanced always splits, so the bits above were
            # compared against a split run at least once.
            assert sum(1 for w in plan.assignments if w.items) >= 2, strategy


def test_a_device_failing_mid_call_changes_nothing(
    default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    want = default_ctx.map_rows(AFFINE, data["p3"], data["off"], out_cols=3, params={"scale": 0.5})
    ctx = MultiGpuContext(adapters=[0], devices_per_adapter=3, chunk_items=256)
    ctx.inject_fault(ctx.devices[1].id, after_chunks=2)
    got = ctx.map_rows(AFFINE, data["p3"], data["off"], out_cols=3, params={"scale": 0.5})
    assert np.array_equal(got, want)
    assert not ctx.health()[ctx.devices[1].id]["healthy"]


def test_the_host_device_takes_no_rows(data: dict[str, np.ndarray]) -> None:
    ctx = MultiGpuContext(backends=["vulkan", "host"], chunk_items=256)
    kinds = {d.id: d.adapter.backend for d in ctx.devices}
    assert "host" in kinds.values()
    got = ctx.map_rows(ONE, data["p3"], out_cols=2)
    plan = ctx.last_plan
    assert plan is not None
    assert all(kinds[w.device_id] != "host" for w in plan.assignments if w.items)
    assert np.array_equal(got, MultiGpuContext(adapters=[0]).map_rows(ONE, data["p3"], out_cols=2))


def test_the_profiler_names_the_kernel(
    default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    with default_ctx.profile() as prof:
        default_ctx.map_rows(ONE, data["p3"], out_cols=2)
    kernels = {c["kernel"] for c in prof.kernel_calls}
    assert len(kernels) == 1
    (name,) = kernels
    assert name.startswith("map_rows/")


def test_a_wgsl_error_names_line_and_column(
    default_ctx: MultiGpuContext, data: dict[str, np.ndarray]
) -> None:
    source = (
        "fn row(a: array<f32, 3>) -> array<f32, 2> {\n    let s = a[0] +;\n"
        "    return array<f32, 2>(s, s);\n}\n"
    )
    with pytest.raises(KernelCompileError, match=r"line 2, column \d+ of source") as caught:
        default_ctx.map_rows(source, data["p3"], out_cols=2)
    assert isinstance(caught.value, ValueError)
    # A type error found by validation rather than parsing.
    source = (
        "fn row(a: array<f32, 3>) -> array<f32, 2> {\n    let s: u32 = a[0];\n"
        "    return array<f32, 2>(a[0], a[1]);\n}\n"
    )
    with pytest.raises(KernelCompileError, match=r"line 2, column \d+ of source"):
        default_ctx.map_rows(source, data["p3"], out_cols=2)


@pytest.mark.parametrize(
    ("source", "arrays", "out_cols", "text"),
    [
        (
            "fn f(a: array<f32, 3>) -> array<f32, 2> { return array<f32, 2>(a[0], a[1]); }",
            1,
            2,
            "found none",
        ),
        (ONE, 2, 2, "one parameter per array \\(2 arrays passed\\), got 1"),
        (
            "fn row(a: array<f32, 4>) -> array<f32, 2> { return array<f32, 2>(a[0], a[1]); }",
            1,
            2,
            "parameter 1 \\(a\\) must be array<f32, 3>",
        ),
        (
            "fn row(a: f32) -> array<f32, 2> { return array<f32, 2>(a, a); }",
            1,
            2,
            "parameter 1 \\(a\\) must be array<f32, 3> .* but is a scalar",
        ),
        (ONE, 1, 3, "must return array<f32, 3> \\(out_cols=3\\), but returns array<f32, 2>"),
        ("fn row(a: array<f32, 3>) { }", 1, 2, "returns nothing"),
    ],
)
def test_signature_mismatches_say_which_part(
    default_ctx: MultiGpuContext,
    data: dict[str, np.ndarray],
    source: str,
    arrays: int,
    out_cols: int,
    text: str,
) -> None:
    with pytest.raises(KernelCompileError, match=text):
        default_ctx.map_rows(source, *([data["p3"]] * arrays), out_cols=out_cols)


def test_bad_arguments(default_ctx: MultiGpuContext, data: dict[str, np.ndarray]) -> None:
    with pytest.raises(
        ShapeError, match=r"arrays\[1\]: expected shape \(5003, 4\) \(the rows of arrays\[0\]\)"
    ):
        default_ctx.map_rows(THREE, data["a2"], data["b4"][:10], data["w1"], out_cols=1)
    with pytest.raises(ShapeError, match=r"arrays\[0\]: expected shape \(N, C\) or \(C,\)"):
        default_ctx.map_rows(ONE, np.zeros((2, 2, 3)), out_cols=2)
    with pytest.raises(InvalidArgumentError, match="out_cols"):
        default_ctx.map_rows(ONE, data["p3"], out_cols=0)
    with pytest.raises(InvalidArgumentError, match="arrays: expected at least one"):
        default_ctx.map_rows(ONE, out_cols=2)
    with pytest.raises(InvalidArgumentError, match=r"params\['x'\]: expected a real number"):
        default_ctx.map_rows(ONE, data["p3"], out_cols=2, params={"x": "1"})
    with pytest.raises(InvalidArgumentError, match="params: expected names that are WGSL"):
        default_ctx.map_rows(ONE, data["p3"], out_cols=2, params={"not a name": 1.0})
    with pytest.raises(InvalidArgumentError, match="amari_"):
        default_ctx.map_rows(ONE, data["p3"], out_cols=2, params={"amari_n": 1.0})
    with pytest.raises(TypeError, match="source: expected WGSL text"):
        default_ctx.map_rows(b"fn row()", data["p3"], out_cols=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="arrays\\[0\\]"):
        default_ctx.map_rows(ONE, np.array([["a", "b", "c"]]), out_cols=2)


@st.composite
def _linear_kernels(draw: st.DrawFn) -> tuple[str, list[int], int, np.ndarray, list[bool]]:
    """A random linear row function: 1-4 arrays of 1-5 columns (some broadcast), K outputs,
    ``out[j] = sum over inputs of coef[j, i] * x[i]`` with the coefficients written into the
    WGSL as literals."""
    widths = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    broadcast = [draw(st.booleans()) for _ in widths]
    broadcast[draw(st.integers(0, len(widths) - 1))] = False  # at least one (N, C) array
    k = draw(st.integers(1, 4))
    coef = (
        np.array(
            draw(st.lists(st.integers(-8, 8), min_size=k * sum(widths), max_size=k * sum(widths))),
            np.float64,
        ).reshape(k, sum(widths))
        / 4
    )
    names = [f"x{i}" for i in range(len(widths))]
    params = ", ".join(f"{n}: array<f32, {w}>" for n, w in zip(names, widths))
    flat = [f"{n}[{c}]" for n, w in zip(names, widths) for c in range(w)]
    terms = [
        " + ".join(f"({coef[j, i]:.2f}) * {flat[i]}" for i in range(len(flat))) for j in range(k)
    ]
    source = (
        f"fn row({params}) -> array<f32, {k}> {{\n    return array<f32, {k}>(\n        "
        + ",\n        ".join(terms)
        + ");\n}\n"
    )
    return source, widths, k, coef, broadcast


@settings(max_examples=12, deadline=None)
@given(kernel=_linear_kernels(), seed=st.integers(0, 2**32 - 1))
def test_random_linear_row_functions_match_float64(
    default_ctx: MultiGpuContext,
    kernel: tuple[str, list[int], int, np.ndarray, list[bool]],
    seed: int,
) -> None:
    source, widths, k, coef, broadcast = kernel
    rng = np.random.default_rng(seed)
    n = 300
    arrays = [
        rng.standard_normal(w if b else (n, w)).astype(np.float32)
        for w, b in zip(widths, broadcast)
    ]
    got = default_ctx.map_rows(source, *arrays, out_cols=k)
    full = np.concatenate(
        [np.broadcast_to(a.astype(np.float64), (n, a.shape[-1])) for a in arrays], axis=1
    )
    np.testing.assert_allclose(got, full @ coef.T, rtol=1e-5, atol=1e-4)


def test_a_context_with_only_the_host_device_is_refused_before_any_work() -> None:
    """The host CPU device cannot run WGSL: a host-only context (the default one on a
    machine without a GPU) gets an error naming the cause, for numpy and resident rows."""
    with MultiGpuContext(backends=["host"]) as ctx:
        x = RNG.standard_normal((10, 3)).astype(np.float32)
        with pytest.raises(InvalidArgumentError, match="ctx: expected a context with a wgpu"):
            ctx.map_rows(ONE, x, out_cols=2)
        resident = ctx.asarray(x)
        before = sum(s["resident_bytes"] for s in ctx.stats())
        with pytest.raises(InvalidArgumentError, match="only device is the host"):
            ctx.map_rows(ONE, resident, out_cols=2)
        assert np.array_equal(resident.numpy(), x)
        assert sum(s["resident_bytes"] for s in ctx.stats()) == before == x.nbytes
