"""float64 ``map_rows``: float64 rows reach the user's ``row`` as ``array<f64, C>`` (the
wrapper's ``amari_float`` is ``f64``), the result is float64 computed in float64 on lavapipe
(Vulkan, ``SHADER_F64``), the same bits for every device count and strategy, and llvmpipe
(GL, no float64) is left out of float64 rows; a context without a float64 wgpu device
refuses them naming its devices. Single IEEE operations (+ - *) give numpy's float64 bits,
edge values included (hypothesis); a loop past Mesa's cap is still caught in float64."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from amari_gpu import STRATEGIES, InvalidArgumentError, KernelCompileError, MultiGpuContext
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

RNG = np.random.default_rng(6464)
N = 3_001

# Written once with the wrapper's element type: runs on float32 and float64 rows alike.
OPS = """
fn row(a: array<amari_float, 2>) -> array<amari_float, 3> {
    return array<amari_float, 3>(a[0] + a[1], a[0] - a[1], a[0] * a[1]);
}
"""

# A longer row function, with a helper and a broadcast row.
AFFINE = """
fn scaled(x: amari_float) -> amari_float { return amari_float(params.scale) * x; }

fn row(p: array<amari_float, 3>, off: array<amari_float, 3>) -> array<amari_float, 3> {
    var r: array<amari_float, 3>;
    for (var j = 0; j < 3; j++) {
        r[j] = scaled(p[j]) + off[j];
    }
    return r;
}
"""

F32_ONLY = """
fn row(a: array<f32, 2>) -> array<f32, 1> {
    return array<f32, 1>(a[0]);
}
"""

# Row i loops a[i] times and returns the count.
PER_ROW = """
fn row(a: array<amari_float, 1>) -> array<amari_float, 1> {
    var s = amari_float(0.0);
    for (var k = 0u; k < u32(a[0]); k++) {
        s += amari_float(1.0);
    }
    return array<amari_float, 1>(s);
}
"""


def _ops_reference(a: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.stack([a[:, 0] + a[:, 1], a[:, 0] - a[:, 1], a[:, 0] * a[:, 1]], axis=1)


@pytest.fixture(scope="module")
def vulkan() -> Iterator[MultiGpuContext]:
    ctx = MultiGpuContext(backends=["vulkan"], chunk_items=256)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def gl_vulkan() -> Iterator[MultiGpuContext]:
    """lavapipe, llvmpipe GL and the host device: float64 rows go to lavapipe only."""
    ctx = MultiGpuContext(backends=["gl", "vulkan", "host"], chunk_items=256)
    yield ctx
    ctx.close()


def test_float64_rows_compute_in_float64_to_numpys_bits(vulkan: MultiGpuContext) -> None:
    # Values whose float32 rounding would be visible: 1 + 2^-40 is not a float32.
    a = RNG.standard_normal((N, 2)) * (1.0 + 2.0**-40)
    before = a.copy()
    got = vulkan.map_rows(OPS, a, out_cols=3)
    assert got.dtype == np.float64 and got.shape == (N, 3)
    # Each output is one IEEE operation: numpy's float64 bits exactly.
    assert np.array_equal(got.view(np.uint64), _ops_reference(a).view(np.uint64))
    assert np.array_equal(a, before)
    tiny = np.array([[1.0, 2.0**-40]])
    assert vulkan.map_rows(OPS, tiny, out_cols=3)[0, 0] == 1.0 + 2.0**-40


def test_the_same_source_runs_float32_rows_as_before(vulkan: MultiGpuContext) -> None:
    a = RNG.standard_normal((N, 2)).astype(np.float32)
    got = vulkan.map_rows(OPS, a, out_cols=3)
    assert got.dtype == np.float32
    assert np.array_equal(got, _ops_reference(a))


def test_dtype_overrides_the_promotion_both_ways(vulkan: MultiGpuContext) -> None:
    a64 = RNG.standard_normal((N, 2))
    as32 = vulkan.map_rows(F32_ONLY, a64, out_cols=1, dtype=np.float32)
    assert as32.dtype == np.float32
    assert np.array_equal(as32[:, 0], a64[:, 0].astype(np.float32))
    up = vulkan.map_rows(OPS, a64.astype(np.float32), out_cols=3, dtype=np.float64)
    assert up.dtype == np.float64
    assert np.array_equal(up, _ops_reference(a64.astype(np.float32).astype(np.float64)))
    # Integers compute in float64, as numpy's true division would.
    ints = np.arange(8, dtype=np.int64).reshape(4, 2)
    assert vulkan.map_rows(OPS, ints, out_cols=3).dtype == np.float64
    with pytest.raises(InvalidArgumentError, match="dtype: this operation computes in"):
        vulkan.map_rows(OPS, a64, out_cols=3, dtype=np.float16)


def test_float64_rows_with_a_float32_kernel_say_how_to_write_one(vulkan: MultiGpuContext) -> None:
    with pytest.raises(KernelCompileError) as raised:
        vulkan.map_rows(F32_ONLY, RNG.standard_normal((5, 2)), out_cols=1)
    message = str(raised.value)
    assert "parameter 1 (a) must be array<f64, 2>" in message, message
    assert "but is array<f32, 2>" in message, message
    assert "amari_float" in message and "dtype=" in message, message


def test_bits_agree_over_device_counts_and_strategies(
    vulkan: MultiGpuContext, ctx3: MultiGpuContext, gl_vulkan: MultiGpuContext
) -> None:
    p = RNG.standard_normal((N, 3))
    off = RNG.standard_normal(3)
    want = vulkan.map_rows(AFFINE, p, off, out_cols=3, params={"scale": 0.5})
    assert want.dtype == np.float64
    reference = 0.5 * p + off
    np.testing.assert_allclose(want, reference, rtol=4e-16, atol=4e-16)
    for ctx in (ctx3, gl_vulkan):
        for strategy in STRATEGIES:
            got = ctx.map_rows(AFFINE, p, off, out_cols=3, params={"scale": 0.5}, strategy=strategy)
            assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), (ctx, strategy)


def test_float64_rows_run_on_the_vulkan_devices_of_a_mixed_context(
    gl_vulkan: MultiGpuContext,
) -> None:
    kinds = {d.id: d.adapter.backend for d in gl_vulkan.devices}
    assert set(kinds.values()) == {"vulkan", "gl", "host"}
    got = gl_vulkan.map_rows(OPS, RNG.standard_normal((N, 2)), out_cols=3, strategy="balanced")
    assert got.dtype == np.float64
    plan = gl_vulkan.last_plan
    assert plan is not None
    assert {kinds[w.device_id] for w in plan} == {"vulkan"}, plan
    assert {kinds[d] for d, _ in plan.left_out} == {"gl", "host"}, plan.left_out


def test_a_context_without_a_float64_wgpu_device_refuses_naming_them() -> None:
    with MultiGpuContext(backends=["gl", "host"], devices_per_adapter=2) as ctx:
        with pytest.raises(InvalidArgumentError) as raised:
            ctx.map_rows(OPS, np.ones((4, 2)), out_cols=3)
        message = str(raised.value)
        assert message.startswith("dtype: map_rows computes float64 rows on wgpu devices"), message
        for device in ctx.devices:
            if device.adapter.backend == "gl":
                assert f"float64 needs SHADER_F64: device {device.id} '" in message, message
        assert "dtype=numpy.float32" in message
        assert ctx.map_rows(OPS, np.ones((4, 2)), out_cols=3, dtype=np.float32).dtype == np.float32


def test_out_and_deviceArrays_follow_the_rows_dtype(vulkan: MultiGpuContext) -> None:
    a = RNG.standard_normal((64, 2))
    out = np.zeros((64, 3))
    assert vulkan.map_rows(OPS, a, out_cols=3, out=out) is out
    assert np.array_equal(out, _ops_reference(a))
    with pytest.raises(TypeError, match="out: expected dtype float64"):
        vulkan.map_rows(OPS, a, out_cols=3, out=np.zeros((64, 3), np.float32))
    resident = vulkan.asarray(a.astype(np.float32))
    # DeviceArrays keep their dtype: float64 rows compute in float64, a numpy operand
    # converting to it; a float32 DeviceArray is refused a float64 call by name.
    got = vulkan.map_rows(
        AFFINE, vulkan.asarray(np.ones((64, 3))), np.ones(3), out_cols=3, params={"scale": 1}
    )
    assert got.dtype == np.float64
    with pytest.raises(
        InvalidArgumentError, match=r"arrays\[0\]: expected a DeviceArray of float64"
    ):
        vulkan.map_rows(OPS, resident, out_cols=3, dtype=np.float64)


def test_a_float64_loop_past_the_driver_cap_is_refused(vulkan: MultiGpuContext) -> None:
    counts = np.full((600, 1), 10.0)
    assert np.array_equal(vulkan.map_rows(PER_ROW, counts, out_cols=1), counts)
    counts[500] = 100_000.0
    with pytest.raises(KernelCompileError, match=r"65,535 iterations") as raised:
        vulkan.map_rows(PER_ROW, counts, out_cols=1)
    assert "split a long loop" in str(raised.value)
    assert all(h["healthy"] for h in vulkan.health().values())


EDGES = st.sampled_from(
    [
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        1.0,
        1.0 + 2.0**-52,
        np.inf,
        -np.inf,
        np.nan,
    ]
)


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 300), st.just(2)),
        elements=st.one_of(EDGES, st.floats(allow_nan=True, allow_infinity=True)),
    )
)
def test_single_operations_match_numpy_bits_on_edge_values(
    vulkan: MultiGpuContext, a: np.ndarray
) -> None:
    got = vulkan.map_rows(OPS, a, out_cols=3)
    want = _ops_reference(a)
    same = got.view(np.uint64) == want.view(np.uint64)
    # A NaN's payload is the driver's: any NaN answers a NaN.
    assert np.all(same | (np.isnan(got) & np.isnan(want))), (a, got, want)
