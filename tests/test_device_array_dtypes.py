"""DeviceArrays carry their dtype (issue 28 item 4): ``ctx.asarray`` keeps float16, float32 and
float64 as numpy does (integers and bools as float64, ``dtype=`` overriding), places float64
and float16 rows only on devices that compute in that dtype (saying why in the placement,
refusing in a context with none), and every operation on them computes in their dtype with
the bits of the numpy path of that dtype: elementwise arithmetic (numpy's own ufuncs, edge
values, hypothesis), geometric-algebra products, ``map_rows``; on the host device, lavapipe,
two logical lavapipe devices and a mixed context. Chains keep the dtype; mixed dtypes and
families without resident kernels of a dtype are refused by name; the devices' memory counts
the dtype's bytes."""

from __future__ import annotations

from collections.abc import Iterator

import amari_gpu as ag
import numpy as np
import pytest
from _resident_helpers import same_bits as _same
from amari_gpu import InvalidArgumentError, ShapeError
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# numpy's references meet inf and NaN on purpose (the device side warns of nothing).
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
WIDE = [F64, F16]

BINARY = [np.add, np.subtract, np.multiply, np.divide]
COMPARE = [np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal]
UNARY = [np.negative, np.absolute, np.sqrt]


def _module_ctx(**options: object) -> Iterator[ag.MultiGpuContext]:
    ctx = ag.MultiGpuContext(**options)  # type: ignore[arg-type]
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def host() -> Iterator[ag.MultiGpuContext]:
    yield from _module_ctx(backends=["host"])


@pytest.fixture(scope="module")
def lava() -> Iterator[ag.MultiGpuContext]:
    yield from _module_ctx(backends=["vulkan"], chunk_items=64)


@pytest.fixture(scope="module")
def lava2() -> Iterator[ag.MultiGpuContext]:
    yield from _module_ctx(backends=["vulkan"], devices_per_adapter=2, chunk_items=64)


@pytest.fixture(scope="module")
def mixed() -> Iterator[ag.MultiGpuContext]:
    yield from _module_ctx(backends=["vulkan", "host"], devices_per_adapter=2, chunk_items=64)


@pytest.fixture(scope="module")
def gl() -> Iterator[ag.MultiGpuContext]:
    yield from _module_ctx(backends=["gl"])


@pytest.fixture(scope="module")
def vkgl() -> Iterator[ag.MultiGpuContext]:
    yield from _module_ctx(backends=["vulkan", "gl"], chunk_items=64)


@pytest.fixture(params=["host", "lava", "lava2", "mixed"])
def ctx(request: pytest.FixtureRequest) -> ag.MultiGpuContext:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _edges(dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    return np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max, info.tiny,
         info.smallest_subnormal, -info.smallest_subnormal * 3, 1.0, -2.0, 0.5, 3.0],
        dtype=dtype,
    )  # fmt: skip


def _data(rows: int, cols: int, dtype: np.dtype, seed: int) -> np.ndarray:
    """Random rows of ``dtype`` with every edge value mixed in."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((rows, cols)) * 10).astype(dtype)
    flat = a.reshape(-1)
    edges = _edges(dtype)
    flat[::3] = edges[rng.integers(0, len(edges), len(flat[::3]))]
    return a


# --- asarray: the dtype kept, told and placed ------------------------------------------------


@pytest.mark.parametrize(
    ("source", "dtype", "kept"),
    [
        (np.float16, None, F16),
        (np.float32, None, F32),
        (np.float64, None, F64),
        (np.int32, None, F64),
        (np.bool_, None, F64),
        (np.float64, np.float32, F32),
        (np.float32, np.float64, F64),
        (np.float64, "float16", F16),
    ],
)
def test_asarray_keeps_the_dtype_as_numpy_and_tells_it(
    host: ag.MultiGpuContext, source: type, dtype: object, kept: np.dtype
) -> None:
    a = (np.arange(24).reshape(6, 4) % 5).astype(source)
    x = host.asarray(a, dtype=dtype)
    assert x.dtype == kept
    assert x.nbytes == kept.itemsize * a.size
    assert f"dtype={kept}" in repr(x)
    got = x.numpy()
    assert got.dtype == kept
    assert _same(got, a.astype(kept))
    assert np.asarray(x).dtype == kept
    assert np.asarray(x, dtype=np.float64).dtype == F64


@pytest.mark.parametrize("dtype", WIDE)
def test_upload_and_gather_keep_every_bit(ctx: ag.MultiGpuContext, dtype: np.dtype) -> None:
    a = _data(301, 6, dtype, 1)
    # NaN payloads too: the words cross untouched.
    a.view(_bits(a).dtype).reshape(-1)[7] = 0x7FF0_0000_0000_0123 if dtype == F64 else 0x7C05
    keep = a.copy()
    x = ctx.asarray(a)
    assert np.array_equal(_bits(x.numpy()), _bits(a))
    assert np.array_equal(_bits(a), _bits(keep))  # the input untouched
    rows = x[10:20]
    assert rows.dtype == dtype
    assert np.array_equal(_bits(rows.numpy()), _bits(a[10:20]))


def test_a_row_of_a_float64_array_is_a_float64_vector(ctx: ag.MultiGpuContext) -> None:
    a = _data(40, 5, F64, 2)
    x = ctx.asarray(a)
    assert _same(x[3], a[3])
    assert _same(x[-1] * 2.0, a[-1] * 2.0)


def test_float64_rows_skip_the_gl_device_and_say_why(vkgl: ag.MultiGpuContext) -> None:
    gl_ids = [d.id for d in vkgl.devices if d.adapter.backend == "gl"]
    assert gl_ids, "the context has llvmpipe"
    x = vkgl.asarray(_data(500, 4, F64, 3))
    assert x.sharding and all(device not in gl_ids for device, _, _ in x.sharding)
    plan = vkgl.last_plan
    assert plan is not None
    left = dict(plan.left_out)
    assert set(left) == set(gl_ids)
    assert all("float64 needs SHADER_F64" in why for why in left.values())
    # float32 rows go everywhere, as before.
    y = vkgl.asarray(_data(5000, 4, F32, 3))
    assert {device for device, _, _ in y.sharding} & set(gl_ids)


@pytest.mark.parametrize("dtype", WIDE)
def test_a_context_without_the_dtype_refuses_naming_its_devices(
    gl: ag.MultiGpuContext, dtype: np.dtype
) -> None:
    before = [s["resident_bytes"] for s in gl.stats()]
    with pytest.raises(
        InvalidArgumentError, match=f"no device of this context computes in {dtype}"
    ) as err:
        gl.asarray(np.ones((8, 4), dtype=dtype))
    assert "device 0" in str(err.value)
    assert [s["resident_bytes"] for s in gl.stats()] == before


def test_float16_rows_of_an_odd_width_are_refused(host: ag.MultiGpuContext) -> None:
    with pytest.raises(ShapeError, match="even number of values"):
        host.asarray(np.ones(7, dtype=np.float16))
    with pytest.raises(ShapeError, match=r"got shape \(3, 5\)"):
        host.asarray(np.ones((3, 5)), dtype=np.float16)
    x = host.asarray(np.ones((3, 4), dtype=np.float16))
    with pytest.raises(InvalidArgumentError, match=r"x\[1:2\]"):
        x[1]


def test_asarray_of_a_device_array_does_not_convert_it(host: ag.MultiGpuContext) -> None:
    x = host.asarray(np.ones((4, 2), dtype=np.float64))
    assert host.asarray(x) is x
    assert host.asarray(x, dtype=np.float64) is x
    with pytest.raises(InvalidArgumentError, match=r"float64 DeviceArray.*float32"):
        host.asarray(x, dtype=np.float32)


def test_resident_bytes_count_the_dtype(host: ag.MultiGpuContext) -> None:
    before = sum(s["resident_bytes"] for s in host.stats())
    arrays = {d: host.asarray(np.ones((1000, 8), dtype=d)) for d in (F16, F32, F64)}
    held = sum(s["resident_bytes"] for s in host.stats()) - before
    assert held == 1000 * 8 * (2 + 4 + 8)
    in_use = sum(s["memory_in_use_bytes"] for s in host.stats())
    assert in_use >= held
    for x in arrays.values():
        x.free()
    assert sum(s["resident_bytes"] for s in host.stats()) == before


# --- elementwise: numpy's ufuncs of the dtype, bit for bit ----------------------------------


@pytest.mark.parametrize("dtype", WIDE)
def test_elementwise_is_numpys_bits_in_the_dtype(ctx: ag.MultiGpuContext, dtype: np.dtype) -> None:
    a, b = _data(300, 4, dtype, 4), _data(300, 4, dtype, 5)
    x, y = ctx.asarray(a), ctx.asarray(b, strategy="balanced")
    with np.errstate(all="ignore"):
        for f in BINARY:
            for got, want in [
                (f(x, y), f(a, b)),
                (f(x, b[7]), f(a, b[7])),  # one row for every row
                (f(b[3, 1], x), f(b[3, 1], a)),  # a numpy scalar of the dtype, on the left
                (f(x, 3), f(a, 3)),  # a Python number takes the dtype (NEP 50)
                (f(0.1, x), f(0.1, a)),
            ]:
                assert isinstance(got, ag.DeviceArray) and got.dtype == dtype
                assert _same(got, want), (f.__name__, ctx.devices)
        for f in COMPARE:
            assert _same(f(x, y), f(a, b)), f.__name__
            assert _same(f(x, 1.0), f(a, 1.0)), f.__name__
        for f in UNARY:
            got = f(x)
            assert got.dtype == dtype
            assert _same(got, f(a)), f.__name__


@settings(max_examples=25, deadline=None)
@given(
    pair=st.sampled_from(WIDE).flatmap(
        lambda dt: st.tuples(
            hnp.arrays(dt, (12, 4), elements=hnp.from_dtype(dt)),
            hnp.arrays(dt, (12, 4), elements=hnp.from_dtype(dt)),
        )
    ),
    op=st.sampled_from(BINARY + COMPARE + UNARY),
)
def test_elementwise_matches_numpy_on_any_values_host_and_lavapipe(
    host: ag.MultiGpuContext,
    lava2: ag.MultiGpuContext,
    pair: tuple[np.ndarray, np.ndarray],
    op: np.ufunc,
) -> None:
    a, b = pair
    with np.errstate(all="ignore"):
        want = op(a) if op in UNARY else op(a, b)
        for ctx in (host, lava2):
            x, y = ctx.asarray(a), ctx.asarray(b)
            got = op(x) if op in UNARY else op(x, y)
            assert _same(got, want), (op.__name__, ctx.devices)


@pytest.mark.parametrize("dtype", WIDE)
def test_a_wide_row_is_walked_in_passes_past_the_loop_cap(
    lava: ag.MultiGpuContext, dtype: np.dtype
) -> None:
    # Rows of 70,000 values: one invocation's loop would pass lavapipe's 65,535 trips.
    a = _data(2, 70_000, dtype, 6)
    x = lava.asarray(a)
    with np.errstate(all="ignore"):
        assert _same(x + x, a + a)
        assert _same(x < 0.5, a < 0.5)


def test_chains_keep_the_dtype_and_bits(ctx: ag.MultiGpuContext) -> None:
    a = _data(200, 8, F64, 7)
    b = _data(200, 8, F64, 8)
    x, y = ctx.asarray(a), ctx.asarray(b)
    with np.errstate(all="ignore"):
        got = np.sqrt(np.abs((x * y - 1.5) / (y + 2.0)))
        want = np.sqrt(np.abs((a * b - 1.5) / (b + 2.0)))
    assert got.dtype == F64
    assert _same(got, want)
    out = ctx.asarray(np.zeros((200, 8)))
    np.add(x, y, out=out)
    assert _same(out, a + b)


def test_mixed_dtypes_are_refused_naming_numpys_promotion(host: ag.MultiGpuContext) -> None:
    x64 = host.asarray(np.ones((4, 2)))
    x32 = host.asarray(np.ones((4, 2), dtype=np.float32))
    x16 = host.asarray(np.ones((4, 2), dtype=np.float16))
    with pytest.raises(InvalidArgumentError, match=r"one dtype, got float32 and float64.*float64"):
        x32 + x64
    with pytest.raises(InvalidArgumentError, match="numpy would compute in float64"):
        x32 + np.ones((4, 2))
    with pytest.raises(InvalidArgumentError, match="numpy would compute in float32"):
        x16 * np.float32(2.0)
    # Narrower operands promote into the DeviceArray's dtype, as numpy does.
    assert _same(x64 + np.ones(2, dtype=np.float32), np.full((4, 2), 2.0))
    assert _same(x16 + np.int8(3), np.full((4, 2), 4.0, dtype=np.float16))
    with pytest.raises(TypeError, match="out: expected dtype float64"):
        np.add(x64, x64, out=x32)


# --- kernels on DeviceArrays compute in their dtype ------------------------------------------


@pytest.mark.parametrize("dtype", WIDE)
def test_ga_products_on_device_arrays_are_the_numpy_paths_bits(
    ctx: ag.MultiGpuContext, dtype: np.dtype
) -> None:
    rng = np.random.default_rng(9)
    a = rng.standard_normal((500, 8)).astype(dtype)
    b = rng.standard_normal((500, 8)).astype(dtype)
    x, y = ctx.asarray(a), ctx.asarray(b)
    for name in ("geometric_product", "outer_product", "inner_product"):
        want = getattr(ctx, name)(a, b)
        got = getattr(ctx, name)(x, y)
        assert isinstance(got, ag.DeviceArray) and got.dtype == dtype
        assert _same(got, want), name
        # A numpy operand beside a DeviceArray is uploaded in the call's dtype.
        assert _same(getattr(ctx, name)(x, b), want), name
    assert _same(ctx.reverse(x), ctx.reverse(a))
    # A numpy out of the dtype takes the result gathered; of another dtype, refused.
    out = np.empty((500, 8), dtype)
    assert ctx.geometric_product(x, y, out=out) is out
    assert _same(out, ctx.geometric_product(a, b))
    with pytest.raises(TypeError, match=f"out: expected dtype {dtype}"):
        ctx.geometric_product(x, y, out=np.empty((500, 8), np.float32))
    # A chain stays on the devices in the dtype.
    chained = ctx.geometric_product(ctx.geometric_product(x, y), x) + x
    assert chained.dtype == dtype
    assert _same(chained, ctx.geometric_product(ctx.geometric_product(a, b), a) + a)


def test_ga_on_device_arrays_refuses_a_dtype_they_do_not_hold(host: ag.MultiGpuContext) -> None:
    x64 = host.asarray(np.ones((4, 8)))
    x32 = host.asarray(np.ones((4, 8), dtype=np.float32))
    with pytest.raises(InvalidArgumentError, match="b: expected a DeviceArray of float64"):
        host.geometric_product(x64, x32)
    with pytest.raises(InvalidArgumentError, match="x: expected a DeviceArray of float32"):
        host.reverse(x64, dtype=np.float32)
    # normalize computes in float64 too: a float64 DeviceArray stays float64.
    got = host.normalize(x64)
    assert got.dtype == np.float64
    assert np.array_equal(np.asarray(got), host.normalize(np.ones((4, 8))))


def test_fisher_maps_keep_a_float64_device_arrays_dtype(host: ag.MultiGpuContext) -> None:
    # As tropical products and fisher_information (tests/test_resident_tropical_f64.py,
    # tests/test_resident_fisher_f64.py, tests/test_resident_fisher_maps_f64.py).
    x64 = host.asarray(np.full((4, 4), 0.25))
    got = host.fisher_categorical(x64)
    assert got.dtype == np.float64
    assert _same(got, host.fisher_categorical(np.full((4, 4), 0.25)))
    got = host.fisher_gaussian(np.zeros((4, 4)), x64)
    assert got.dtype == np.float64
    assert _same(got, host.fisher_gaussian(np.zeros((4, 4)), np.full((4, 4), 0.25)))


ROW = """
fn row(a: array<amari_float, 2>, b: array<amari_float, 2>) -> array<amari_float, 2> {
    return array<amari_float, 2>(a[0] * b[1] + a[1], a[0] - b[0]);
}
"""


@pytest.mark.parametrize("name", ["lava", "lava2", "vkgl"])
def test_map_rows_on_float64_device_arrays_is_the_numpy_paths_bits(
    request: pytest.FixtureRequest, name: str
) -> None:
    ctx = request.getfixturevalue(name)
    a, b = _data(700, 2, F64, 10), _data(700, 2, F64, 11)
    want = ctx.map_rows(ROW, a, b, out_cols=2)
    got = ctx.map_rows(ROW, ctx.asarray(a), ctx.asarray(b), out_cols=2)
    assert isinstance(got, ag.DeviceArray) and got.dtype == F64
    assert _same(got, want)
