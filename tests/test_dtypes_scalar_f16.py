"""float16 ``scalar_product``: float16 in, float16 out. Its one value per row is the float32
scalar product of the widened operands (the float32 kernel, on every device) rounded once to
float16 on the host, round-to-nearest-even and past 65504 to infinity (numpy's ``astype``, as
the other float16 kernels round); so the same bits on lavapipe, the host, both, any device
count and strategy, and within float16 rounding of a longdouble reference. float16
DeviceArray operands are refused: their result would be a float16 DeviceArray of one value
per row, a layout DeviceArrays do not hold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import amari_gpu
import numpy as np
import pytest
from amari_gpu.errors import InvalidArgumentError
from hypothesis import given, settings
from hypothesis import strategies as st

CHUNK = 64
_HOST: list[amari_gpu.MultiGpuContext] = []
"""The module's host context, which computes the float32 references."""


@pytest.fixture(scope="module")
def contexts() -> Iterator[dict[str, amari_gpu.MultiGpuContext]]:
    made = {
        "vulkan": amari_gpu.MultiGpuContext(chunk_items=CHUNK, backends=["vulkan"]),
        "host": amari_gpu.MultiGpuContext(chunk_items=CHUNK, backends=["host"]),
        "vulkan+host": amari_gpu.MultiGpuContext(chunk_items=CHUNK, backends=["vulkan", "host"]),
        "vulkan x2 + gl + host": amari_gpu.MultiGpuContext(
            chunk_items=CHUNK, backends=["vulkan", "gl", "host"], devices_per_adapter=2
        ),
    }
    _HOST[:] = [made["host"]]
    yield made
    for ctx in made.values():
        ctx.close()


def _f16_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """float16 multivectors of varied magnitude: scalar products past float16's range (which
    round to infinity) and in its subnormals among them."""
    x = rng.uniform(-1.0, 1.0, size=(*shape, 8))
    scale = np.choose(np.arange(x.size // 8).reshape(shape) % 5, [1.0, 256.0, 2.0**-10, 1, 8])
    return (x * scale[..., None]).astype(np.float16)


def _rounded(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What a float16 scalar product must be, bit for bit: the float32 one of the widened
    operands (the float32 kernel, on the host) rounded once to float16."""
    wide = _HOST[0].scalar_product(a.astype(np.float32), b.astype(np.float32))
    with np.errstate(over="ignore"):
        return np.asarray(wide).astype(np.float16)


def _bits(x: Any) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


@pytest.mark.parametrize("n", [1, 7, 700])
def test_float16_in_float16_out_with_the_same_bits_everywhere(contexts, n):
    rng = np.random.default_rng(28 + n)
    a, b = _f16_rows(rng, (n,)), _f16_rows(rng, (n,))
    before = (a.copy(), b.copy())
    want = _rounded(a, b)
    if n == 700:
        assert np.isinf(want).any() and (np.abs(want[want != 0]) < 2.0**-14).any()
    for name, ctx in contexts.items():
        for strategy in ("balanced", "adaptive"):
            got = ctx.scalar_product(a, b, strategy=strategy)
            assert got.dtype == np.float16 and got.shape == (n,), name
            np.testing.assert_array_equal(_bits(got), _bits(want), f"{name} {strategy}")
    np.testing.assert_array_equal(_bits(a), _bits(before[0]), "a kept")
    np.testing.assert_array_equal(_bits(b), _bits(before[1]), "b kept")


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=1, max_value=300), st.integers(min_value=0, max_value=2**32 - 1))
def test_float16_is_within_float16_rounding_of_a_longdouble_reference(contexts, n, seed):
    rng = np.random.default_rng(seed)
    a, b = _f16_rows(rng, (n,)), _f16_rows(rng, (n,))
    # Cl(3,0): <a b>_0 = a0 b0 + a1 b1 + a2 b2 - a3 b3 + a4 b4 - a5 b5 - a6 b6 - a7 b7.
    sign = np.array([1, 1, 1, -1, 1, -1, -1, -1], dtype=np.longdouble)
    terms = a.astype(np.longdouble) * b.astype(np.longdouble) * sign
    ref, bound = terms.sum(axis=1), np.abs(terms).sum(axis=1)
    want = _rounded(a, b)
    for name in ("vulkan", "host"):
        got = contexts[name].scalar_product(a, b)
        np.testing.assert_array_equal(_bits(got), _bits(want), name)
    # One float16 rounding (half an ulp, 2^-25 in the subnormals) plus the float32 chain's
    # error (8 terms, 2^-24 of their magnitudes each); past float16's range: infinity.
    finite = np.abs(ref) < 65504
    err = np.abs(want.astype(np.longdouble) - ref)
    assert (
        err[finite] <= 2.0**-11 * np.abs(ref[finite]) + 2.0**-25 + 8 * 2.0**-24 * bound[finite]
    ).all()
    assert np.isinf(want[np.abs(ref) >= 65520]).all()


def test_shapes_broadcast_and_two_single_multivectors_give_float16(contexts):
    ctx = contexts["vulkan+host"]
    rng = np.random.default_rng(5)
    a, b, one = _f16_rows(rng, (2, 3)), _f16_rows(rng, (3,)), _f16_rows(rng, ())
    for x, y, shape in ((a, b, (2, 3)), (one, b, (3,)), (b, one, (3,)), (one, one, ())):
        got = ctx.scalar_product(x, y)
        assert got.dtype == np.float16 and got.shape == shape
        wide = np.broadcast_to(x, (*shape, 8)).reshape(-1, 8)
        other = np.broadcast_to(y, (*shape, 8)).reshape(-1, 8)
        np.testing.assert_array_equal(_bits(got).reshape(-1), _bits(_rounded(wide, other)))


def test_rows_past_lavapipes_loop_cap_match_the_host(contexts):
    rng = np.random.default_rng(6)
    n = 1 << 17
    a, b = _f16_rows(rng, (n,)), _f16_rows(rng, (n,))
    got = contexts["vulkan"].scalar_product(a, b)
    np.testing.assert_array_equal(_bits(got), _bits(contexts["host"].scalar_product(a, b)))
    np.testing.assert_array_equal(_bits(got), _bits(_rounded(a, b)))


def test_out_and_dtype_float16_are_taken(contexts):
    ctx = contexts["host"]
    rng = np.random.default_rng(7)
    a, b = _f16_rows(rng, (9,)), _f16_rows(rng, (9,))
    out = np.full(9, np.nan, dtype=np.float16)
    assert ctx.scalar_product(a, b, out=out) is out
    np.testing.assert_array_equal(_bits(out), _bits(_rounded(a, b)))
    with pytest.raises(TypeError, match=r"^out: expected dtype float16 \(the result's\)"):
        ctx.scalar_product(a, b, out=np.zeros(9, np.float32))
    # dtype=float16 rounds wider operands to float16 first, as for every other operation.
    for wide in (np.float32, np.float64):
        x, y = a.astype(wide) * 1.001, b.astype(wide)
        got = ctx.scalar_product(x, y, dtype=np.float16)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(
            _bits(got), _bits(ctx.scalar_product(x.astype(np.float16), y.astype(np.float16)))
        )
    # float16 beside float32 promotes to float32, as numpy does.
    assert ctx.scalar_product(a, b.astype(np.float32)).dtype == np.float32


def test_float16_device_arrays_are_refused_naming_the_operand(contexts):
    ctx = contexts["vulkan+host"]
    rng = np.random.default_rng(8)
    a, b = _f16_rows(rng, (10,)), _f16_rows(rng, (10,))
    da = ctx.asarray(a)
    assert da.dtype == np.float16
    with pytest.raises(
        InvalidArgumentError, match=r"^a: a float16 scalar_product of DeviceArrays would be"
    ):
        ctx.scalar_product(da, b)
    # float32 DeviceArrays still give a float32 DeviceArray (a float16 numpy partner widened).
    d32 = ctx.asarray(a.astype(np.float32))
    got = ctx.scalar_product(d32, b.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), ctx.scalar_product(a.astype(np.float32), b))
