"""float16 geometric algebra: float16 in, float16 out, stored as float16 and computed by the
float32 kernels' chains (float32 accumulation, one rounding to float16 per result) on lavapipe
(Vulkan, ``SHADER_F16``) and on the host device (F16C, or its scalar twin). Every result is
the float32 product of the widened operands rounded once to float16 (numpy's ``astype``,
round-to-nearest-even), so within float16 rounding of a longdouble reference; the same bits
on every device mix, device count and strategy; a float16 call moves half the bytes of the
float32 one. llvmpipe (GL, no ``SHADER_F16``) is left out of float16 work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import amari_gpu
import numpy as np
import pytest
from _ga_helpers import table
from hypothesis import given, settings
from hypothesis import strategies as st

CHUNK = 64
PRODUCTS = ["geometric_product", "outer_product", "inner_product"]


def _context(**options: Any) -> amari_gpu.MultiGpuContext:
    return amari_gpu.MultiGpuContext(chunk_items=CHUNK, **options)


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, amari_gpu.MultiGpuContext]]:
    made = {
        "vulkan": _context(backends=["vulkan"]),
        "host": _context(backends=["host"]),
        "vulkan+host": _context(backends=["vulkan", "host"]),
        "vulkan x2 + gl + host": _context(backends=["vulkan", "gl", "host"], devices_per_adapter=2),
    }
    yield made
    for ctx in made.values():
        ctx.close()


def _f16_rows(rng: np.random.Generator, n: int, width: int) -> np.ndarray:
    """Rows of float16 values of varied magnitude: products past float16's range (which
    round to infinity) and in its subnormals among them."""
    x = rng.uniform(-1.0, 1.0, size=(n, width))
    scale = np.choose(np.arange(n) % 5, [1.0, 256.0, 2.0**-10, 1.0, 8.0])
    return (x * scale[:, None]).astype(np.float16)


def _f32_rounded(ctx: amari_gpu.MultiGpuContext, op: str, *args: np.ndarray) -> np.ndarray:
    """The float32 kernel on the widened operands, rounded once to float16 (numpy's
    round-to-nearest-even conversion): what a float16 result must be, bit for bit."""
    wide = [a.astype(np.float32) for a in args]
    result = getattr(ctx, op)(*wide)
    with np.errstate(over="ignore"):  # past 65504: infinity, as the kernels round it
        return result.astype(np.float16)


def _same_bits_everywhere(
    contexts: dict[str, amari_gpu.MultiGpuContext], op: str, args: tuple[Any, ...], want: Any
) -> None:
    """``op`` on ``args`` gives float16 ``want`` bit for bit in every context (the mixed one
    last) under both strategies, the inputs kept."""
    before = [x.copy() for x in args]
    for name, ctx in contexts.items():
        for strategy in ("balanced", "adaptive"):
            got = getattr(ctx, op)(*args, strategy=strategy)
            assert got.dtype == np.float16, name
            np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16), name)
    for x, y in zip(args, before, strict=True):
        np.testing.assert_array_equal(x.view(np.uint16), y.view(np.uint16), "input kept")


@pytest.mark.parametrize("op", [*PRODUCTS, "reverse", "grade_involution"])
def test_float16_in_float16_out_with_the_same_bits_everywhere(contexts, op):
    rng = np.random.default_rng(28)
    a, b = _f16_rows(rng, 700, 8), _f16_rows(rng, 700, 8)
    args = (a, b) if op in PRODUCTS else (a,)
    want = _f32_rounded(contexts["vulkan"], op, *args)
    if op == "geometric_product":
        # Results past float16's range and in its subnormals are among them.
        assert np.isinf(want).any() and (np.abs(want[np.isfinite(want)]) < 2.0**-14).any()
    _same_bits_everywhere(contexts, op, args, want)


def test_the_mixed_context_leaves_gl_out_of_float16_work_and_says_why(contexts):
    ctx = contexts["vulkan x2 + gl + host"]
    rng = np.random.default_rng(1)
    ctx.geometric_product(_f16_rows(rng, 900, 8), _f16_rows(rng, 900, 8), strategy="balanced")
    plan = ctx.last_plan
    assert plan is not None
    gl = {d.id for d in ctx.devices if d.adapter.backend == "gl"}
    assert gl and not gl & {w.device_id for w in plan}, plan
    assert {device for device, _ in plan.left_out} == gl
    for _, reason in plan.left_out:
        assert reason.startswith("float16 needs SHADER_F16: device"), reason
        assert reason.endswith("(gl) lacks it"), reason


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=1, max_value=300),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.sampled_from(PRODUCTS),
)
def test_float16_is_the_float32_accumulation_rounded_once_within_float16_rounding(
    contexts, n, seed, op
):
    rng = np.random.default_rng(seed)
    a, b = _f16_rows(rng, n, 8), _f16_rows(rng, n, 8)
    want = _f32_rounded(contexts["host"], op, a, b)
    for name in ("vulkan", "host"):
        got = getattr(contexts[name], op)(a, b)
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16), name)
    # Against longdouble: one float16 rounding (half an ulp, or 2^-25 in the subnormals)
    # plus the float32 chain's error (at most 8 terms, 2^-24 of their magnitudes each).
    t = table(3, 0, 0)
    keep = {
        "geometric_product": np.ones_like(t.k, dtype=bool),
        "outer_product": t.grade[t.k] == t.grade[t.i] + t.grade[t.j],
        "inner_product": (t.grade[t.j] >= t.grade[t.i])
        & (t.grade[t.k] == t.grade[t.j] - t.grade[t.i]),
    }[op]
    al, bl = a.astype(np.longdouble), b.astype(np.longdouble)
    terms = al[:, t.i[keep]] * bl[:, t.j[keep]] * t.coef[keep]
    ref = np.zeros((n, 8), dtype=np.longdouble)
    bound = np.zeros((n, 8), dtype=np.longdouble)
    np.add.at(ref.T, t.k[keep], terms.T)
    np.add.at(bound.T, t.k[keep], np.abs(terms).T)
    finite = np.abs(ref) < 65504
    err = np.abs(want.astype(np.longdouble) - ref)
    allowed = 2.0**-11 * np.abs(ref) + 2.0**-25 + 8 * 2.0**-24 * bound
    assert (err[finite] <= allowed[finite]).all()


def test_dtype_float16_on_float32_input_computes_in_float16_storage(contexts):
    ctx = contexts["host"]
    rng = np.random.default_rng(2)
    a32 = rng.uniform(-1, 1, size=(100, 8)).astype(np.float32)
    b32 = rng.uniform(-1, 1, size=(100, 8)).astype(np.float32)
    got = ctx.geometric_product(a32, b32, dtype=np.float16)
    assert got.dtype == np.float16
    a16, b16 = a32.astype(np.float16), b32.astype(np.float16)
    want = ctx.geometric_product(a16, b16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    # float16 beside float32 promotes to float32, as numpy does.
    assert ctx.geometric_product(a16, b32).dtype == np.float32


def _normalize_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """float16 rows for normalize: varied magnitudes (squares past float16's range and in its
    subnormals, which the float32 steps hold), a zero row, a row with an infinity and one with
    a NaN."""
    x = _f16_rows(rng, n, 8)
    x[3] = 0
    x[5, 2] = np.inf
    x[7, 6] = np.nan
    x[11] = np.float16(6e4)
    return x


def _sandwich_cases(rng: np.random.Generator, n: int) -> dict[str, tuple[np.ndarray, ...]]:
    """A sandwich by one rotor (the map built from the widened rotor), by a batch of rotors,
    and a lone row beside one rotor (bound as one rotor's map too)."""
    rotor = rng.uniform(-1.0, 1.0, 8).astype(np.float16)
    return {
        "one rotor": (rotor, _f16_rows(rng, n, 8)),
        "a rotor per row": (_f16_rows(rng, n, 8), _f16_rows(rng, n, 8)),
        "a lone row": (rotor, _f16_rows(rng, 1, 8)),
    }


@pytest.mark.parametrize("case", ["one rotor", "a rotor per row", "a lone row", "normalize"])
def test_sandwich_and_normalize_in_float16_round_the_float32_result_once_everywhere(contexts, case):
    rng = np.random.default_rng(29)
    if case == "normalize":
        op, args = "normalize", (_normalize_rows(rng, 700),)
    else:
        op, args = "sandwich", _sandwich_cases(rng, 700)[case]
    want = _f32_rounded(contexts["vulkan"], op, *args)
    assert want.dtype == np.float16 and np.isfinite(want).any()
    _same_bits_everywhere(contexts, op, args, want)
    plan = contexts["vulkan x2 + gl + host"].last_plan
    assert plan is not None
    assert [r for _, r in plan.left_out if "(gl) lacks it" in r], plan.left_out


def test_float16_normalize_is_within_float16_rounding_of_a_float64_reference(contexts):
    rng = np.random.default_rng(30)
    x = _normalize_rows(rng, 500)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        # Cl(3,0) is Euclidean: <x x~>_0 is the sum of the squares.
        ref = wide / np.sqrt(np.sum(wide * wide, axis=1, keepdims=True))
    finite = np.isfinite(wide).all(axis=1) & (np.abs(wide).sum(axis=1) > 0)
    for name in ("vulkan", "host"):
        got = contexts[name].normalize(x).astype(np.float64)
        # One float16 rounding (half an ulp, 2^-25 in the subnormals) plus the float32 steps'
        # error (a few ulps of float32 of the unit-norm result).
        err = np.abs(got - ref)[finite]
        assert (err <= 2.0**-11 * np.abs(ref[finite]) + 2.0**-25 + 16 * 2.0**-24).all(), name
        np.testing.assert_array_equal(got[3], 0.0, name)
        assert np.isnan(got[7]).all() and np.isnan(got[5, 2]), name


@pytest.mark.parametrize("case", ["one rotor", "a rotor per row"])
def test_float16_sandwich_is_within_float16_rounding_of_a_longdouble_reference(contexts, case):
    rng = np.random.default_rng(31)
    r, x = _sandwich_cases(rng, 300)[case]
    t = table(3, 0, 0)
    rl = np.broadcast_to(r.astype(np.longdouble), x.shape)
    xl = x.astype(np.longdouble)

    def product(p: np.ndarray, q: np.ndarray, sign: np.ndarray) -> np.ndarray:
        out = np.zeros(p.shape, dtype=np.longdouble)
        np.add.at(out.T, t.k, (p[:, t.i] * q[:, t.j] * t.coef * sign).T)
        return out

    # r x r~ with r~'s reversal signs (grades 2 and 3 flip) on the right factor.
    reverse = np.where(np.isin(t.grade[t.j], [2, 3]), -1.0, 1.0)
    ref = product(product(rl, xl, 1.0), rl, reverse)
    # Every term is a product r_i x_j r_l: their magnitudes sum to at most this.
    bound = np.abs(rl).sum(axis=1) ** 2 * np.abs(xl).sum(axis=1)
    finite = np.abs(ref) < 65504
    for name in ("vulkan", "host"):
        got = contexts[name].sandwich(r, x).astype(np.longdouble)
        err = np.abs(got - ref)
        allowed = 2.0**-11 * np.abs(ref) + 2.0**-25 + 32 * 2.0**-24 * bound[:, None]
        assert (err[finite] <= allowed[finite]).all(), name


def test_a_float16_product_moves_half_the_bytes_of_float32(contexts):
    ctx = contexts["host"]
    n = 1 << 20
    rng = np.random.default_rng(4)
    a, b = _f16_rows(rng, n, 8), _f16_rows(rng, n, 8)
    moved = {}
    for dtype in (np.float16, np.float32):
        with ctx.profile() as prof:
            ctx.geometric_product(a.astype(dtype), b.astype(dtype))
        (call,) = [k for k in prof.kernel_calls if "ga_cl300_geometric" in k["kernel"]]
        moved[dtype] = call["items"] * call["bytes_per_item"]
    assert moved[np.float32] == 3 * 8 * 4 * n
    assert moved[np.float16] * 2 == moved[np.float32]


@pytest.mark.parametrize("name", ["vulkan", "host", "vulkan+host"])
def test_float16_device_arrays_sandwich_and_normalize_in_float16(contexts, name):
    ctx = contexts[name]
    rng = np.random.default_rng(32)
    r, x = _sandwich_cases(rng, 300)["one rotor"]
    r = r[None, :]  # a 1-D array is rows of one value for asarray
    rows = _normalize_rows(rng, 300)
    dr, dx, drows = ctx.asarray(r), ctx.asarray(x), ctx.asarray(rows)
    assert dr.dtype == dx.dtype == drows.dtype == np.float16
    for got, want in (
        (ctx.sandwich(dr, dx), ctx.sandwich(r, x)),
        (ctx.sandwich(r, dx), ctx.sandwich(r, x)),
        (ctx.normalize(drows), ctx.normalize(rows)),
    ):
        assert got.dtype == want.dtype == np.float16
        np.testing.assert_array_equal(got.numpy().view(np.uint16), want.view(np.uint16))
